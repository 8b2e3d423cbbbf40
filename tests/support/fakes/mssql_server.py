"""A recording DB-API fake of pymssql + SQL Server, for exactly the statements ``transfer/targets/mssql/tsql.py`` emits.

No SQL Server can run here. This fake stands exactly where pymssql stands (the adapter's connection factory) and:

* records every call (connect, execute with its statement kind and parameters, bulk_copy, commit, rollback, close),
  so tests can assert the call sequence (one COMMIT per mutation, nothing replayed after a lost acknowledgement);
* keeps enough server state (tables, rows, the receipt table, transaction-owned application locks) to give the same
  observable answers as SQL Server would, so the shared contract scenarios run on the SQL Server adapter too;
* converts values the way the server and pymssql's ``bulk_copy`` would, including the pymssql behaviours the adapter's
  encoders exist to avoid (DATETIME binding truncates to milliseconds; ``date``/``UUID`` are refused by bulk_copy;
  text literals are not implicitly converted to VARBINARY; a zero-length BCP value is NULL; FreeTDS trims BCP text:
  ``mssql_bcp``), and records every BCP row as bound and as put on the wire (``EmulatedServer.bcp_rows``);
* models the session options the target depends on: a session starts at a DB-Library login's ``@@OPTIONS``
  (``login_options``, 0: the ANSI options OFF), each ``SET`` changes its bit, and a column created in a session keeps
  its ``ANSI_PADDING`` (``Column.ansi_padded``, ``sys.columns.is_ansi_padded``), trimming trailing zeros as SQL
  Server does when it was OFF;
* models what holds a table against ``sp_rename``/``DROP TABLE``: readers (``readers``: the schema-modification lock
  waits up to ``LOCK_TIMEOUT``, then error 1222), an inbound foreign key (3726) and a schema-bound view (15336,
  3729);
* models a target that changes rows as ``INSERT ... SELECT`` stores them (``insert_rewrites``: an AFTER INSERT
  trigger created after the prepare-time ``sys.triggers`` check, a column rule), and the window replace's exclusive
  table lock (``WITH (TABLOCKX, HOLDLOCK)``, "Table hints (Transact-SQL)": an X lock on the table held to the end of
  the transaction, which every READ COMMITTED read of the table then waits for);
* injects failures: faults armed at the next COMMIT (shared :class:`FaultPlan`) and connection drops at a named
  statement kind.

Each connection works on a private copy of the server state from its first statement, published atomically at
COMMIT; statements are classified by their text, and an unknown statement fails the test loudly.

Locking follows SQL Server's documented rules for the default isolation level (locking READ COMMITTED, no
READ_COMMITTED_SNAPSHOT; "Transaction locking and row versioning guide", "Lock escalation"):

* a row a transaction inserts stays exclusively locked until the transaction ends; when one statement acquires at
  least ``lock_escalation_threshold`` (5,000) locks on one table (a bulk load without TABLOCK, ``INSERT BULK``), the
  locks escalate to an exclusive table lock, also held to the end of the transaction;
* a READ COMMITTED read takes shared locks on what it reads, so it waits while another transaction holds an
  incompatible lock: a table lock; a locked row of the chunk it seeks (``WHERE [__dpone_chunk] = n`` through the
  chunk index), or the first row after that range, which the seek reads to find its end; any locked row for a scan;
* a wait longer than the session's ``SET LOCK_TIMEOUT`` fails the statement with error 1222.

Two knobs make the adverse schedule reproducible: ``load_seconds`` keeps a bulk statement (and its locks) running
that long after its rows are in, as a large batch on the wire would; ``adverse_reads`` makes a verification read
wait up to that long for another transaction to hold locks on the table before it reads.
"""

from __future__ import annotations

import copy
import datetime as dt
import decimal
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pymssql

from tests.support.fakes.mssql_bcp import HostBind, freetds_is_null, freetds_rtrim, pymssql_bind, wire
from tests.support.fakes.transfer_target import Fault, FaultPlan, SimulatedCrash

_INT_RANGES = {"TINYINT": (0, 255), "SMALLINT": (-(2**15), 2**15 - 1), "INT": (-(2**31), 2**31 - 1)}
_INT_RANGES["BIGINT"] = (-(2**63), 2**63 - 1)
_WIDE = decimal.Context(prec=80)


def db_error(number: int, text: str) -> pymssql.OperationalError:
    return pymssql.OperationalError(number, text.encode())


