"""The statement shapes the replication emulation acts on, found with :mod:`sqltext`'s tokens.

Which table an ``INSERT``, ``DROP``, ``ALTER``/``TRUNCATE``/``DELETE`` or ``SYSTEM SYNC REPLICA`` names, and where a
``CREATE``'s ``Replicated*MergeTree(...)`` engine clause and its arguments are. The engine still parses every
statement it runs: these helpers only decide whether the emulation acts, and return ``None`` for shapes they do not
know, so that the engine answers them (with its own error where the text is wrong).
"""

from __future__ import annotations

from dataclasses import dataclass

from dpone_embedded.sqltext import (
    NUMBER,
    QUOTED,
    STRING,
    WORD,
    CreateHead,
    QualifiedName,
    Token,
    create_head,
    first_keyword,
    head_tokens,
    qualified_name,
    tokens,
)

_HEAD = 48
"""Tokens enough for any statement head these helpers read (a long ``VALUES`` tail is never lexed)."""


def _uppers(found: list[Token], index: int, count: int) -> list[str]:
    return [token.upper for token in found[index : index + count]]


@dataclass(frozen=True)
class EngineArg:
    """One engine argument: its text, whether it is a literal, and its value when it is a string literal."""

    text: str
    constant: bool
    literal: str | None


@dataclass(frozen=True)
class EngineClause:
    """``ENGINE = Name[(args)]`` of a ``CREATE``: the name, its span (``start``..``end``) and its arguments.

    ``settings_at`` is the offset right after a top-level ``SETTINGS`` keyword that follows the engine (``None`` when
    the statement has none) and ``tail_at`` the offset where a ``SETTINGS`` clause would go (before ``COMMENT``/``AS``
    or at the end); ``fills`` says the statement fills the table (``AS SELECT`` without ``EMPTY``).
    """

    name: str
    start: int
    end: int
    args: tuple[EngineArg, ...]
    settings_at: int | None
    tail_at: int
    fills: bool = False


@dataclass(frozen=True)
class CreateStatement:
    head: CreateHead
    engine: EngineClause | None


def create_statement(text: str) -> CreateStatement | None:
    """The head and the engine clause of a ``CREATE``/``ATTACH`` statement (``None`` for other statements)."""
    if first_keyword(text) not in ("CREATE", "ATTACH"):
        return None
    found = list(tokens(text))
    head = create_head(found)
    if head is None:
        return None
    return CreateStatement(head, _engine_clause(text, found, head.next_index))


def _engine_clause(text: str, found: list[Token], start: int) -> EngineClause | None:
    for index in range(start, len(found)):
        if found[index].upper == "ENGINE" and found[index].depth == 0:
            break
    else:
        return None
    index += 1
    if index < len(found) and found[index].text == "=":
        index += 1
    if index >= len(found) or found[index].kind != WORD:
        return None
    name = found[index]
    end, args = name.end, tuple[EngineArg, ...]()
    index += 1
    if index < len(found) and found[index].text == "(":
        args, close = _arguments(text, found, index)
        end = found[close].end
        index = close + 1
    settings_at = None
    tail_at = len(text.rstrip().rstrip(";").rstrip())
    for token in found[index:]:
        if token.depth != 0:
            continue
        if token.upper == "SETTINGS" and settings_at is None:
            settings_at = token.end
        elif token.upper in ("COMMENT", "AS", "EMPTY"):
            tail_at = token.start
            break
    rest = [token.upper for token in found[index:] if token.depth == 0]
    fills = "AS" in rest and "EMPTY" not in rest
    return EngineClause(name.text, name.start, end, args, settings_at, tail_at, fills)


def _arguments(text: str, found: list[Token], open_index: int) -> tuple[tuple[EngineArg, ...], int]:
    """The comma-separated arguments inside the parentheses opened at ``open_index``, and the closing index."""
    depth = found[open_index].depth + 1
    args: list[EngineArg] = []
    current: list[Token] = []
    index = open_index + 1
    while index < len(found):
        token = found[index]
        if token.depth < depth or (token.text == ")" and token.depth == depth - 1):
            break
        if token.text == "," and token.depth == depth:
            args.append(_argument(text, current))
            current = []
        else:
            current.append(token)
        index += 1
    if current:
        args.append(_argument(text, current))
    return tuple(args), min(index, len(found) - 1)


