"""The transfer-target port on PostgreSQL (psycopg 3, binary COPY).

One connection per port call, from the injected factory: no transaction, lock or setting survives a call, and nothing
is ever replayed on a new connection (a bulk connection that ended its call cleanly is parked and reused, because
opening one is expensive; see ``_copy_session``). Each mutating call is one transaction:

* ``load_chunk``: on the bulk (ADBC) connection: shared publication lock + exclusive chunk lock, refuse an already
  staged ordinal, binary COPY straight from the chunk's Arrow buffers (``arrow_load.py``), commit.
* ``verify_chunk``: reads the committed rows back (binary COPY to Arrow) and compares them exactly with the rows this
  adapter loaded for that ordinal, when they came from a sealed stage chunk (``digest.py``); otherwise, or when they
  differ, recomputes the typed digest in SQL. The loaded rows wait in memory only between the two calls.
* ``publish``: exclusive publication lock, receipt absent, staging exactly the requested chunks, swap or window
  replace, receipt row, commit. A failure before COMMIT is rolled back by the server (``target_publication_failed``);
  any failure of the COMMIT itself is reported as unknown (``target_publication_outcome_unknown``).
* ``reconcile``: takes the same publication lock (bounded wait) before reading the receipt, so it cannot read
  "absent" while the publishing transaction is still able to commit.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, Literal, TypeAlias

import adbc_driver_manager
import adbc_driver_manager.dbapi as adbc_dbapi
import adbc_driver_postgresql.dbapi as adbc_postgres
import psycopg
import psycopg.errors
import pyarrow as pa
from psycopg.conninfo import make_conninfo

from airflow_provider_dpone.adapters import transfer_target_common as common
from airflow_provider_dpone.adapters.postgres import statements as sql
from airflow_provider_dpone.adapters.postgres.arrow_load import copy_table
from airflow_provider_dpone.adapters.postgres.digest import chunk_digest, readback_chunk, stored_equals_sent
from airflow_provider_dpone.contracts.canonical import tagged_digest
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.native_arrow_chunk import sealed_facts
from airflow_provider_dpone.contracts.transfer_target import RECEIPT_TABLE, PublicationMode, TargetPlan
from airflow_provider_dpone.contracts.transfer_target_receipts import (
    ChunkExpectation,
    ChunkLoad,
    ChunkVerification,
    CleanupReport,
    PublicationObservation,
    PublicationReceipt,
    PublicationRequest,
    StagingReady,
)
from airflow_provider_dpone.contracts.transfer_target_values import readback_normalizer
from airflow_provider_dpone.contracts.typed_digest import LogicalType, MultisetDigest, fold_limb_sums
from airflow_provider_dpone.ports.transfer_target import ChunkData

SERVER_DIGEST_MIN_VERSION: Final[int] = 140000  # extract(epoch ...) returns exact numeric from PostgreSQL 14
Connection = psycopg.Connection[Any]
ConnectionFactory = Callable[[], Connection]
CopyConnection: TypeAlias = adbc_dbapi.Connection
CopyConnectionFactory = Callable[[], CopyConnection]
BULK_ERRORS: Final = (adbc_dbapi.Error, adbc_driver_manager.Error)
LOCK_NOT_AVAILABLE: Final = "55P03"
IDLE_BULK_CONNECTIONS: Final = 4


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


class PostgresTransferTarget:
    """Stage, verify and atomically publish into one PostgreSQL database."""

    def __init__(
        self,
        connect: ConnectionFactory,
        copy_connect: CopyConnectionFactory,
        *,
        lock_timeout_ms: int = 30_000,
        verification: Literal["equality", "server", "readback"] = "equality",
    ) -> None:
        """``verification``: ``equality`` compares the stored rows with the sealed rows loaded (falling back to
        ``server`` for rows of unknown provenance); ``server`` hashes the staged chunk inside PostgreSQL (14+; older
        servers read back); ``readback`` streams the chunk to the worker and hashes it there in Python.
        """
        self._connect = connect
        self._copy_connect = copy_connect
        self._lock_timeout = f"{int(lock_timeout_ms)}ms"
        self._verification = verification
        self._loaded: dict[tuple[str, int], tuple[pa.Table, str]] = {}
        self._loaded_lock = threading.Lock()
        self._idle: list[CopyConnection] = []
        self._idle_lock = threading.Lock()
        weakref.finalize(self, _close_all, self._idle, self._idle_lock)

    # -- plumbing ------------------------------------------------------------------------------------------------
    @contextmanager
    def _session(self) -> Iterator[Connection]:
        try:
            conn = self._connect()
        except psycopg.Error as exc:
            raise DponeError("mssql_native.target_unavailable", _sanitized(exc)) from None
        try:
            yield conn
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
                raise DponeError("mssql_native.target_unavailable", _sanitized(exc)) from None
        clean = False
        try:
            yield conn
            conn.rollback()  # ends whatever the call left open (nothing, after its commit)
            clean = True
        finally:
            with self._idle_lock:
                parked = clean and len(self._idle) < IDLE_BULK_CONNECTIONS
                if parked:
                    self._idle.append(conn)
            if not parked:
                conn.close()

    def close(self) -> None:
        """Close the parked bulk connections (they are also closed when the adapter is collected)."""
        _close_all(self._idle, self._idle_lock)

    def _begin(self, conn: Connection, plan: TargetPlan, *, exclusive: bool) -> None:
        """Bound lock waits and take the publication lock for this transaction."""
        conn.execute(sql.SET_LOCK_TIMEOUT, (self._lock_timeout,))
        try:
            conn.execute(sql.LOCK_EXCLUSIVE if exclusive else sql.LOCK_SHARED, (plan.lock_key,))
        except psycopg.errors.LockNotAvailable:
            raise DponeError("mssql_native.target_publication_in_flight", common.short(plan)) from None

    @staticmethod
    def _relation_kind(conn: Connection, schema: str, table: str) -> str | None:
        row = conn.execute(sql.RELATION_KIND, (schema, table)).fetchone()
        return None if row is None else str(row[0])

    def _receipt(self, conn: Connection, plan: TargetPlan) -> PublicationReceipt | None:
        if self._relation_kind(conn, plan.target_schema, RECEIPT_TABLE) is None:
            return None
        row = conn.execute(sql.select_receipt(plan), (plan.publication_id,)).fetchone()
        if row is None:
            return None
        return common.stored_receipt(row)

    def _target_exists(self, conn: Connection, plan: TargetPlan) -> bool:
        kind = self._relation_kind(conn, plan.target_schema, plan.target_table)
        if kind is not None and kind not in {"r", "p"}:
            raise DponeError("mssql_native.target_schema_mismatch", f"target relation kind {kind!r} is not a table")
        return kind is not None

    def _check_target_columns(self, conn: Connection, plan: TargetPlan) -> None:
        found = {
            name: (type_name, not_null)
            for name, type_name, not_null in conn.execute(sql.TABLE_COLUMNS, (plan.target_schema, plan.target_table))
        }
        if set(found) != set(plan.column_names):
            raise DponeError("mssql_native.target_schema_mismatch", f"{len(found)} target columns, column set differs")
        for column in plan.columns:
            type_name, not_null = found[column.name]
            if type_name != column.column_type.postgres or (not_null and column.column_type.nullable):
                raise DponeError("mssql_native.target_schema_mismatch", f"column {column.name}")

    def _window_bounds(self, plan: TargetPlan) -> tuple[object, object]:
        window = plan.window
        assert window is not None
        column = next(c for c in plan.columns if c.name == window.column)
        if column.column_type.logical is LogicalType.DATE:
            return window.start.date(), window.end.date()
        return window.start, window.end

    # -- the port ------------------------------------------------------------------------------------------------
    def prepare(self, plan: TargetPlan) -> StagingReady:
        self._forget(plan)
        with self._session() as conn:
            try:
                self._begin(conn, plan, exclusive=True)
                conn.execute(sql.create_receipt_table(plan))
                common.refuse_committed(plan, self._receipt(conn, plan))
                exists = self._target_exists(conn, plan)
                if plan.mode is PublicationMode.WINDOW_REPLACE:
                    common.require_window_target(exists)
                    self._check_target_columns(conn, plan)
                conn.execute(sql.drop_staging(plan))
                conn.execute(sql.create_staging(plan))
                conn.execute(sql.create_staging_index(plan))
                conn.commit()
            except psycopg.Error as exc:
                raise DponeError("mssql_native.target_prepare_failed", _sanitized(exc)) from None
        return StagingReady(staging_table=plan.staging_table, target_exists=exists)

    def _require_staging(self, conn: Connection, plan: TargetPlan) -> None:
        if self._relation_kind(conn, plan.target_schema, plan.staging_table) is None:
            raise common.staging_missing(plan, committed=self._receipt(conn, plan) is not None)

    def load_chunk(self, plan: TargetPlan, ordinal: int, rows: ChunkData) -> ChunkLoad:
        """One transaction on the bulk connection: locks, the already-loaded check, binary COPY from Arrow, commit."""
        table = copy_table(rows, plan, ordinal)
        sealed = sealed_facts(rows) if isinstance(rows, pa.Table) else None
        self._forget(plan, ordinal)
        with self._copy_session() as conn:
            try:
                with conn.cursor() as cursor:
                    cursor.execute(sql.SET_LOCK_TIMEOUT_BULK, parameters=(self._lock_timeout,))
                    cursor.execute(sql.LOCK_SHARED_BULK, parameters=(plan.lock_key,))
                    cursor.execute(sql.LOCK_EXCLUSIVE_BULK, parameters=(_chunk_lock_key(plan, ordinal),))
                    cursor.execute(sql.RELATION_KIND_BULK, parameters=(plan.target_schema, plan.staging_table))
                    if cursor.fetchone() is None:
                        cursor.execute(sql.RELATION_KIND_BULK, parameters=(plan.target_schema, RECEIPT_TABLE))
                        committed = cursor.fetchone() is not None and self._committed(plan)
                        raise common.staging_missing(plan, committed=committed)
                    cursor.execute(sql.chunk_present_bulk(plan), parameters=(ordinal,))
                    present = cursor.fetchone()
                    if present is not None and present[0]:
                        raise DponeError("mssql_native.target_chunk_already_loaded", f"chunk {ordinal}")
                    if table.num_rows:
                        cursor.adbc_ingest(plan.staging_table, table, mode="append", db_schema_name=plan.target_schema)
            except BULK_ERRORS as exc:
                if getattr(exc, "sqlstate", None) == LOCK_NOT_AVAILABLE:
                    raise DponeError("mssql_native.target_publication_in_flight", f"chunk {ordinal}") from None
                raise DponeError("mssql_native.target_load_failed", f"chunk {ordinal}: {_sanitized(exc)}") from None
            try:
                conn.commit()
            except BULK_ERRORS as exc:
                detail = f"chunk {ordinal}: commit outcome unknown ({_sanitized(exc)})"
                raise DponeError("mssql_native.target_load_failed", detail) from None
        if sealed is not None and sealed[0] == ordinal and self._verification == "equality":
            with self._loaded_lock:
                self._loaded[(plan.staging_table, ordinal)] = (table.select(list(plan.column_names)), sealed[2])
        return ChunkLoad(ordinal=ordinal, rows_sent=table.num_rows)

    def _forget(self, plan: TargetPlan, ordinal: int | None = None) -> tuple[pa.Table, str] | None:
        """Drop (and return) the loaded rows awaiting verification: one ordinal, or all of the plan's staging."""
        with self._loaded_lock:
            if ordinal is not None:
                return self._loaded.pop((plan.staging_table, ordinal), None)
            for key in [key for key in self._loaded if key[0] == plan.staging_table]:
                del self._loaded[key]
        return None

    def _committed(self, plan: TargetPlan) -> bool:
        with self._session() as conn:
            try:
                return self._receipt(conn, plan) is not None
            finally:
                conn.rollback()

    def verify_chunk(self, plan: TargetPlan, expectation: ChunkExpectation) -> ChunkVerification:
        loaded = self._forget(plan, expectation.ordinal)
        if loaded is not None and loaded[1] == expectation.typed_sum and loaded[0].num_rows == expectation.rows:
            rows = self._readback_equal(plan, expectation.ordinal, loaded[0])
            if rows is not None:
                return common.chunk_verification(expectation, rows, int(expectation.typed_sum, 16))
        with self._session() as conn:
            try:
                self._require_staging(conn, plan)
                server = self._verification != "readback"
                if server and conn.info.server_version >= SERVER_DIGEST_MIN_VERSION:
                    rows, total = self._server_digest(conn, plan, expectation.ordinal)
                else:
                    rows, total = self._readback_digest(conn, plan, expectation.ordinal)
                conn.rollback()
            except psycopg.Error as exc:
                raise DponeError("mssql_native.target_unavailable", f"verify: {_sanitized(exc)}") from None
        return common.chunk_verification(expectation, rows, total)

    def _readback_equal(self, plan: TargetPlan, ordinal: int, sent: pa.Table) -> int | None:
        """The committed rows of ``ordinal`` read back; their count when they are exactly ``sent``, else None."""
        with self._copy_session() as conn:
            try:
                with conn.cursor() as cursor:
                    cursor.execute(sql.RELATION_KIND_BULK, parameters=(plan.target_schema, plan.staging_table))
                    if cursor.fetchone() is None:
                        return None  # the digest path reports the missing staging with its exact error
                    cursor.execute(readback_chunk(plan), parameters=(ordinal,))
                    stored = cursor.fetch_arrow_table()
                conn.rollback()
            except BULK_ERRORS as exc:
                raise DponeError("mssql_native.target_unavailable", f"verify: {_sanitized(exc)}") from None
        return stored.num_rows if stored_equals_sent(sent, stored) else None

    @staticmethod
    def _server_digest(conn: Connection, plan: TargetPlan, ordinal: int) -> tuple[int, int]:
        row = conn.execute(chunk_digest(plan, ordinal)).fetchone()
        assert row is not None
        return int(row[0]), fold_limb_sums([int(value) for value in row[1:]])

    @staticmethod
    def _readback_digest(conn: Connection, plan: TargetPlan, ordinal: int) -> tuple[int, int]:
        observed = MultisetDigest(plan.typed_columns)
        normalize = readback_normalizer([c.column_type for c in plan.columns])
        with conn.cursor() as cursor, cursor.copy(sql.copy_out_chunk(plan, ordinal)) as copy:
            copy.set_types([sql.copy_type(c.column_type) for c in plan.columns])
            observed.add_rows(normalize(row) for row in copy.rows())
        return observed.rows, observed.total

    def discard_chunk(self, plan: TargetPlan, ordinal: int) -> int:
        self._forget(plan, ordinal)
        with self._session() as conn:
            try:
                self._begin(conn, plan, exclusive=False)
                conn.execute(sql.LOCK_EXCLUSIVE, (_chunk_lock_key(plan, ordinal),))
                self._require_staging(conn, plan)
                deleted = conn.execute(sql.delete_chunk(plan), (ordinal,)).rowcount
            except psycopg.Error as exc:
                raise DponeError("mssql_native.target_load_failed", f"discard {ordinal}: {_sanitized(exc)}") from None
            try:
                conn.commit()
            except psycopg.Error as exc:
                detail = f"discard {ordinal}: commit outcome unknown ({_sanitized(exc)})"
                raise DponeError("mssql_native.target_load_failed", detail) from None
        return deleted

    def publish(self, plan: TargetPlan, request: PublicationRequest) -> PublicationReceipt:
        with self._session() as conn:
            try:
                receipt = self._publish_transaction(conn, plan, request)
            except psycopg.Error as exc:
                raise DponeError("mssql_native.target_publication_failed", _sanitized(exc)) from None
            try:
                conn.commit()
            except Exception as exc:  # noqa: BLE001 - whatever COMMIT raised, its outcome is unknown
                raise DponeError(
                    "mssql_native.target_publication_outcome_unknown", f"{common.short(plan)}: {_sanitized(exc)}"
                ) from None
        return receipt

    def _publish_transaction(
        self, conn: Connection, plan: TargetPlan, request: PublicationRequest
    ) -> PublicationReceipt:
        self._begin(conn, plan, exclusive=True)
        common.refuse_committed(plan, self._receipt(conn, plan))
        self._require_staging(conn, plan)
        counts = {int(ordinal): int(rows) for ordinal, rows in conn.execute(sql.chunk_counts(plan))}
        common.check_staged_chunks(counts, request)
        exists = self._target_exists(conn, plan)
        if plan.mode is PublicationMode.FULL_REFRESH:
            for statement in sql.full_refresh_swap(plan, target_exists=exists):
                conn.execute(statement)
        else:
            common.require_window_target(exists)
            bounds = self._window_bounds(plan)
            common.check_no_rows_outside_window(conn.execute(sql.rows_outside_window(plan), bounds).fetchone())
            conn.execute(sql.delete_window(plan), bounds)
            common.check_inserted(conn.execute(sql.insert_from_staging(plan)).rowcount, request)
            conn.execute(sql.drop_staging(plan))
        row = conn.execute(sql.insert_receipt(plan), common.receipt_values(plan, request)).fetchone()
        assert row is not None
        return common.committed_receipt(plan, request, row[0])

    def reconcile(self, plan: TargetPlan) -> PublicationObservation:
        with self._session() as conn:
            try:
                self._begin(conn, plan, exclusive=False)
                receipt = self._receipt(conn, plan)
                conn.rollback()
            except psycopg.Error as exc:
                raise DponeError("mssql_native.target_unavailable", f"reconcile: {_sanitized(exc)}") from None
        return common.observation(plan, receipt)

    def cleanup(self, plan: TargetPlan) -> CleanupReport:
        self._forget(plan)
        dropped: list[str] = []
        with self._session() as conn:
            try:
                self._begin(conn, plan, exclusive=True)
                for name, statement in (
                    (plan.staging_table, sql.drop_staging(plan)),
                    (plan.retired_table, sql.drop_retired(plan)),
                ):
                    if self._relation_kind(conn, plan.target_schema, name) is not None:
                        conn.execute(statement)
                        dropped.append(name)
                conn.commit()
            except psycopg.Error as exc:
                raise DponeError("mssql_native.target_unavailable", f"cleanup: {_sanitized(exc)}") from None
        return CleanupReport(dropped=tuple(dropped))


def _close_all(idle: list[CopyConnection], lock: threading.Lock) -> None:
    with lock:
        parked, idle[:] = list(idle), []
    for conn in parked:
        with contextlib.suppress(*BULK_ERRORS):
            conn.close()


def _chunk_lock_key(plan: TargetPlan, ordinal: int) -> int:
    digest = tagged_digest("dpone.target-chunk-lock.v1", plan.publication_id, ordinal)
    return int.from_bytes(bytes.fromhex(digest[:16]), "big", signed=True)
