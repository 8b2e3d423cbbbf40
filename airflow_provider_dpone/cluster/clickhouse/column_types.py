"""Column types: a closed grammar, validated before a type reaches DDL, and rendered the way ClickHouse reports it.

A column type is SQL text that ends up inside ``CREATE TABLE``, so it is parsed, never pasted: a type is a name,
optionally followed by a parenthesised list of arguments, each a nested type, a non-negative integer, or a simple
single-quoted word (a time zone such as ``'UTC'`` or ``'Europe/Berlin'``). Anything else -- quotes that could break
out, comments, semicolons, named tuple fields, enum value lists -- is refused with a stable code and without echoing
the text.

Why canonical rendering: the protocol compares the ordered ``(name, type)`` pairs a member reports
(``system.columns.type``) with the declared ones *as strings*. ClickHouse reports ``Decimal(18, 4)`` and
``DateTime64(3, 'UTC')`` (comma and one space), so declared types are normalized to that spelling before they are
compared or sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from airflow_provider_dpone.core.errors import DponeError

_TOKEN: Final[re.Pattern[str]] = re.compile(
    r"\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<int>[0-9]+)|(?P<quoted>'[A-Za-z0-9_/+\-:.]*')|(?P<punct>[(),]))"
)
MAX_TYPE_LENGTH: Final[int] = 512
MAX_DEPTH: Final[int] = 8


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str


def _tokens(text: str, what: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None:
            raise DponeError("DPONE_CLICKHOUSE_TYPE_UNSUPPORTED", f"{what}: unexpected character at offset {position}")
        kind = match.lastgroup
        assert kind is not None
        tokens.append(_Token(kind, match.group(kind)))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, tokens: list[_Token], what: str) -> None:
        self.tokens = tokens
        self.index = 0
        self.what = what

    def fail(self, reason: str) -> DponeError:
        return DponeError("DPONE_CLICKHOUSE_TYPE_UNSUPPORTED", f"{self.what}: {reason} at token {self.index}")

    def peek(self) -> _Token | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise self.fail("unexpected end")
        self.index += 1
        return token

    def type_(self, depth: int) -> str:
        if depth > MAX_DEPTH:
            raise self.fail("nesting too deep")
        name = self.take()
        if name.kind != "name":
            raise self.fail("type name expected")
        following = self.peek()
        if following is None or following.text != "(":
            return name.text
        self.take()
        arguments = [self.argument(depth + 1)]
        while True:
            token = self.take()
            if token.text == ")":
                return f"{name.text}({', '.join(arguments)})"
            if token.text != ",":
                raise self.fail("',' or ')' expected")
            arguments.append(self.argument(depth + 1))

    def argument(self, depth: int) -> str:
        token = self.peek()
        if token is None:
            raise self.fail("unexpected end")
        if token.kind == "int":
            self.take()
            return str(int(token.text))
        if token.kind == "quoted":
            self.take()
            return token.text
        return self.type_(depth)


def canonical_type(text: str, *, what: str = "column type") -> str:
    """Validate ``text`` against the closed grammar and return ClickHouse's spelling (``Name(a, b)``)."""
    if not isinstance(text, str) or not text.strip():
        raise DponeError("DPONE_CLICKHOUSE_TYPE_UNSUPPORTED", f"{what}: empty")
    if len(text) > MAX_TYPE_LENGTH:
        raise DponeError("DPONE_CLICKHOUSE_TYPE_UNSUPPORTED", f"{what}: longer than {MAX_TYPE_LENGTH} characters")
    parser = _Parser(_tokens(text, what), what)
    rendered = parser.type_(0)
    if parser.peek() is not None:
        raise parser.fail("trailing text")
    return rendered


def canonical_columns(columns: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """``canonical_type`` applied to every ``(name, type)`` pair (names are validated where they are quoted)."""
    return tuple((name, canonical_type(type_, what=f"columns[{index}]")) for index, (name, type_) in enumerate(columns))
