"""The column types a cluster publication admits: the canonical encoder profile.

Artifact receipts, candidate checks and the content digest compare typed values. The profile is what the tests prove
exact end to end: integers, floats, Bool, String, FixedString, UUID, IPv4/IPv6, Date/Date32, DateTime/DateTime64 with
an optional time zone, Decimal, each optionally ``Nullable``. Nested and dynamic types (Array, Map, Tuple, Nested,
JSON, Object, Dynamic, Variant, AggregateFunction, ...) and ``LowCardinality`` are outside it in this version: a
column of such a type is refused before any source extraction or member mutation, never published approximately.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

COLUMN_TYPE_UNSUPPORTED: Final[str] = "DPONE_CLICKHOUSE_CLUSTER_COLUMN_TYPE_UNSUPPORTED"

_SCALAR: Final[re.Pattern[str]] = re.compile(
    r"(?:U?Int(?:8|16|32|64|128|256)|Float32|Float64|Bool|String|UUID|IPv4|IPv6|Date|Date32"
    r"|FixedString\(\d+\)"
    r"|Decimal(?:32|64|128|256)?\(\d+(?:, ?\d+)?\)"
    r"|DateTime(?:\('[A-Za-z0-9_/+\-:.]*'\))?"
    r"|DateTime64\(\d+(?:, ?'[A-Za-z0-9_/+\-:.]*')?\))"
)
_NULLABLE: Final[re.Pattern[str]] = re.compile(r"Nullable\((?P<inner>.*)\)")
_CONSTRUCTOR: Final[re.Pattern[str]] = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def unsupported_type(type_text: str) -> str | None:
    """``None`` when ``type_text`` is in the profile; else the outermost unsupported constructor's name."""
    text = type_text.strip()
    nullable = _NULLABLE.fullmatch(text)
    base = nullable.group("inner").strip() if nullable else text
    if _SCALAR.fullmatch(base):
        return None
    constructor = _CONSTRUCTOR.match(base)
    return constructor.group(0) if constructor else "unparsed"


def unsupported_columns(columns: Iterable[tuple[str, str]]) -> str | None:
    """The first column outside the profile as ``columns[i]: Constructor`` (the position, never the name)."""
    for index, (_, type_text) in enumerate(columns):
        constructor = unsupported_type(type_text)
        if constructor is not None:
            return f"columns[{index}]: {constructor}"
    return None
