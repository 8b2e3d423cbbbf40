"""SQL literals for ClickHouse: the only place a *value* becomes SQL text (identifiers: ``core/identifiers``).

Values that reach statement text are few and internal (target keys, UUIDs, tokens, authority payloads, versions):
rows never do. Each literal is rendered by a function that accepts exactly one kind of value, so a UUID literal can
only ever contain a canonical UUID and a string literal escapes every character ClickHouse treats specially.
"""

from __future__ import annotations

import re
from typing import Final

_UUID: Final[re.Pattern[str]] = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ESCAPES: Final[dict[str, str]] = {
    "\\": "\\\\",
    "'": "\\'",
    "\x00": "\\0",
    "\b": "\\b",
    "\f": "\\f",
    "\r": "\\r",
    "\n": "\\n",
    "\t": "\\t",
}
_TRANSLATION: Final[dict[int, str]] = {ord(key): value for key, value in _ESCAPES.items()}


def string_literal(value: str) -> str:
    """A single-quoted ClickHouse string literal of ``value`` (backslash escapes for quote, backslash, controls)."""
    if not isinstance(value, str):
        raise TypeError("string_literal takes a str")
    return "'" + value.translate(_TRANSLATION) + "'"


def uuid_literal(value: str) -> str:
    """A UUID literal; only canonical lower-case UUID text is accepted."""
    if not isinstance(value, str) or not _UUID.fullmatch(value):
        raise ValueError("not a canonical lower-case UUID")
    return f"'{value}'"


def uint_literal(value: int) -> str:
    """A non-negative integer literal (bool is refused: ``True`` is not a version)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("not a non-negative integer")
    return str(value)


def settings_clause(settings: dict[str, str | int]) -> str:
    """`` SETTINGS k = v, ...`` in the given order; keys are setting names, values ints or strings."""
    if not settings:
        return ""
    parts = []
    for key, value in settings.items():
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", key):
            raise ValueError("not a setting name")
        parts.append(f"{key} = {uint_literal(value) if isinstance(value, int) else string_literal(value)}")
    return " SETTINGS " + ", ".join(parts)
