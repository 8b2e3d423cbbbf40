"""Just enough ClickHouse SQL lexing for the HTTP endpoint and the distributed-DDL emulation.

The engine parses every statement itself; this module only finds the few places the endpoint must act on before the
engine sees the text: where an ``INSERT``'s data begins, which output format a query asks for, the ``ON CLUSTER``
clause of a DDL statement, and references to ``system.distributed_ddl_queue``. It works on tokens outside string
literals, quoted identifiers and comments, so a keyword inside a literal is never mistaken for a clause.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

WORD = "word"
QUOTED = "quoted"  # `identifier` or "identifier"
STRING = "string"  # 'literal'
NUMBER = "number"
PUNCT = "punct"

_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_NUMBER_RE = re.compile(r"[0-9][0-9A-Za-z_.]*")
_SPACE = " \t\r\n\f\v"

RESULT_KEYWORDS = frozenset({"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXISTS", "EXPLAIN", "CHECK", "WATCH", "("})
"""First keywords of statements that answer with a result set (and so an ``X-ClickHouse-Format`` header)."""


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int
    end: int
    depth: int

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == WORD else ""

    @property
    def name(self) -> str:
        """The identifier a word or quoted token spells (quotes removed, escapes resolved)."""
        if self.kind == QUOTED or self.kind == STRING:
            return _unquote(self.text)
        return self.text


def _unquote(text: str) -> str:
    quote = text[0]
    body = text[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            out.append(body[i + 1])
            i += 2
            continue
        if ch == quote and i + 1 < len(body) and body[i + 1] == quote:
            out.append(quote)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _scan_quoted(text: str, pos: int) -> int:
    """End offset (exclusive) of the quoted token starting at ``pos``; the text end if it is unterminated."""
    quote = text[pos]
    i = pos + 1
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == quote:
            if i + 1 < n and text[i + 1] == quote:
                i += 2
                continue
            return i + 1
        i += 1
    return n


def tokens(text: str) -> Iterator[Token]:
    """Tokens of ``text`` lazily, skipping whitespace and comments; ``depth`` is the parenthesis depth."""
    i = 0
    n = len(text)
    depth = 0
    while i < n:
        ch = text[i]
        if ch in _SPACE:
            i += 1
            continue
        if text.startswith(("--", "#!", "# "), i):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline + 1
            continue
        if ch == "/" and text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = n if close < 0 else close + 2
            continue
        if ch in "`\"'":
            end = _scan_quoted(text, i)
            yield Token(STRING if ch == "'" else QUOTED, text[i:end], i, end, depth)
            i = end
            continue
        if ch == "$" and text.startswith("$$", i):
            close = text.find("$$", i + 2)
            end = n if close < 0 else close + 2
            yield Token(STRING, text[i:end], i, end, depth)
            i = end
            continue
        match = _WORD_RE.match(text, i)
        if match:
            yield Token(WORD, match.group(), i, match.end(), depth)
            i = match.end()
            continue
        match = _NUMBER_RE.match(text, i)
        if match:
            yield Token(NUMBER, match.group(), i, match.end(), depth)
            i = match.end()
            continue
        if ch == "(" or ch == "[":
            yield Token(PUNCT, ch, i, i + 1, depth)
            depth += 1
        elif ch == ")" or ch == "]":
            depth = max(0, depth - 1)
            yield Token(PUNCT, ch, i, i + 1, depth)
        else:
            yield Token(PUNCT, ch, i, i + 1, depth)
        i += 1


EXTERNAL_SOURCES = frozenset(
    {
        "file",
        "url",
        "urlcluster",
        "http",
        "s3",
        "s3cluster",
        "gcs",
        "oss",
        "cosn",
        "hdfs",
        "hdfscluster",
        "azureblobstorage",
        "azureblobstoragecluster",
        "executable",
        "executablepool",
        "mysql",
        "postgresql",
        "jdbc",
        "odbc",
        "mongodb",
        "redis",
        "sqlite",
        "remote",
        "remotesecure",
        "deltalake",
        "iceberg",
        "hudi",
        "filesystem",
    }
)
"""Table functions, table engines and dictionary sources that reach files or hosts outside the cluster directory."""


def external_access(text: str) -> str | None:
    """The first place ``text`` reads or writes outside the engine's own tables: a call of an
    :data:`EXTERNAL_SOURCES` name (as a table function, engine or dictionary source, quoted or not), or an
    ``INFILE``/``OUTFILE`` clause; ``None`` when there is none."""
    previous: Token | None = None
    for token in tokens(text):
        if token.upper in ("INFILE", "OUTFILE"):
            return token.upper
        called = token.text == "(" and previous is not None and previous.kind in (WORD, QUOTED)
        if called and previous is not None and previous.name.lower() in EXTERNAL_SOURCES:
            return previous.name
        previous = token
    return None


def first_keyword(text: str) -> str:
    """The statement's first keyword in upper case (``(`` for a parenthesised select), or ``""``."""
    for token in tokens(text):
        return token.upper or token.text
    return ""


