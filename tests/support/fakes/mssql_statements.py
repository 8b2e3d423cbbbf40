"""Statement handlers of the SQL Server fake: each T-SQL shape the adapter emits, recognized by its exact form.

A statement that matches no shape fails the test (``AssertionError``): the adapter may not send SQL the fake (and the
golden files) do not know about.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tests.support.fakes.mssql_server import Call, Column, Table, db_error, to_server

if TYPE_CHECKING:
    from tests.support.fakes.mssql_server import FakeConnection

Result = tuple[list[tuple[object, ...]], int]
Q = r"(\[[A-Za-z0-9_]+\]\.\[[A-Za-z0-9_]+\])"
_NAME = re.compile(r"\[([A-Za-z0-9_]+)\]")
_DEF = re.compile(r"\[([A-Za-z0-9_]+)\] ([A-Z0-9]+(?:\([0-9A-Z,]+\))?) (NOT NULL|NULL)")
_CAST = re.compile(r"CAST\(%s AS ([A-Z0-9]+(?:\([0-9A-Z,]+\))?)\)")
_HANDLERS: list[tuple[str, re.Pattern[str], Callable[..., Result]]] = []


def handler(kind: str, pattern: str) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
    def register(function: Callable[..., Result]) -> Callable[..., Result]:
        _HANDLERS.append((kind, re.compile(pattern, re.DOTALL), function))
        return function

    return register


def execute(conn: FakeConnection, sql: str, params: tuple[Any, ...]) -> tuple[str, Result]:
    for kind, pattern, function in _HANDLERS:
        match = pattern.fullmatch(sql)
        if match:
            conn.server.calls.append(Call(conn.id, "execute", kind, params, sql))
            conn._maybe_drop(kind)
            return kind, function(conn, match, params)
    raise AssertionError(f"statement unknown to the SQL Server fake: {sql[:120]!r}")


def _view(conn: FakeConnection) -> dict[str, Table]:
    return conn.work if conn.work is not None else conn.server.tables


def _table(tables: dict[str, Table], name: str) -> Table:
    if name not in tables:
        raise db_error(208, "Invalid object name")
    return tables[name]


def _split(name: str) -> tuple[str, str]:
    schema, table = _NAME.findall(name)
    return schema, table


SET_OPTION_BITS = {  # "@@OPTIONS (Transact-SQL)" / the "user options" server configuration option
    "ANSI_WARNINGS": 8, "ANSI_PADDING": 16, "ANSI_NULLS": 32, "ARITHABORT": 64, "QUOTED_IDENTIFIER": 256,
    "NOCOUNT": 512, "CONCAT_NULL_YIELDS_NULL": 4096, "XACT_ABORT": 16384,
}  # fmt: skip
_SET = re.compile(r"SET ([A-Z_]+) (ON|OFF); ")


@handler("session", r"((?:SET [A-Z_]+ (?:ON|OFF); )+)SET LOCK_TIMEOUT (\d+);\nSELECT @@OPTIONS AS session_options;")
def _session(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    """Each SET changes its bit of the session's @@OPTIONS; an option the fake does not know fails the test."""
    for name, state in _SET.findall(match.group(1)):
        bit = SET_OPTION_BITS[name]
        conn.options = conn.options | bit if state == "ON" else conn.options & ~bit
    conn.lock_timeout_ms = int(match.group(2))
    return [(_effective_options(conn),)], -1


def _effective_options(conn: FakeConnection) -> int:
    return conn.options if conn.server.session_options is None else conn.server.session_options


def _open_transactions(conn: FakeConnection) -> int:
    return 0 if conn.server.autocommit else 1


@handler("applock", r"DECLARE @dpone_lock_result INT = -999;\nIF @@TRANCOUNT > 0\n    EXEC @dpone_lock_result = "
         r"sp_getapplock @Resource = %s, @LockMode = N'(Exclusive|Shared)', @LockOwner = N'Transaction', "
         r"@LockTimeout = %s;\nSELECT @dpone_lock_result AS lock_result, @@TRANCOUNT AS open_transactions;")  # fmt: skip
