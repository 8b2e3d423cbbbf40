"""Identifier validation and quoting: the only place names become SQL text.

Names from manifests, connections and catalogs are validated as plain identifiers *before* any SQL is built, and
every identifier that reaches SQL goes through one of the quoting functions here. A plain identifier is ASCII letters,
digits and underscores, starting with a letter or underscore, at most 128 characters: that excludes quotes,
backticks, NUL, whitespace and Unicode look-alikes (a Cyrillic a (U+0430) that renders like Latin a), so a quoted
name can never break out of its quotes and a displayed name is never ambiguous.
"""

from __future__ import annotations

import re
from typing import Final

from airflow_provider_dpone.core.errors import DponeError

MAX_IDENTIFIER_LENGTH: Final[int] = 128
_PLAIN: Final[re.Pattern[str]] = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def validate_identifier(name: object, *, what: str = "identifier") -> str:
    """Return ``name`` if it is a plain identifier, else raise ``DPONE_IDENTIFIER_INVALID``.

    The error detail names ``what`` (for example ``sink.table``) and the reason, never the offending text itself:
    a hostile name is not echoed into logs.
    """
    if not isinstance(name, str):
        raise DponeError("DPONE_IDENTIFIER_INVALID", f"{what}: not a string")
    if not name:
        raise DponeError("DPONE_IDENTIFIER_INVALID", f"{what}: empty")
    if len(name) > MAX_IDENTIFIER_LENGTH:
        raise DponeError("DPONE_IDENTIFIER_INVALID", f"{what}: {len(name)} characters > {MAX_IDENTIFIER_LENGTH}")
    if not _PLAIN.fullmatch(name):
        if not name.isascii():
            reason = "non-ASCII character (look-alikes are refused)"
        elif "\x00" in name:
            reason = "NUL character"
        else:
            reason = "character outside [A-Za-z0-9_] or leading digit"
        raise DponeError("DPONE_IDENTIFIER_INVALID", f"{what}: {reason}")
    return name


def quote_clickhouse(name: str) -> str:
    """ClickHouse identifier quoting (backticks) of a validated name."""
    return f"`{validate_identifier(name)}`"


def quote_tsql(name: str) -> str:
    """T-SQL identifier quoting (brackets) of a validated name."""
    return f"[{validate_identifier(name)}]"


def quote_postgres(name: str) -> str:
    """PostgreSQL identifier quoting (double quotes) of a validated name."""
    return f'"{validate_identifier(name)}"'


def qualified_clickhouse(database: str, table: str) -> str:
    """``database.table`` for ClickHouse, both parts validated and quoted."""
    return f"{quote_clickhouse(database)}.{quote_clickhouse(table)}"