def produces_result(text: str) -> bool:
    """Whether the statement answers with a result set (SELECT-like), as opposed to DDL, INSERT, SET, USE."""
    return first_keyword(text) in RESULT_KEYWORDS


def output_format(text: str) -> str | None:
    """The format named by the statement's top-level ``FORMAT`` clause, if any (the last one wins)."""
    found: str | None = None
    previous: Token | None = None
    for token in tokens(text):
        if (
            previous is not None
            and previous.upper == "FORMAT"
            and previous.depth == 0
            and token.kind in (WORD, QUOTED)
            and token.depth == 0
        ):
            found = token.name
        previous = token
    return found


@dataclass(frozen=True)
class InsertShape:
    """Where an ``INSERT``'s parts are, so the endpoint can feed the data to the engine as a stream.

    ``head`` is the statement up to (not including) its ``SETTINGS``/``FORMAT`` clauses, ``settings`` the text of a
    top-level ``SETTINGS`` clause (without the keyword), ``fmt`` the input format and ``data_start`` the offset of the
    first data byte in the text the shape was computed from.
    """

    head: str
    settings: str
    fmt: str
    data_start: int


@dataclass(frozen=True)
class KillQuery:
    """``KILL QUERY [ON CLUSTER c] WHERE <condition> [SYNC|ASYNC|TEST] [FORMAT f]``."""

    condition: str
    mode: str
    """``ASYNC`` (the default), ``SYNC`` or ``TEST``."""
    on_cluster: bool


def kill_query(text: str) -> KillQuery | None:
    """The parts of a ``KILL QUERY`` statement, or ``None`` for any other statement (``KILL MUTATION`` included)."""
    found = [token for token in tokens(text) if token.depth == 0]
    if len(found) < 2 or found[0].upper != "KILL" or found[1].upper != "QUERY":
        return None
    while found and found[-1].text == ";":
        found.pop()
    if len(found) >= 2 and found[-2].upper == "FORMAT":
        found = found[:-2]
    mode = "ASYNC"
    if found and found[-1].upper in ("SYNC", "ASYNC", "TEST"):
        mode = found.pop().upper
    where = next((index for index, token in enumerate(found) if token.upper == "WHERE"), None)
    if where is None or where + 1 >= len(found):
        return None
    condition = text[found[where].end : found[-1].end].strip()
    on_cluster = len(found) > 3 and found[2].upper == "ON" and found[3].upper == "CLUSTER"
    return KillQuery(condition=condition, mode=mode, on_cluster=on_cluster)