@dataclass
class Column:
    name: str
    type: str
    nullable: bool
    ansi_padded: bool = True  # the session's ANSI_PADDING when the column was created (sys.columns.is_ansi_padded)

    def stores(self, value: object) -> object:
        """ "SET ANSI_PADDING": with it OFF at creation, a ``varbinary(n)`` or ``binary(n) NULL`` column trims the
        trailing zeros of what it stores; ``binary(n) NOT NULL`` pads, and ``(max)`` types always behave as ON."""
        if self.ansi_padded or not isinstance(value, bytes) or self.type.endswith("(MAX)"):
            return value
        if self.type.startswith("VARBINARY(") or (self.type.startswith("BINARY(") and self.nullable):
            return value.rstrip(b"\x00")
        return value


@dataclass
class Table:
    columns: list[Column]
    rows: list[list[object]] = field(default_factory=list)
    indexes: set[str] = field(default_factory=set)
    primary_key: int | None = None
    # Objects bound to this table by its object id (they follow it through sp_rename, and roll back with it):
    referenced_by_foreign_key: bool = False  # another table's FOREIGN KEY references it
    schema_bound_view: bool = False  # a view or function created WITH SCHEMABINDING reads it

    def position(self, name: str) -> int:
        return next(i for i, c in enumerate(self.columns) if c.name == name)


@dataclass
class Call:
    connection: int
    kind: str
    statement: str | None = None
    params: tuple[Any, ...] | None = None
    sql: str | None = None


def to_server(column_type: str, value: object, *, via: str) -> object:
    """Convert a bound value to the stored value of a column, as SQL Server (or FreeTDS's BCP conversion) would."""
    if value is None:
        return None
    base = column_type.split("(")[0]
    if base in _INT_RANGES:
        number = int(value) if isinstance(value, int | str) and not isinstance(value, bool) else None
        if number is None or not _INT_RANGES[base][0] <= number <= _INT_RANGES[base][1]:
            raise db_error(220, "Arithmetic overflow error")
        return number
    if base == "DECIMAL":
        precision, scale = (int(x) for x in column_type[8:-1].split(","))
        number = Decimal(str(value)) if not isinstance(value, Decimal) else value
        stored = number.quantize(Decimal(1).scaleb(-scale), context=_WIDE)
        if len(stored.as_tuple().digits) > precision and stored != 0:
            raise db_error(8115, "Arithmetic overflow error converting to numeric")
        return stored
    if base in {"VARBINARY", "BINARY"}:
        if not isinstance(value, bytes | bytearray):
            raise db_error(257, "Implicit conversion from varchar to varbinary is not allowed")
        return bytes(value)
    if base == "NVARCHAR":
        return str(value)
    if base == "BIT":
        return bool(value)
    if base == "DATE":
        return dt.date.fromisoformat(value) if isinstance(value, str) else value
    if base == "DATETIME2":
        precision = int(column_type[10:-1])
        parsed = dt.datetime.fromisoformat(str(value).replace(" ", "T")) if isinstance(value, str) else value
        assert isinstance(parsed, dt.datetime)
        step = 10 ** (6 - precision)
        return parsed.replace(microsecond=parsed.microsecond - parsed.microsecond % step, tzinfo=None)
    if base == "UNIQUEIDENTIFIER":
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    if base in {"CHAR", "VARCHAR"}:
        return str(value)
    raise AssertionError(f"unemulated column type {column_type} ({via})")


@dataclass(frozen=True)
class BcpColumn:
    """One column of one BCP row: what pymssql bound, and the TDS bytes FreeTDS put on the wire (None: unmodelled)."""

    bind: HostBind
    wire: bytes | None


def _host_value(bind: HostBind, column_type: str) -> object:
    """FreeTDS's client-side ``dbconvert`` from the host type, up to the value :func:`to_server` stores."""
    data = bind.data
    assert data is not None
    if bind.vartype in {"SQLINT4", "SQLINT8"}:
        return int.from_bytes(data, "little", signed=True)
    if bind.vartype == "SQLBITN":
        return bool(int.from_bytes(data, "little"))
    if bind.vartype == "SQLVARBINARY":
        return data
    if bind.vartype == "SQLDECIMAL":
        return Decimal(data.decode())
    data = freetds_rtrim(column_type, data)  # after the conversion, _bcp_get_col_data calls rtrim_bcpcol
    return data.decode("utf-16le" if column_type.startswith("NVARCHAR") else "utf-8")


