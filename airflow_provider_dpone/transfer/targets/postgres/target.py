"""The transfer-target port on PostgreSQL (psycopg 3; binary COPY from Arrow through ADBC).

The transaction shape is :class:`~airflow_provider_dpone.transfer.targets.sql_target.SqlTransferTarget`'s: the
publication lock is a transaction-level advisory lock under a bounded ``lock_timeout``. A chunk loads on the bulk
(ADBC) connection in one transaction: shared publication lock + exclusive chunk lock, refuse an already staged
ordinal (through the staging index, ``statements.create_staging_index``), binary COPY straight from the chunk's
Arrow buffers (``arrow_load.py``), commit. A bulk connection that ended its call cleanly is parked and reused,
because opening one is expensive (``_copy_session``).

A chunk is verified by the typed digest PostgreSQL computes in SQL over what it stores (``digest.py``): a path that
shares nothing with the ADBC load (neither its encoder nor its driver). A server older than
``SERVER_DIGEST_MIN_VERSION``, or ``verification="readback"``, reads the staged rows back through psycopg's own COPY
decoder and hashes them in the worker with the typed digest instead. The digest's read also names the chunk's one
writer (``xmin``), and with the staging table's identity it seals the chunk: the publishing transaction then checks
the seal under its lock instead of hashing the chunk again (``sql_target.ChunkSeal``); a read-back seals nothing.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Final, Literal, TypeAlias

import adbc_driver_manager
import adbc_driver_manager.dbapi as adbc_dbapi
import adbc_driver_postgresql.dbapi as adbc_postgres
import psycopg
import psycopg.errors
import pyarrow as pa
from psycopg.conninfo import make_conninfo

from airflow_provider_dpone.core.canonical import tagged_digest
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.typed_digest import HASH_LIMBS, LogicalType, MultisetDigest, fold_limb_sums
from airflow_provider_dpone.transfer.targets.postgres import session as pinned
from airflow_provider_dpone.transfer.targets.postgres import statements as sql
from airflow_provider_dpone.transfer.targets.postgres.arrow_load import copy_table
from airflow_provider_dpone.transfer.targets.postgres.digest import chunk_digest, window_digest
from airflow_provider_dpone.transfer.targets.sql_target import (
    DRIVER_FAULTS,
    Session,
    SqlTransferTarget,
    Statements,
    driver_fault,
    short,
    staging_missing,
)
from airflow_provider_dpone.transfer.values.row_digest import RowDigest
from airflow_provider_dpone.transfer.values.target import RECEIPT_TABLE, TargetPlan, TargetTable
from airflow_provider_dpone.transfer.values.target_values import readback_normalizer

SERVER_DIGEST_MIN_VERSION: Final[int] = 140000  # extract(epoch ...) returns exact numeric from PostgreSQL 14
Connection = psycopg.Connection[Any]
ConnectionFactory = Callable[[], Connection]
CopyConnection: TypeAlias = adbc_dbapi.Connection
CopyConnectionFactory = Callable[[], CopyConnection]
BULK_ERRORS: Final = (adbc_dbapi.Error, adbc_driver_manager.Error)
BULK_ENDINGS: Final[tuple[type[Exception], ...]] = (*BULK_ERRORS, *DRIVER_FAULTS)
"""What ending a bulk connection's transaction or closing it may raise: the connection is then not reused."""
LOCK_NOT_AVAILABLE: Final = "55P03"
IDLE_BULK_CONNECTIONS: Final = 4
COPY_BATCH_ROWS: Final = 8192
"""Rows per record batch fed to one chunk's COPY: the server stores a batch while the next is encoded, instead of
waiting for the whole chunk's COPY data (the same rows, one COPY, one transaction)."""


def postgres_connection_factory(dsn: str, *, connect_timeout: int = 10) -> ConnectionFactory:
    """Connections for the adapter: explicit transactions, bounded connect time, an identifying application name."""

    def connect() -> Connection:
        return psycopg.connect(dsn, autocommit=False, connect_timeout=connect_timeout, application_name="dpone-target")

    return connect


def postgres_copy_factory(dsn: str, *, connect_timeout: int = 10) -> CopyConnectionFactory:
    """Bulk connections (ADBC, libpq): binary COPY straight from Arrow buffers, in explicit transactions."""
    conninfo = make_conninfo(dsn, connect_timeout=str(int(connect_timeout)), application_name="dpone-target-copy")

    def connect() -> CopyConnection:
        connection: CopyConnection = adbc_postgres.connect(conninfo)
        return connection

    return connect


def _sanitized(exc: BaseException) -> str:
    """Exception class and SQLSTATE only: server messages may quote values."""
    state = getattr(exc, "sqlstate", None)
    return f"{type(exc).__name__}" + (f" sqlstate {state}" if state else "")