def _argument(text: str, parts: list[Token]) -> EngineArg:
    single = parts[0] if len(parts) == 1 else None
    literal = single.name if single is not None and single.kind == STRING else None
    constant = single is not None and single.kind in (STRING, NUMBER)
    return EngineArg(text[parts[0].start : parts[-1].end], constant, literal)


def is_replicated_merge_tree(engine: str) -> bool:
    """ClickHouse's own test: ``Replicated`` prefix and ``MergeTree`` suffix."""
    return engine.startswith("Replicated") and engine.endswith("MergeTree")


def replicated_engine(text: str) -> str | None:
    """The ``Replicated*`` engine a ``CREATE``/``ATTACH`` asks for, if any (chdb itself cannot run them)."""
    statement = create_statement(text)
    if statement is None or statement.engine is None or not statement.engine.name.startswith("Replicated"):
        return None
    return statement.engine.name


@dataclass(frozen=True)
class InsertStatement:
    """``INSERT INTO [TABLE] [db.]t [(columns)] ...``: the table, the column list text and where the rest begins.

    ``kind`` says what follows: ``values`` (``payload`` is the first data byte after ``VALUES``), ``select``
    (``payload`` is where the query starts), ``format`` (inline data), ``infile``; ``settings`` is the text of a
    ``SETTINGS`` clause written before the data.
    """

    table: QualifiedName
    columns: str
    settings: str
    kind: str
    payload: int


def _insert_table(text: str, found: list[Token]) -> tuple[QualifiedName, str, int] | None:
    """Table, column-list text and the index after them of ``INSERT INTO [TABLE] [db.]t [(columns)]``."""
    if _uppers(found, 0, 2) != ["INSERT", "INTO"]:
        return None
    index = 3 if _uppers(found, 2, 1) == ["TABLE"] else 2
    if _uppers(found, index, 1) == ["FUNCTION"]:
        return None
    named = qualified_name(found, index)
    if named is None:
        return None
    table, index = named
    if index >= len(found) or found[index].text != "(":
        return table, "", index
    close = next((i for i in range(index + 1, len(found)) if found[i].depth == 0 and found[i].text == ")"), None)
    if close is None:
        return None
    return table, text[found[index].start : found[close].end], close + 1


_INSERT_KINDS = {"VALUES": "values", "SELECT": "select", "WITH": "select", "(": "select", "FORMAT": "format"}


def insert_statement(text: str) -> InsertStatement | None:
    found = list(head_tokens(text, _HEAD))
    named = _insert_table(text, found)
    if named is None:
        return None
    table, columns, index = named
    settings_from = None
    for position in range(index, len(found)):
        token = found[position]
        if token.depth != 0:
            continue
        upper = token.upper or token.text
        if upper == "SETTINGS" and settings_from is None:
            settings_from = token.end
            continue
        kind = _INSERT_KINDS.get(upper)
        if upper == "FROM" and _uppers(found, position + 1, 1) == ["INFILE"]:
            kind = "infile"
        if kind is None:
            continue
        settings = text[settings_from : token.start].strip() if settings_from is not None else ""
        payload = token.end if kind == "values" else token.start
        return InsertStatement(table, columns, settings, kind, payload)
    return None


def insert_target(head: str) -> tuple[QualifiedName, str] | None:
    """The table and column list of an ``INSERT`` head (the statement up to its ``SETTINGS``/``FORMAT``)."""
    named = _insert_table(head, list(head_tokens(head, _HEAD)))
    return (named[0], named[1]) if named is not None else None


@dataclass(frozen=True)
class DropStatement:
    """``DROP TABLE [IF EXISTS] t[, t2]`` (``tables``) or ``DROP DATABASE [IF EXISTS] db`` (``database``)."""

    tables: tuple[QualifiedName, ...]
    database: str | None