def bcp_row(table: Table, element: Sequence[object]) -> tuple[list[object], list[BcpColumn]]:
    """One row through pymssql's ``bcp_sendrow`` and FreeTDS's ``_bcp_get_col_data`` (see ``mssql_bcp``).

    Returns the values the server stores and what went over the wire.
    """
    if len(element) != len(table.columns):
        raise db_error(4022, "Bulk load data was expected but not sent")
    stored_row: list[object] = []
    sent: list[BcpColumn] = []
    for column, value in zip(table.columns, element, strict=True):
        bind = pymssql_bind(value, unicode_column=column.type.startswith("NVARCHAR"))
        if freetds_is_null(bind):
            if not column.nullable:
                raise db_error(20204, "Attempt to bulk copy a NULL value into a column that does not accept it")
            stored = None
        else:
            stored = to_server(column.type, _host_value(bind, column.type), via="bcp")
        stored_row.append(stored)
        sent.append(BcpColumn(bind, wire(column.type, stored)))
    return stored_row, sent


class EmulatedServer:
    """Committed state, application locks and the call log shared by every connection."""

    def __init__(self, faults: FaultPlan | None = None) -> None:
        self.tables: dict[str, Table] = {}
        self.calls: list[Call] = []
        self.faults = faults or FaultPlan()
        self.mutex = threading.RLock()
        self.locks: dict[str, dict[int, str]] = {}
        self.drop_at: str | None = None
        self.fail_at: str | None = None  # the statement fails with a server error; the connection stays open
        self.held: list[FakeConnection] = []
        self.bcp_rows: list[list[BcpColumn]] = []  # every row a bulk copy sent, column by column
        # Server answers the run-time checks read (transfer/targets/mssql/checks.py); tests set the failing ones.
        self.autocommit = False  # pymssql opens no transaction: @@TRANCOUNT stays 0
        self.session_options: int | None = None  # @@OPTIONS as observed; None: what the session's SETs made it
        # @@OPTIONS at login. A DB-Library login (FreeTDS db-lib, which pymssql uses) asks for none of the ANSI
        # options (the LOGIN7 fOdbc bit, which makes the server switch them on, is an ODBC driver's), so a session
        # starts with the server's "user options" (0 by default): ANSI_PADDING, ANSI_WARNINGS, ANSI_NULLS,
        # CONCAT_NULL_YIELDS_NULL, QUOTED_IDENTIFIER and ARITHABORT OFF ("SET ANSI_DEFAULTS", "SET ANSI_PADDING":
        # "DB-Library applications" get the OFF defaults) until a SET (or pymssql's conn_properties) turns them on.
        self.login_options = 0
        self.protocol_version: int | None = 0x74000004  # sys.dm_exec_connections.protocol_version (TDS 7.4)
        self.view_server_state = True
        self.driver_tds: tuple[int, int] | None = (7, 4)
        self.triggers: set[str] = set()  # qualified names of tables that have a DML trigger
        # What an INSERT ... SELECT into a table stores instead of each row it was given (a trigger created after the
        # prepare-time check, a column rule): qualified name -> the row as stored.
        self.insert_rewrites: dict[str, Callable[[list[object]], list[object]]] = {}
        self.readers: set[str] = set()  # tables another session is reading (its schema-stability lock is held)
        self.bulk_commits_alone = False  # INSERT BULK commits outside the session's transaction
        self.major_version = 16  # SERVERPROPERTY('ProductMajorVersion'): 16 is SQL Server 2022
        # pymssql's default conn_properties set TEXTSIZE 2147483647; a connection that overrides them keeps FreeTDS's
        # or the server's smaller default (tests set one).
        self.default_textsize = 2147483647
        self.lock_escalation_threshold = 5000
        self.load_seconds = 0.0
        self.adverse_reads = 0.0
        self.changed = threading.Condition(self.mutex)  # notified whenever a transaction's locks change
        self.connections: dict[int, FakeConnection] = {}
        self.escalations = 0
        self.lock_waits: list[tuple[int, str]] = []  # (connection, table) of every read that waited on a lock
        self.lock_timeouts = 0
        self._ids = itertools.count(1)

    def connect(self) -> FakeConnection:
        conn = FakeConnection(self, next(self._ids))
        self.calls.append(Call(conn.id, "connect"))
        with self.mutex:
            self.connections[conn.id] = conn
        return conn

    def _locks_held(self, reader: FakeConnection, name: str) -> list[FakeConnection]:
        return [
            c for c in self.connections.values() if c is not reader and (name in c.table_locks or c.row_locks.get(name))
        ]

    def _blocked(self, reader: FakeConnection, name: str, chunk: object | None) -> bool:
        """Whether another transaction holds a lock the read needs (see the module docstring)."""
        holders = self._locks_held(reader, name)
        if any(name in c.table_locks for c in holders):
            return True
        locked = [ordinal for c in holders for ordinal in c.row_locks.get(name, ())]
        if chunk is None or chunk in locked:
            return bool(locked)
        committed = {row[0] for row in self.tables[name].rows} if name in self.tables else set()
        following = [key for key in committed.union(locked) if key > chunk]  # type: ignore[operator]
        return bool(following) and min(following) in locked and min(following) not in committed  # type: ignore[type-var]

    def read_lock(self, reader: FakeConnection, name: str, chunk: object | None, *, verification: bool = False) -> None:
        """Wait as a READ COMMITTED read of ``name`` (the rows of ``chunk``, or all) would, up to LOCK_TIMEOUT."""
        with self.changed:
            if verification and self.adverse_reads:
                self.changed.wait_for(lambda: bool(self._locks_held(reader, name)), self.adverse_reads)
            timeout = reader.lock_timeout_ms
            deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout / 1000
            waited = False
            while self._blocked(reader, name, chunk):
                if not waited:
                    self.lock_waits.append((reader.id, name))
                    waited = True
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    self.lock_timeouts += 1
                    raise db_error(1222, "Lock request time out period exceeded.")
                self.changed.wait(remaining)

    def schema_lock(self, conn: FakeConnection, name: str) -> None:
        """The schema-modification lock sp_rename and DROP TABLE take: incompatible with every other lock ("Lock
        compatibility", Sch-M), so it waits while a reader holds the table, and past the session's ``SET
        LOCK_TIMEOUT`` the statement fails with error 1222."""
        timeout = conn.lock_timeout_ms
        with self.changed:
            free = self.changed.wait_for(
                lambda: name not in self.readers, None if timeout is None or timeout < 0 else timeout / 1000
            )
            if not free:
                self.lock_timeouts += 1
                raise db_error(1222, "Lock request time out period exceeded.")

    def release(self, conn_id: int) -> None:
        with self.mutex:
            for owners in self.locks.values():
                owners.pop(conn_id, None)

    def settle(self, *, commit: bool) -> None:
        conn = self.held.pop()
        conn.finish(commit=commit)

    def statements(self, connection: int | None = None) -> list[str]:
        return [
            c.statement or c.kind
            for c in self.calls
            if (connection is None or c.connection == connection) and c.kind not in {"connect", "close"}
        ]