def insert_with_data(text: str) -> InsertShape | None:
    """The shape of ``INSERT ... FORMAT <fmt>`` followed by data, or ``None`` for other statements.

    ``INSERT ... VALUES``, ``INSERT ... SELECT`` and ``INSERT ... FROM INFILE`` carry their data in the statement
    itself (or need none) and are executed as text.
    """
    stream = tokens(text)
    first = next(stream, None)
    if first is None or first.upper != "INSERT":
        return None
    settings_at: Token | None = None
    previous: Token | None = None
    for token in stream:
        if token.depth == 0 and token.kind == WORD:
            upper = token.upper
            if upper in ("VALUES", "SELECT", "WITH", "INFILE") and (previous is None or previous.upper != "FORMAT"):
                return None
            if upper == "SETTINGS" and settings_at is None:
                settings_at = token
        if previous is not None and previous.upper == "FORMAT" and previous.depth == 0 and token.depth == 0:
            if token.kind not in (WORD, QUOTED):
                return None
            data_start = token.end
            n = len(text)
            while data_start < n and text[data_start] in " \t\f":
                data_start += 1
            if data_start < n and text[data_start] == "\r":
                data_start += 1
            if data_start < n and text[data_start] == "\n":
                data_start += 1
            head_end = settings_at.start if settings_at is not None else previous.start
            settings = text[settings_at.end : previous.start].strip() if settings_at is not None else ""
            return InsertShape(text[:head_end].rstrip(), settings, token.name, data_start)
        previous = token
    return None


@dataclass(frozen=True)
class OnCluster:
    """A statement's ``ON CLUSTER`` clause: the cluster it names and the statement without the clause."""

    cluster: str
    local_text: str
    start: int
    end: int


def on_cluster(text: str) -> OnCluster | None:
    """Find a top-level ``ON CLUSTER <name>`` clause; ``None`` when the statement has none."""
    window: list[Token] = []
    for token in tokens(text):
        window.append(token)
        if len(window) > 3:
            window.pop(0)
        if len(window) == 3:
            on, cluster, name = window
            if (
                on.upper == "ON"
                and cluster.upper == "CLUSTER"
                and on.depth == 0
                and name.kind in (WORD, QUOTED, STRING)
                and name.depth == 0
            ):
                local = (text[: on.start].rstrip() + " " + text[name.end :].lstrip()).strip()
                return OnCluster(name.name, local, on.start, name.end)
    return None


@dataclass(frozen=True)
class SettingsClause:
    """A top-level ``SETTINGS name = value, ...`` clause: its span in the text and its pairs, each value as its SQL
    literal (``'x'``, ``120``, ``-1``, ``true``)."""

    start: int
    end: int
    pairs: tuple[tuple[str, str], ...]

    def values(self) -> dict[str, str]:
        """The pairs as a setting would take them over HTTP: string literals unquoted, other literals as written."""
        return {name: _unquote(value) if value[:1] == "'" else value for name, value in self.pairs}


_AFTER_SETTINGS = frozenset({"SETTINGS", "FORMAT", "COMMENT", "INTO"})


def settings_clauses(text: str) -> list[SettingsClause]:
    """Every top-level ``SETTINGS`` clause of a formatted statement, in order (a ``CREATE`` may carry two: its
    storage's and, after it, the query's)."""
    found = list(tokens(text))
    clauses: list[SettingsClause] = []
    i = 0
    while i < len(found):
        token = found[i]
        if token.upper != "SETTINGS" or token.depth != 0:
            i += 1
            continue
        pairs: list[tuple[str, str]] = []
        j = i + 1
        end = token.end
        while j + 1 < len(found) and found[j + 1].text == "=" and found[j].depth == 0:
            name = found[j].name
            k = j + 2
            value_start = found[k].start if k < len(found) else len(text)
            while k < len(found) and not (
                found[k].depth == 0 and (found[k].text == "," or found[k].upper in _AFTER_SETTINGS)
            ):
                k += 1
            value_end = found[k - 1].end
            pairs.append((name, text[value_start:value_end]))
            end = value_end
            if k < len(found) and found[k].text == ",":
                j = k + 1
                continue
            j = k
            break
        clauses.append(SettingsClause(token.start, end, tuple(pairs)))
        i = j if j > i else i + 1
    return clauses


_CREATE_OBJECT = frozenset({"TABLE", "DATABASE"})


@dataclass(frozen=True)
class QualifiedName:
    """``[database.]name`` as a statement spells it (``database`` is ``None`` when unqualified)."""

    database: str | None
    name: str


def qualified_name(found: list[Token], index: int) -> tuple[QualifiedName, int] | None:
    """The ``[db.]name`` starting at ``found[index]``, and the index of the token after it."""
    if index >= len(found) or found[index].kind not in (WORD, QUOTED):
        return None
    first = found[index]
    if index + 2 < len(found) and found[index + 1].text == "." and found[index + 2].kind in (WORD, QUOTED):
        return QualifiedName(first.name, found[index + 2].name), index + 3
    return QualifiedName(None, first.name), index + 1