class PostgresTransferTarget(SqlTransferTarget):
    """Stage, verify and atomically publish into one table of one PostgreSQL database."""

    errors: ClassVar[tuple[type[BaseException], ...]] = (psycopg.Error,)
    statements: ClassVar[Statements] = sql
    table_kinds: ClassVar[frozenset[str]] = frozenset({"r", "p"})
    reads_wait_for_writers: ClassVar[bool] = False  # MVCC: a reader never waits for a writer

    def __init__(
        self,
        connect: ConnectionFactory,
        copy_connect: CopyConnectionFactory,
        table: TargetTable,
        *,
        lock_timeout_ms: int = 30_000,
        verification: Literal["server", "readback"] = "server",
    ) -> None:
        """``verification``: ``server`` hashes the staged chunk inside PostgreSQL (14+; older servers read back);
        ``readback`` streams the chunk to the worker through psycopg's COPY decoder and hashes it there."""
        # the record digest is rendered by the server's output functions: it has no read-back form
        self.row_digests = (
            (RowDigest.PG_RECORD_SHA256, RowDigest.TYPED_SHA256)
            if verification == "server"
            else (RowDigest.TYPED_SHA256,)
        )
        super().__init__(table, lock_timeout_ms=lock_timeout_ms)
        self._connect = connect
        self._copy_connect = copy_connect
        self._lock_timeout = f"{int(lock_timeout_ms)}ms"
        self._verification = verification
        self._idle: list[CopyConnection] = []
        self._idle_lock = threading.Lock()
        weakref.finalize(self, _close_all, self._idle, self._idle_lock)

    # -- the dialect ---------------------------------------------------------------------------------------------
    @contextmanager
    def _session(self) -> Iterator[Session]:
        """A fresh connection whose transaction runs under the pinned settings (``session.py``), read back first."""
        try:
            conn = self._connect()
        except psycopg.Error as exc:
            raise DponeError("native_transfer.target_unavailable", _sanitized(exc)) from None
        except DRIVER_FAULTS as exc:
            raise driver_fault("connect", exc) from None
        try:
            try:
                conn.execute(pinned.SET_ISOLATION)
                conn.execute(pinned.PIN)
                found = conn.execute(pinned.READ_BACK).fetchone()
            except psycopg.Error as exc:
                raise DponeError("native_transfer.target_unavailable", f"settings: {_sanitized(exc)}") from None
            except DRIVER_FAULTS as exc:
                raise driver_fault("session settings", exc) from None
            pinned.check(found)
            yield Session(conn, conn.execute)
        finally:
            conn.close()

    @contextmanager
    def _copy_session(self) -> Iterator[CopyConnection]:
        """A bulk connection, reused only after a call that ended cleanly (its transaction committed or rolled back).

        Opening an ADBC connection costs about 70 ms (the driver reads the type catalogue), more than verifying a
        chunk; between calls a parked connection holds no transaction, lock or setting (all are transaction-local),
        so reuse replays nothing. Any error closes the connection instead.
        """
        with self._idle_lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            try:
                conn = self._copy_connect()
            except BULK_ERRORS as exc:
                raise DponeError("native_transfer.target_unavailable", _sanitized(exc)) from None
            except DRIVER_FAULTS as exc:
                raise driver_fault("bulk connect", exc) from None
        clean = False
        try:
            yield conn
            try:
                conn.rollback()  # ends whatever the call left open (nothing, after its commit)
                clean = True
            except BULK_ENDINGS:
                pass  # the call's own outcome stands; a connection that cannot end its transaction is not reused
        finally:
            with self._idle_lock:
                parked = clean and len(self._idle) < IDLE_BULK_CONNECTIONS
                if parked:
                    self._idle.append(conn)
            if not parked:
                with contextlib.suppress(*BULK_ENDINGS):
                    conn.close()

    def close(self) -> None:
        """Close the parked bulk connections (they are also closed when the adapter is collected)."""
        _close_all(self._idle, self._idle_lock)

    @staticmethod
    def _sanitized(exc: BaseException) -> str:
        return _sanitized(exc)

    def _begin(self, session: Session, plan: TargetPlan, *, exclusive: bool) -> None:
        """Bound lock waits and take the publication lock for this transaction."""
        session.run(sql.SET_LOCK_TIMEOUT, (self._lock_timeout,))
        try:
            session.run(sql.LOCK_EXCLUSIVE if exclusive else sql.LOCK_SHARED, (plan.lock_key,))
        except psycopg.errors.LockNotAvailable:
            raise DponeError("native_transfer.target_publication_in_flight", short(plan)) from None

    def _kind(self, session: Session, schema: str, name: str) -> str | None:
        row = session.one(sql.RELATION_KIND, (schema, name))
        return None if row is None else str(row[0])

    def _create_receipt_table(self, session: Session, plan: TargetPlan) -> None:
        session.run(sql.create_receipt_table(plan))

    def _check_target_columns(self, session: Session, plan: TargetPlan) -> None:
        rows = session.run(sql.TABLE_COLUMNS, (plan.target_schema, plan.target_table)).fetchall()
        found = {name: (type_name, not_null) for name, type_name, not_null, _ in rows}
        unwritable = [name for name, _, _, generated in rows if generated]
        if unwritable:  # the window's INSERT would fail on them at publication, after the whole load
            raise DponeError(
                "native_transfer.target_schema_mismatch",
                f"column {unwritable[0]} is generated or an identity GENERATED ALWAYS: an INSERT cannot write it",
            )
        if set(found) != set(plan.column_names):
            raise DponeError(
                "native_transfer.target_schema_mismatch", f"{len(found)} target columns, column set differs"
            )
        for column in plan.columns:
            type_name, not_null = found[column.name]
            if type_name != column.column_type.postgres or (not_null and column.column_type.nullable):
                raise DponeError("native_transfer.target_schema_mismatch", f"column {column.name}")

    def _swap(self, session: Session, plan: TargetPlan, *, target_exists: bool) -> None:
        for statement in sql.full_refresh_swap(plan, target_exists=target_exists):
            session.run(statement)

    def _window_bounds(self, plan: TargetPlan) -> tuple[object, object]:
        window = plan.window
        assert window is not None
        column = next(c for c in plan.columns if c.name == window.column)
        if column.column_type.logical is LogicalType.DATE:
            return window.start.date(), window.end.date()
        return window.start, window.end

    def _load(self, plan: TargetPlan, ordinal: int, rows: pa.Table) -> None:
        """One transaction on the bulk connection: locks, the already-loaded check, binary COPY from Arrow, commit."""
        table = copy_table(rows, plan, ordinal)
        with self._copy_session() as conn:
            try:
                with conn.cursor() as cursor:
                    cursor.execute(pinned.SET_ISOLATION)
                    cursor.execute(pinned.PIN)
                    cursor.execute(pinned.READ_BACK)
                    pinned.check(cursor.fetchone())
                    cursor.execute(sql.SET_LOCK_TIMEOUT_BULK, parameters=(self._lock_timeout,))
                    cursor.execute(sql.LOCK_SHARED_BULK, parameters=(plan.lock_key,))
                    cursor.execute(sql.LOCK_EXCLUSIVE_BULK, parameters=(_chunk_lock_key(plan, ordinal),))
                    cursor.execute(sql.RELATION_KIND_BULK, parameters=(plan.target_schema, plan.staging_table))
                    if cursor.fetchone() is None:
                        cursor.execute(sql.RELATION_KIND_BULK, parameters=(plan.target_schema, RECEIPT_TABLE))
                        committed = cursor.fetchone() is not None and self._committed(plan)
                        raise staging_missing(plan, committed=committed)
                    cursor.execute(sql.READ_BY_INDEX)
                    cursor.execute(sql.chunk_present_bulk(plan), parameters=(ordinal,))
                    present = cursor.fetchone()
                    if present is not None and present[0]:
                        raise DponeError("native_transfer.target_chunk_already_loaded", f"chunk {ordinal}")
                    if table.num_rows:
                        batches = table.to_reader(max_chunksize=COPY_BATCH_ROWS)
                        cursor.adbc_ingest(
                            plan.staging_table, batches, mode="append", db_schema_name=plan.target_schema
                        )
            except BULK_ERRORS as exc:
                if getattr(exc, "sqlstate", None) == LOCK_NOT_AVAILABLE:
                    raise DponeError("native_transfer.target_publication_in_flight", f"chunk {ordinal}") from None
                raise DponeError("native_transfer.target_load_failed", f"chunk {ordinal}: {_sanitized(exc)}") from None
            except DRIVER_FAULTS as exc:  # before the load's COMMIT: the chunk's transaction is rolled back
                raise driver_fault(f"load chunk {ordinal}", exc) from None
            try:
                conn.commit()
            except BULK_ERRORS as exc:
                detail = f"chunk {ordinal}: commit outcome unknown ({_sanitized(exc)})"
                raise DponeError("native_transfer.target_load_failed", detail) from None

    def _committed(self, plan: TargetPlan) -> bool:
        with self._session() as session:
            try:
                return self._receipt(session, plan) is not None
            except psycopg.Error as exc:
                raise DponeError("native_transfer.target_unavailable", f"receipt: {_sanitized(exc)}") from None
            except DRIVER_FAULTS as exc:
                raise driver_fault("reading the receipt", exc) from None
            finally:
                session.conn.rollback()

    def _in_sql(self, plan: TargetPlan, conn: Any) -> bool:
        """Whether the digest runs in SQL: always for the record digest (``sha256`` and ``record_out`` are older than
        every supported server), for the typed one on servers whose ``extract`` is exact."""
        if plan.row_digest is RowDigest.PG_RECORD_SHA256:
            return True
        return self._verification != "readback" and conn.info.server_version >= SERVER_DIGEST_MIN_VERSION

    def _staged_digest(self, session: Session, plan: TargetPlan, ordinal: int) -> tuple[int, int]:
        rows, total, _ = self._staged_digest_and_writer(session, plan, ordinal)
        return rows, total

    def _staged_digest_and_writer(
        self, session: Session, plan: TargetPlan, ordinal: int
    ) -> tuple[int, int, str | None]:
        conn = session.conn
        session.run(sql.READ_BY_INDEX)
        if self._in_sql(plan, conn):
            row = session.one(chunk_digest(plan, ordinal))
            limbs = [int(value) for value in row[1 : 1 + HASH_LIMBS]]
            writer = row[1 + HASH_LIMBS]
            return int(row[0]), fold_limb_sums(limbs), None if writer is None else str(writer)
        observed = MultisetDigest(plan.typed_columns)
        normalize = readback_normalizer([c.column_type for c in plan.columns])
        with conn.cursor() as cursor, cursor.copy(sql.copy_out_chunk(plan, ordinal)) as copy:
            copy.set_types([sql.copy_type(c.column_type) for c in plan.columns])
            observed.add_rows(normalize(row) for row in copy.rows())
        return observed.rows, observed.total, None

    def _lock_target(self, session: Session, plan: TargetPlan, bounds: tuple[object, object]) -> None:
        session.run(sql.lock_target(plan))  # LOCK TABLE takes no parameters

    def _window_digest(self, session: Session, plan: TargetPlan, bounds: tuple[object, object]) -> tuple[int, int]:
        """In SQL as a chunk's (``digest.window_digest``), or read back through psycopg's COPY decoder where chunks
        are read back."""
        conn = session.conn
        if self._in_sql(plan, conn):
            row = session.one(window_digest(plan), bounds)
            return int(row[0]), fold_limb_sums([int(value) for value in row[1 : 1 + HASH_LIMBS]])
        observed = MultisetDigest(plan.typed_columns)
        normalize = readback_normalizer([c.column_type for c in plan.columns])
        with conn.cursor() as cursor, cursor.copy(sql.copy_out_window(plan), bounds) as copy:
            copy.set_types([sql.copy_type(c.column_type) for c in plan.columns])
            observed.add_rows(normalize(row) for row in copy.rows())
        return observed.rows, observed.total

    def _staging_identity(self, session: Session, plan: TargetPlan) -> str | None:
        row = session.one(sql.STAGING_IDENTITY, (sql.qualified(plan.target_schema, plan.staging_table),))
        return None if row is None else f"{row[0]}/{row[1]}/{row[2]}"

    def _check_staging_schema(self, session: Session, plan: TargetPlan) -> None:
        found = [
            (str(name), str(type_name), bool(not_null), None if collation is None else str(collation))
            for name, type_name, not_null, collation in session.run(
                sql.STAGING_COLUMNS, (sql.qualified(plan.target_schema, plan.staging_table),)
            )
        ]
        expected = sql.staging_columns(plan)
        if found != expected:
            differing = [want[0] for got, want in zip(found, expected, strict=False) if got != want]
            detail = f"{len(found)} staging columns for {len(expected)}" + (
                f"; first differing: column {differing[0]}" if differing else ""
            )
            raise DponeError("native_transfer.target_staging_schema_changed", detail)

    def _seals_trusted(self, session: Session) -> bool:
        """Only with data checksums on: a page whose bytes changed below PostgreSQL then fails when it is read from
        disk, instead of being served; with them off, every chunk is hashed again at publication."""
        row = session.one(sql.DATA_CHECKSUMS)
        return row is not None and row[0] == "on"

    def _staged_chunks(self, session: Session, plan: TargetPlan) -> dict[int, tuple[int, str | None]]:
        return {
            int(o): (int(n), _one_writer(least, most)) for o, n, least, most in session.run(sql.chunk_writers(plan))
        }


def _one_writer(least: object, most: object) -> str | None:
    """The transaction that wrote every row, when the least and the greatest writer are one."""
    return None if least is None or least != most else str(least)


def _close_all(idle: list[CopyConnection], lock: threading.Lock) -> None:
    with lock:
        parked, idle[:] = list(idle), []
    for conn in parked:
        with contextlib.suppress(*BULK_ERRORS):
            conn.close()


def _chunk_lock_key(plan: TargetPlan, ordinal: int) -> int:
    digest = tagged_digest("dpone.target-chunk-lock.v1", plan.publication_id, ordinal)
    return int.from_bytes(bytes.fromhex(digest[:16]), "big", signed=True)