def _applock(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    resource, mode = params[0], match.group(1)
    if not _open_transactions(conn):
        return [(-999, 0)], -1
    with conn.server.mutex:
        owners = conn.server.locks.setdefault(resource, {})
        others = [held for owner, held in owners.items() if owner != conn.id]
        if others and (mode == "Exclusive" or "Exclusive" in others):
            return [(-1, 1)], -1  # timed out
        if owners.get(conn.id) != "Exclusive":
            owners[conn.id] = mode
    return [(0, 1)], -1


@handler("session_facts", r"DECLARE @dpone_protocol INT = NULL;\nIF HAS_PERMS_BY_NAME\(NULL, NULL, N'VIEW SERVER STATE'\) = 1"
         r"\n    SELECT @dpone_protocol = .* WHERE c\.\[session_id\] = @@SPID;\nSELECT @@OPTIONS AS session_options, "
         r"@@TRANCOUNT AS open_transactions, @dpone_protocol AS protocol_version;")  # fmt: skip
def _session_facts(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    server = conn.server
    options = _effective_options(conn)
    protocol = server.protocol_version if server.view_server_state else None
    return [(options, _open_transactions(conn), protocol)], -1


@handler("triggers", r"SELECT COUNT_BIG\(\*\) FROM sys\.triggers AS t WHERE t\.\[parent_id\] IN "
         r"\(OBJECT_ID\(%s\), OBJECT_ID\(%s\)\);")  # fmt: skip
def _triggers(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    return [(sum(1 for name in params if name in conn.server.triggers),)], -1


@handler("object_type", r"SELECT o\.\[type\] FROM sys\.objects AS o WHERE o\.\[object_id\] = OBJECT_ID\(%s\);")
def _object_type(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    return ([("U ",)] if params[0] in _view(conn) else []), -1


def _type_row(column: Column) -> tuple[object, ...]:
    spelled = column.type
    base, _, args = spelled.partition("(")
    args = args.rstrip(")")
    length, precision, scale = {"DATETIME2": (8, 27, 0)}.get(base, (0, 0, 0))
    if base == "DECIMAL":
        precision, scale = (int(x) for x in args.split(","))
    elif base == "DATETIME2":
        scale = int(args)
    elif args == "MAX":
        length = -1
    elif args:
        length = int(args)
    # sys.columns.is_ansi_padded: "1 = Column uses ANSI_PADDING ON behavior if character, binary, or variant.
    # 0 = Column is not character, binary, or variant" (or was created with ANSI_PADDING OFF)
    padded_kind = base in {"BINARY", "VARBINARY", "CHAR", "VARCHAR", "NCHAR", "NVARCHAR"}
    return (column.name, base.lower(), length, precision, scale, column.nullable, padded_kind and column.ansi_padded)


@handler("table_columns", r"SELECT c\.\[name\], TYPE_NAME\(c\.\[user_type_id\]\) AS type_name, .*c\.\[is_ansi_padded\] "
         r"FROM sys\.columns AS c WHERE c\.\[object_id\] = OBJECT_ID\(%s, N'U'\) ORDER BY c\.\[column_id\];")  # fmt: skip
def _table_columns(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    table = _view(conn).get(params[0])
    return ([_type_row(c) for c in table.columns] if table else []), -1


@handler("create_receipt_table", rf"IF OBJECT_ID\(%s, N'U'\) IS NULL\nCREATE TABLE {Q} \((.*)\);")
def _create_receipts(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    tables = conn._tables()
    if params[0] not in tables:
        columns = [Column(n, t, null == "NULL") for n, t, null in _DEF.findall(match.group(2))]
        tables[match.group(1)] = Table(columns, primary_key=0)
    return [], -1


@handler("select_receipt", rf"SELECT \[publication_id\], .* FROM {Q} WHERE \[publication_id\] = %s;")
def _select_receipt(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    table = _table(_view(conn), match.group(1))
    return [tuple(r) for r in table.rows if r[0] == params[0]], -1


@handler(
    "insert_receipt", rf"INSERT INTO {Q} \(.*\) OUTPUT inserted\.\[committed_at\] VALUES \((%s, )+SYSUTCDATETIME\(\)\);"
)
def _insert_receipt(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    table = _table(conn._tables(), match.group(1))
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    conn._insert_row(table, [*params, now], via="receipt")
    return [(table.rows[-1][-1],)], 1


def _droppable(conn: FakeConnection, name: str) -> None:
    """DROP TABLE: the schema-modification lock first, then SQL Server's refusals of a table other objects are bound
    to: 3726 "Could not drop object ... because it is referenced by a FOREIGN KEY constraint", 3729 "Cannot DROP
    TABLE ... because it is being referenced by object ..." (a schema-bound view)."""
    conn.server.schema_lock(conn, name)
    table = conn._tables()[name]
    if table.referenced_by_foreign_key:
        raise db_error(3726, "Could not drop object because it is referenced by a FOREIGN KEY constraint.")
    if table.schema_bound_view:
        raise db_error(3729, "Cannot DROP TABLE because it is being referenced by object.")


@handler("drop_table_if_exists", rf"DROP TABLE IF EXISTS {Q};")
def _drop_if_exists(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    if match.group(1) in conn._tables():
        _droppable(conn, match.group(1))
    conn._tables().pop(match.group(1), None)
    return [], -1


@handler("create_staging", rf"CREATE TABLE {Q} \((.*)\);")
def _create(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    tables = conn._tables()
    if match.group(1) in tables:
        raise db_error(2714, "There is already an object named")
    padded = bool(conn.options & SET_OPTION_BITS["ANSI_PADDING"])  # a new column keeps the session's setting
    tables[match.group(1)] = Table(
        [Column(n, t, null == "NULL", padded) for n, t, null in _DEF.findall(match.group(2))]
    )
    return [], -1


@handler("create_staging_index", rf"CREATE NONCLUSTERED INDEX \[([A-Za-z0-9_]+)\] ON {Q} \(\[__dpone_chunk\]\);")
def _create_index(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    _table(conn._tables(), match.group(2)).indexes.add(match.group(1))
    return [], -1


@handler("chunk_present", rf"SELECT TOP \(1\) 1 FROM {Q} WHERE \[__dpone_chunk\] = %s;")
def _chunk_present(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    conn.server.read_lock(conn, match.group(1), params[0])
    table = _table(_view(conn), match.group(1))
    return ([(1,)] if any(r[0] == params[0] for r in table.rows) else []), -1


@handler("chunk_counts", rf"SELECT \[__dpone_chunk\], COUNT_BIG\(\*\) FROM {Q} GROUP BY \[__dpone_chunk\];")
def _chunk_counts(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    conn.server.read_lock(conn, match.group(1), None)
    counts: dict[object, int] = {}
    for row in _table(_view(conn), match.group(1)).rows:
        counts[row[0]] = counts.get(row[0], 0) + 1
    return list(counts.items()), -1


@handler("lock_staging", rf"SELECT COUNT_BIG\(\*\) FROM {Q} WITH \(TABLOCK, HOLDLOCK\);")
def _lock_staging(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    """A shared table lock to the end of the transaction: it waits for every writer's locks."""
    conn.server.read_lock(conn, match.group(1), None)
    return [(len(_table(_view(conn), match.group(1)).rows),)], -1


@handler("delete_chunk", rf"DELETE FROM {Q} WHERE \[__dpone_chunk\] = %s;")
def _delete_chunk(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    table = _table(conn._tables(), match.group(1))
    before = len(table.rows)
    table.rows = [r for r in table.rows if r[0] != params[0]]
    return [], before - len(table.rows)


def _literal(value: object) -> tuple[str, object]:
    """pymssql's client-side parameter quoting: the SQL type of the literal it renders, and its value."""
    if isinstance(value, bytearray):
        return "binary", bytes(value)
    if isinstance(value, bytes):
        if b"\x00" not in value and value.isascii():
            return "varchar", value.decode("ascii")
        return "binary", value
    if isinstance(value, str):
        return "nvarchar", value
    if isinstance(value, dt.datetime):  # without use_datetime2, pymssql renders milliseconds only
        return "varchar", value.strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d}"
    if isinstance(value, dt.date):
        return "varchar", value.isoformat()
    if isinstance(value, bool):
        return "int", int(value)
    if value is None or isinstance(value, int | Decimal):
        return "number", value
    return "nvarchar", str(value)  # uuid.UUID and the rest: N'...'


def _cast(target: str, value: object) -> object:
    sql_type, literal = _literal(value)
    if literal is None:
        return None
    if target.startswith(("VARBINARY", "BINARY")):
        if sql_type == "binary":
            return literal
        if sql_type == "nvarchar":
            return str(literal).encode("utf-16-le")
        if sql_type == "varchar":
            return str(literal).encode("ascii")
        raise db_error(529, "Explicit conversion to varbinary is not allowed")
    if sql_type == "binary" and target.startswith(("NVARCHAR", "NCHAR")):
        # "Data type conversion (Database Engine)": binary/varbinary -> nchar/nvarchar is an allowed explicit
        # conversion; CAST and CONVERT, binary styles (style 0): bytes are taken as they are, so for a Unicode type
        # each two bytes are one UTF-16LE code unit.
        assert isinstance(literal, bytes)
        return literal.decode("utf-16-le", "surrogatepass")
    if sql_type == "binary":
        raise db_error(529, "Explicit conversion from varbinary is not allowed")
    return to_server(target, literal, via="cast")


@handler("insert_values", rf"INSERT INTO {Q} \((.+?)\) VALUES\n(.+);")
def _insert_values(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    table = _table(conn._tables(), match.group(1))
    names = _NAME.findall(match.group(2))
    first = match.group(3).split("),\n(")[0]
    casts = _CAST.findall(first)
    assert len(casts) == len(names) and len(params) % len(names) == 0
    positions = [table.position(n) for n in names]
    for start in range(0, len(params), len(names)):
        values: list[object] = [None] * len(table.columns)
        for position, cast, value in zip(positions, casts, params[start : start + len(names)], strict=True):
            values[position] = _cast(cast, value)
        conn._insert_row(table, values, via="sqlclient")
    inserted = len(params) // len(names)
    conn.lock_rows(match.group(1), [table.rows[-1][0]] * inserted, inserted)
    return [], len(params) // len(names)


def _window(match: re.Match[str], params: tuple[Any, ...], table: Table) -> Callable[[list[object]], bool]:
    position = table.position(match.group(2))
    cast = match.group(3)
    low, high = (to_server("DATE" if cast == "DATE" else "DATETIME2(6)", p, via="cast") for p in params)

    def inside(row: list[object]) -> bool:
        value = row[position]
        return value is not None and low <= value < high  # type: ignore[operator]

    return inside


_IN_WINDOW = (  # groups 5 and 6 of the window digest's and the window fields' patterns
    r"s\.\[([A-Za-z0-9_]+)\] >= CAST\(%s AS (DATE|DATETIME2\(7\))\) AND s\.\[\5\] < CAST\(%s AS \6\)"
)
_BOUNDS = r"\[([A-Za-z0-9_]+)\] >= CAST\(%s AS (DATE|DATETIME2\(7\))\) AND \[\2\] < CAST\(%s AS \3\)"
_OUTSIDE = r"\[([A-Za-z0-9_]+)\] IS NULL OR NOT \(\[\2\] >= CAST\(%s AS (DATE|DATETIME2\(7\))\) AND \[\2\] < CAST\(%s AS \3\)\)"


@handler("rows_outside_window", rf"SELECT COUNT_BIG\(\*\) FROM {Q} WHERE {_OUTSIDE};")
def _outside(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    table = _table(_view(conn), match.group(1))
    inside = _window(match, params, table)
    return [(sum(1 for r in table.rows if not inside(r)),)], -1


@handler("delete_window", rf"DELETE FROM {Q} WHERE {_BOUNDS};")
def _delete_window(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    table = _table(conn._tables(), match.group(1))
    inside = _window(match, params, table)
    before = len(table.rows)
    table.rows = [r for r in table.rows if not inside(r)]
    return [], before - len(table.rows)


@handler("insert_from_staging", rf"INSERT INTO {Q} \((.+)\) SELECT (.+) FROM {Q};")
def _insert_select(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    tables = conn._tables()
    target, source = _table(tables, match.group(1)), _table(tables, match.group(4))
    into, picked = _NAME.findall(match.group(2)), _NAME.findall(match.group(3))
    for row in list(source.rows):
        values: list[object] = [None] * len(target.columns)
        for name, source_name in zip(into, picked, strict=True):
            values[target.position(name)] = row[source.position(source_name)]
        conn._insert_row(target, values, via="insert_select")
        rewrite = conn.server.insert_rewrites.get(match.group(1))
        if rewrite is not None:
            target.rows[-1] = rewrite(target.rows[-1])
    return [], len(source.rows)


@handler("lock_target", rf"SELECT COUNT_BIG\(\*\) FROM {Q} WITH \(TABLOCKX, HOLDLOCK\) WHERE {_BOUNDS};")
def _lock_target(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    """An exclusive table lock to the end of the transaction: it waits for every other transaction's locks on the
    table, then every READ COMMITTED read of it waits (``read_lock``)."""
    conn.server.read_lock(conn, match.group(1), None)
    with conn.server.changed:
        conn.table_locks.add(match.group(1))
        conn.server.changed.notify_all()
    table = _table(conn._tables(), match.group(1))
    inside = _window(match, params, table)
    return [(sum(1 for r in table.rows if inside(r)),)], -1


@handler("window_digest", r"SELECT COUNT_BIG\(\*\), (?:COALESCE\(SUM\(CAST\(SUBSTRING\(hashed\.h, \d+, 4\) AS BIGINT\)\), 0\)"
         r"(?:, )?){8} FROM \(SELECT HASHBYTES\('SHA2_256', 0x([0-9a-f]+) \+ (.*)\) AS h FROM " + Q +
         r" AS s CROSS APPLY \(SELECT (.*)\) AS enc WHERE " + _IN_WINDOW + r"\) AS hashed;")  # fmt: skip
def _window_digest(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    """The chunk digest's evaluation over the table's rows inside the window, as this transaction sees them."""
    from tests.support.fakes.mssql_digest import encoders, limb_sums, row_hash

    conn.server.read_lock(conn, match.group(3), None)
    tag, fields, table = bytes.fromhex(match.group(1)), match.group(2), _table(_view(conn), match.group(3))
    columns = encoders(match.group(4))
    assert [(n, int(i)) for n, i in _FIELD.findall(fields)] == [(n, i) for i, (n, _) in enumerate(columns)]
    positions = [table.position(name) for name, _ in columns]
    window = table.position(match.group(5))
    low, high = (to_server("DATE" if match.group(6) == "DATE" else "DATETIME2(6)", p, via="cast") for p in params)
    hashes = [
        row_hash(tag, [(encode, row[p]) for (_, encode), p in zip(columns, positions, strict=True)])
        for row in table.rows
        if row[window] is not None and low <= row[window] < high  # type: ignore[operator]
    ]
    return [(len(hashes), *limb_sums(hashes))], -1


@handler("drop_index", rf"DROP INDEX \[([A-Za-z0-9_]+)\] ON {Q};")
def _drop_index(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    table = _table(conn._tables(), match.group(2))
    if match.group(1) not in table.indexes:
        raise db_error(3701, "Cannot drop the index, because it does not exist")
    table.indexes.remove(match.group(1))
    return [], -1


@handler("drop_column", rf"ALTER TABLE {Q} DROP COLUMN (\[[A-Za-z0-9_]+\](?:, \[[A-Za-z0-9_]+\])*);")
def _drop_column(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    table = _table(conn._tables(), match.group(1))
    if table.indexes:
        raise db_error(5074, "The index is dependent on column")
    for name in _NAME.findall(match.group(2)):
        position = table.position(name)
        del table.columns[position]
        for row in table.rows:
            del row[position]
    return [], -1


@handler("rename", r"EXEC sp_rename @objname = %s, @newname = %s, @objtype = N'OBJECT';")
def _rename(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    tables = conn._tables()
    old, new = params
    schema, _ = _split(old)
    renamed = f"[{schema}].[{new}]"  # sp_rename takes the new name literally: brackets would become part of it
    if old not in tables:
        raise db_error(15248, "Either the parameter @objname is ambiguous or the claimed @objtype is wrong")
    if renamed in tables:
        raise db_error(15335, "The new name is already in use")
    conn.server.schema_lock(conn, old)
    if tables[old].schema_bound_view:  # sp_rename refuses an object a schema-bound view or function depends on
        raise db_error(15336, "Object cannot be renamed because the object participates in enforced dependencies.")
    tables[renamed] = tables.pop(old)  # a foreign key references the object, not its name: it follows the rename
    return [], -1


@handler("drop_table", rf"DROP TABLE {Q};")
def _drop(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    tables = conn._tables()
    if match.group(1) not in tables:
        raise db_error(3701, "Cannot drop the table, because it does not exist")
    _droppable(conn, match.group(1))
    del tables[match.group(1)]
    return [], -1


@handler("server_version", r"SELECT CAST\(SERVERPROPERTY\('ProductMajorVersion'\) AS INT\) AS major_version;")
def _server_version(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    return [(conn.server.major_version,)], -1


_FIELD = re.compile(
    r"CASE WHEN s\.\[(\w+)\] IS NULL THEN 0x0000000100 ELSE CAST\(CAST\(DATALENGTH\(enc\.e(\d+)\) \+ 1 AS INT\) "
    r"AS BINARY\(4\)\) \+ 0x01 \+ enc\.e\2 END"
)


@handler("chunk_fields", r"SET TEXTSIZE (\d+);\nSELECT (.*) FROM " + Q + r" AS s CROSS APPLY \(SELECT (.*)\) AS enc "
         r"WHERE (?:s\.\[__dpone_chunk\] = %s|" + _IN_WINDOW + r");")  # fmt: skip
def _chunk_fields(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    """Each row's fields: a rendered digest field, or ``CAST(s.[t] AS VARBINARY(MAX))`` of NVARCHAR, the stored
    UTF-16LE code units (an unpaired surrogate included), cut at TEXTSIZE bytes. The rows of one chunk of staging,
    or (``window_fields``) the rows of a table inside the window."""
    from tests.support.fakes.mssql_digest import encoders, field

    conn.textsize = int(match.group(1))
    window = match.group(5) is not None
    conn.server.read_lock(conn, match.group(3), None if window else params[0], verification=not window)
    table = _table(_view(conn), match.group(3))
    if window:
        window_at = table.position(match.group(5))
        low, high = (to_server("DATE" if match.group(6) == "DATE" else "DATETIME2(6)", p, via="cast") for p in params)

        def selected(row: list[object]) -> bool:
            return row[window_at] is not None and low <= row[window_at] < high  # type: ignore[operator]
    else:

        def selected(row: list[object]) -> bool:
            return row[0] == params[0]

    by_index = dict(zip(_FIELD_INDEXES.findall(match.group(4)), encoders(match.group(4)), strict=True))
    columns: list[tuple[int, Callable[[object], bytes] | None]] = []
    for spelled in _SPLIT_FIELDS.split(match.group(2)):
        if raw := _RAW_TEXT.fullmatch(spelled):
            columns.append((table.position(raw.group(1)), None))
            continue
        found = _FIELD.fullmatch(spelled)
        assert found, f"chunk field unknown to the SQL Server fake: {spelled[:120]!r}"
        name, encode = by_index[found.group(2)]
        assert name == found.group(1)
        columns.append((table.position(name), encode))
    rows = []
    for row in table.rows:
        if not selected(row):
            continue
        values: list[object] = []
        for position, encode in columns:
            value = row[position]
            if encode is not None:
                values.append(field(encode, value))
            elif value is not None:
                values.append(str(value).encode("utf-16-le", "surrogatepass")[: conn.textsize])
            else:
                values.append(None)
        rows.append(tuple(values))
    return rows, -1


_FIELD_INDEXES = re.compile(r" AS e(\d+)(?:, |$)")
_SPLIT_FIELDS = re.compile(r", (?=CASE WHEN|CAST\(s\.)")
_RAW_TEXT = re.compile(r"CAST\(s\.\[(\w+)\] AS VARBINARY\(MAX\)\)")


@handler("chunk_digest", r"SELECT COUNT_BIG\(\*\), (?:COALESCE\(SUM\(CAST\(SUBSTRING\(hashed\.h, \d+, 4\) AS BIGINT\)\), 0\)"
         r"(?:, )?){8} FROM \(SELECT HASHBYTES\('SHA2_256', 0x([0-9a-f]+) \+ (.*)\) AS h FROM " + Q +
         r" AS s CROSS APPLY \(SELECT (.*)\) AS enc WHERE s\.\[__dpone_chunk\] = %s\) AS hashed;")  # fmt: skip
def _chunk_digest(conn: FakeConnection, match: re.Match[str], params: tuple[Any, ...]) -> Result:
    from tests.support.fakes.mssql_digest import encoders, limb_sums, row_hash

    conn.server.read_lock(conn, match.group(3), params[0], verification=True)
    tag, fields, table = bytes.fromhex(match.group(1)), match.group(2), _table(_view(conn), match.group(3))
    columns = encoders(match.group(4))
    assert [(n, int(i)) for n, i in _FIELD.findall(fields)] == [(n, i) for i, (n, _) in enumerate(columns)]
    positions = [table.position(name) for name, _ in columns]
    hashes = [
        row_hash(tag, [(encode, row[p]) for (_, encode), p in zip(columns, positions, strict=True)])
        for row in table.rows
        if row[0] == params[0]
    ]
    return [(len(hashes), *limb_sums(hashes))], -1