@dataclass(frozen=True)
class CreateHead:
    """The head of ``CREATE|ATTACH [OR REPLACE] TABLE|DATABASE [IF NOT EXISTS] name [UUID 'u']``.

    ``name_end`` is the offset right after the name, ``next_index`` the index of the first token after the head
    (after the UUID clause when there is one).
    """

    verb: str
    kind: str
    or_replace: bool
    if_not_exists: bool
    target: QualifiedName
    uuid: str | None
    name_end: int
    next_index: int


def create_head(found: list[Token]) -> CreateHead | None:
    """The head of a ``CREATE``/``ATTACH`` of a table or database, from the statement's tokens."""
    if not found or found[0].upper not in ("CREATE", "ATTACH"):
        return None
    index = 1
    or_replace = False
    while index < len(found) and found[index].upper in ("OR", "REPLACE", "TEMPORARY"):
        or_replace = or_replace or found[index].upper == "REPLACE"
        index += 1
    if index >= len(found) or found[index].upper not in _CREATE_OBJECT:
        return None
    kind = found[index].upper
    index += 1
    if_not_exists = [t.upper for t in found[index : index + 3]] == ["IF", "NOT", "EXISTS"]
    if if_not_exists:
        index += 3
    named = qualified_name(found, index)
    if named is None:
        return None
    target, index = named
    name_end = found[index - 1].end
    uuid = None
    if index + 1 < len(found) and found[index].upper == "UUID" and found[index + 1].kind == STRING:
        uuid = found[index + 1].name
        index += 2
    return CreateHead(found[0].upper, kind, or_replace, if_not_exists, target, uuid, name_end, index)


def insert_uuid(text: str, uuid: str) -> str:
    """Give ``CREATE TABLE|DATABASE`` without an explicit UUID the initiator's UUID, as ClickHouse's initiator does.

    Other statements, and ``CREATE`` statements that already name a UUID, are returned unchanged.
    """
    head = create_head(list(head_tokens(text, 12)))
    if head is None or head.verb != "CREATE" or head.uuid is not None:
        return text
    return f"{text[: head.name_end]} UUID '{uuid}'{text[head.name_end :]}"


def head_tokens(text: str, count: int) -> Iterator[Token]:
    """The first ``count`` tokens (a statement's head, without lexing a long data tail)."""
    for number, token in enumerate(tokens(text)):
        if number >= count:
            return
        yield token


def _replace_triples(text: str, matches: Callable[[Token, Token, Token], bool], replacement: str) -> str:
    """Replace every run of three consecutive tokens that ``matches`` (not inside strings or comments) with text."""
    window: list[Token] = []
    spans: list[tuple[int, int]] = []
    for token in tokens(text):
        window.append(token)
        if len(window) > 3:
            window.pop(0)
        if len(window) == 3 and matches(*window):
            spans.append((window[0].start, window[2].end))
    for start, end in reversed(spans):
        text = text[:start] + replacement + text[end:]
    return text


def replace_table_reference(text: str, database: str, table: str, replacement: str) -> str:
    """Replace every ``database.table`` reference (bare or quoted parts, any case for the database) with text."""

    def matches(db: Token, dot: Token, name: Token) -> bool:
        return (
            db.kind in (WORD, QUOTED)
            and db.name.lower() == database
            and dot.text == "."
            and name.kind in (WORD, QUOTED)
            and name.name == table
        )

    return _replace_triples(text, matches, replacement)


def replace_call(text: str, function: str, replacement: str) -> str:
    """Replace every argument-less call ``function()`` (any case; not inside strings or comments) with text."""

    def matches(name: Token, opening: Token, closing: Token) -> bool:
        return name.upper == function.upper() and opening.text == "(" and closing.text == ")"

    return _replace_triples(text, matches, replacement)


def quote_string(value: str) -> str:
    """A ClickHouse single-quoted string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_identifier(name: str) -> str:
    """A ClickHouse backtick-quoted identifier."""
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"