def drop_statement(text: str) -> DropStatement | None:
    found = list(head_tokens(text, _HEAD))
    if _uppers(found, 0, 1) != ["DROP"]:
        return None
    index = 2 if _uppers(found, 1, 1) == ["TEMPORARY"] else 1
    kind = _uppers(found, index, 1)
    index += 1
    if _uppers(found, index, 2) == ["IF", "EXISTS"]:
        index += 2
    if _uppers(found, index, 2) == ["IF", "EMPTY"]:
        index += 2
    if kind == ["DATABASE"]:
        named = qualified_name(found, index)
        return DropStatement((), named[0].name) if named is not None else None
    if kind != ["TABLE"]:
        return None
    tables: list[QualifiedName] = []
    while (named := qualified_name(found, index)) is not None:
        tables.append(named[0])
        index = named[1]
        if index >= len(found) or found[index].text != ",":
            break
        index += 1
    return DropStatement(tuple(tables), None) if tables else None


def changed_table(text: str) -> QualifiedName | None:
    """The table an ``ALTER TABLE``, ``TRUNCATE`` or ``DELETE FROM`` changes (statements replication does not carry)."""
    found = list(head_tokens(text, 12))
    first = _uppers(found, 0, 1)
    if first == ["ALTER"] and _uppers(found, 1, 1) == ["TABLE"]:
        index = 2
    elif first == ["TRUNCATE"]:
        index = 2 if _uppers(found, 1, 1) == ["TABLE"] else 1
        index += 2 if _uppers(found, index, 2) == ["IF", "EXISTS"] else 0
    elif first == ["DELETE"] and _uppers(found, 1, 1) == ["FROM"]:
        index = 2
    else:
        return None
    named = qualified_name(found, index)
    return named[0] if named is not None else None


@dataclass(frozen=True)
class SyncReplica:
    """``SYSTEM SYNC REPLICA [IF EXISTS] t [STRICT | LIGHTWEIGHT [FROM 'r', ...] | PULL]``."""

    table: QualifiedName
    if_exists: bool
    mode: str  # "DEFAULT" | "STRICT" | "LIGHTWEIGHT" | "PULL"
    sources: tuple[str, ...]


def sync_replica(text: str) -> SyncReplica | None:
    """The statement's parts; ``None`` for other statements and for shapes the engine must judge itself."""
    found = list(head_tokens(text, _HEAD))
    if _uppers(found, 0, 3) != ["SYSTEM", "SYNC", "REPLICA"]:
        return None
    index = 3
    if_exists = _uppers(found, index, 2) == ["IF", "EXISTS"]
    index += 2 if if_exists else 0
    named = qualified_name(found, index)
    if named is None:
        return None
    table, index = named
    mode, sources = "DEFAULT", []
    if index < len(found) and found[index].upper in ("STRICT", "LIGHTWEIGHT", "PULL"):
        mode = found[index].upper
        index += 1
        if mode == "LIGHTWEIGHT" and _uppers(found, index, 1) == ["FROM"]:
            index += 1
            while index < len(found) and found[index].kind == STRING:
                sources.append(found[index].name)
                index += 1
                if index < len(found) and found[index].text == ",":
                    index += 1
            if not sources:
                return None
    rest = [token for token in found[index:] if token.text != ";"]
    if rest and not (rest[0].upper == "FORMAT" and len(rest) == 2 and rest[1].kind in (WORD, QUOTED)):
        return None
    return SyncReplica(table, if_exists, mode, tuple(sources))


def column_names(columns: str) -> list[str] | None:
    """The names of a plain ``(a, `b`, ...)`` insert column list (``None`` for anything fancier)."""
    found = list(tokens(columns))
    if len(found) < 3 or found[0].text != "(" or found[-1].text != ")":
        return None
    names = found[1:-1:2]
    commas = found[2:-1:2]
    if any(t.kind not in (WORD, QUOTED) for t in names) or any(t.text != "," for t in commas):
        return None
    return [t.name for t in names]