class FakeCursor:
    def __init__(self, conn: FakeConnection) -> None:
        self._conn = conn
        self._rows: list[tuple[object, ...]] = []
        self.rowcount = -1

    def execute(self, operation: str, params: tuple[Any, ...] | None = None) -> None:
        if any(isinstance(p, str) and "\x00" in p for p in params or ()):
            # pymssql substitutes parameters client-side and hands the statement to dbcmd() as a C string
            # (_mssql.pyx execute_query -> format_and_run_query): a NUL ends the statement inside the literal.
            self._conn.server.calls.append(Call(self._conn.id, "execute", "cut_at_nul", params, operation))
            raise db_error(105, "Unclosed quotation mark after the character string")
        self._rows, self.rowcount = self._conn.run(operation, params)

    def fetchone(self) -> tuple[object, ...] | None:
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[tuple[object, ...]]:
        rows, self._rows = self._rows, []
        return rows

    def fetchmany(self, size: int = 1) -> list[tuple[object, ...]]:
        rows, self._rows = self._rows[:size], self._rows[size:]
        return rows

    def close(self) -> None:
        pass


@dataclass
class _DriverConnection:
    """pymssql's ``Connection._conn`` (the ``_mssql`` connection): only the negotiated TDS version is read."""

    tds_version_tuple: tuple[int, int] | None


