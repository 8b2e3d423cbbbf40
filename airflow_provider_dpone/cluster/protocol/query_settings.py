"""The query-level ``SETTINGS`` clauses of a source query, found from its text alone (static admission).

The extraction runs under the provider's settings (read-only, bounded in time) and a query may not change them, so
static admission refuses a query that carries a ``SETTINGS name = value`` clause anywhere (the outer query, a
subquery, a ``WITH`` expression). The scan follows ClickHouse's lexer where it matters for that: string literals
(``'...'`` with backslash escapes and doubled quotes), quoted identifiers (``"..."`` and backticks, which may also
spell a setting's name), ``--`` and ``#`` line comments and nestable ``/* */`` block comments are not code; words
are compared case-insensitively. A clause is the keyword ``SETTINGS`` followed by a name and ``=``, so a column or
alias called ``settings`` is not one. The server is the bound behind this scan: under ``readonly = 1`` it refuses a
clause the scan might miss (``artifact_source.extraction_settings``).
"""

from __future__ import annotations

import re
from typing import Final

_TOKEN: Final[re.Pattern[str]] = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<line>(?:--|\#)[^\n]*)
    | (?P<block>/\*)
    | (?P<string>'(?:[^'\\]|\\.|'')*'?)
    | (?P<quoted>"(?:[^"\\]|\\.|"")*"?|`(?:[^`\\]|\\.|``)*`?)
    | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def _block_end(text: str, start: int) -> int:
    """The index after the ``*/`` that closes the block comment opened just before ``start`` (nesting counted)."""
    depth, index = 1, start
    while depth and index < len(text):
        if text.startswith("/*", index):
            depth, index = depth + 1, index + 2
        elif text.startswith("*/", index):
            depth, index = depth - 1, index + 2
        else:
            index += 1
    return index


def _tokens(query: str) -> list[tuple[str, str]]:
    """``(kind, text)`` of every token that is code: words, quoted identifiers (unquoted) and single characters."""
    tokens: list[tuple[str, str]] = []
    index = 0
    while index < len(query):
        match = _TOKEN.match(query, index)
        if match is None:  # unreachable: ``other`` matches any character
            break
        kind = match.lastgroup or "other"
        index = match.end()
        if kind == "block":
            index = _block_end(query, index)
        elif kind == "word":
            tokens.append(("word", match.group().lower()))
        elif kind == "quoted":
            tokens.append(("word", match.group()[1:-1]))
        elif kind == "string":
            tokens.append(("string", ""))
        elif kind == "other":
            tokens.append(("other", match.group()))
    return tokens


def query_settings(query: str) -> tuple[str, ...]:
    """The name of the first setting of every ``SETTINGS`` clause in ``query``, in order (empty: there is none)."""
    tokens = _tokens(query)
    found: list[str] = []
    for position, (kind, text) in enumerate(tokens[:-2]):
        name, equals = tokens[position + 1], tokens[position + 2]
        if kind == "word" and text == "settings" and name[0] == "word" and equals == ("other", "="):
            found.append(name[1])
    return tuple(found)