class FakeConnection:
    def __init__(self, server: EmulatedServer, conn_id: int) -> None:
        self.server = server
        self.id = conn_id
        self._conn = _DriverConnection(server.driver_tds)
        self.options = server.login_options  # @@OPTIONS of the session, as its login and SET statements leave it
        self.textsize = server.default_textsize  # @@TEXTSIZE: (MAX) values a SELECT returns are cut to it (bytes)
        self.lock_timeout_ms: int | None = None  # SET LOCK_TIMEOUT; None: wait forever (the server's default -1)
        self.row_locks: dict[str, list[object]] = {}  # table -> chunk ordinal of each row this transaction inserted
        self.table_locks: set[str] = set()  # tables this transaction holds an escalated exclusive lock on
        self.work: dict[str, Table] | None = None
        self.dead = False
        self.held = False

    # -- DB-API surface --------------------------------------------------------------------------------------------
    def cursor(self) -> FakeCursor:
        self._alive()
        return FakeCursor(self)

    def bulk_copy(
        self, table_name: str, elements: Any, column_ids: Any = None, batch_size: int = 1000, **_: Any
    ) -> None:
        self._alive()
        self.server.calls.append(Call(self.id, "bulk_copy", "bulk_copy", (table_name, batch_size)))
        self._maybe_drop("bulk_copy")
        table = self._tables()[table_name]
        acquired = 0
        for element in elements:
            stored, sent = bcp_row(table, element)
            self.server.bcp_rows.append(sent)
            self._insert_row(table, stored, via="bcp")
            if self.server.bulk_commits_alone:
                with self.server.mutex:
                    self.server.tables[table_name].rows.append(list(table.rows[-1]))
            else:
                acquired += 1
                self.lock_rows(table_name, [stored[0]], acquired)
        if table_name in self.table_locks and self.server.load_seconds:
            time.sleep(self.server.load_seconds)  # the rest of the batch on the wire, its locks held

    def lock_rows(self, name: str, ordinals: list[object], acquired: int) -> None:
        """Exclusive locks on inserted rows, as they are inserted; ``acquired``: the locks this statement holds on
        the table so far, escalated to a table lock at the threshold."""
        with self.server.changed:
            self.row_locks.setdefault(name, []).extend(ordinals)
            if acquired >= self.server.lock_escalation_threshold and name not in self.table_locks:
                self.table_locks.add(name)
                self.server.escalations += 1
            self.server.changed.notify_all()

    def commit(self) -> None:
        self._alive()
        self.server.calls.append(Call(self.id, "commit", "commit"))
        fault, callback = self.server.faults.take()
        if callback is not None:
            callback()
        if fault is Fault.CRASH_BEFORE_COMMIT:
            self.close()
            raise SimulatedCrash("before commit")
        if fault is Fault.COMMIT_DROPPED:
            self.close()
            raise db_error(20006, "DBPROCESS is dead or not enabled")
        if fault is Fault.IN_FLIGHT:
            self.held = True
            self.server.held.append(self)
            raise db_error(20003, "Adaptive Server connection timed out")
        self.finish(commit=True)
        if fault is Fault.CRASH_AFTER_COMMIT:
            raise SimulatedCrash("after commit")
        if fault is Fault.LOST_ACK:
            self.dead = True
            raise db_error(20006, "DBPROCESS is dead or not enabled")

    def rollback(self) -> None:
        self._alive()
        self.server.calls.append(Call(self.id, "rollback", "rollback"))
        self.finish(commit=False)

    def close(self) -> None:
        self.server.calls.append(Call(self.id, "close"))
        if not self.held:
            self.finish(commit=False)
        self.dead = True

    def finish(self, *, commit: bool) -> None:
        with self.server.changed:
            if commit and self.work is not None:
                self.server.tables = self.work
            self.work = None
            self.row_locks, self.table_locks = {}, set()
            self.server.release(self.id)
            self.server.changed.notify_all()

    # -- statement execution ---------------------------------------------------------------------------------------
    def _alive(self) -> None:
        if self.dead:
            raise db_error(20047, "DBPROCESS is dead or not enabled")

    def _maybe_drop(self, kind: str) -> None:
        if self.server.fail_at == kind:
            self.server.fail_at = None
            raise db_error(50000, "injected statement failure")
        if self.server.drop_at == kind:
            self.server.drop_at = None
            self.close()
            raise db_error(20006, "DBPROCESS is dead or not enabled")

    def _tables(self) -> dict[str, Table]:
        if self.work is None:
            with self.server.mutex:
                self.work = copy.deepcopy(self.server.tables)
        return self.work

    def _insert_row(self, table: Table, values: list[object], *, via: str) -> None:
        if len(values) != len(table.columns):
            raise db_error(110, "column count mismatch")
        stored = [c.stores(to_server(c.type, v, via=via)) for c, v in zip(table.columns, values, strict=True)]
        for c, v in zip(table.columns, stored, strict=True):
            if v is None and not c.nullable:
                raise db_error(515, "Cannot insert the value NULL")
        if table.primary_key is not None and any(r[table.primary_key] == stored[table.primary_key] for r in table.rows):
            raise pymssql.IntegrityError(2627, b"Violation of PRIMARY KEY constraint")
        table.rows.append(stored)

    def run(self, sql: str, params: tuple[Any, ...] | None) -> tuple[list[tuple[object, ...]], int]:
        self._alive()
        from tests.support.fakes.mssql_statements import execute

        _kind, result = execute(self, sql, params or ())
        return result


__all__ = [
    "BcpColumn",
    "Call",
    "Column",
    "EmulatedServer",
    "FakeConnection",
    "Table",
    "bcp_row",
    "db_error",
    "to_server",
]
