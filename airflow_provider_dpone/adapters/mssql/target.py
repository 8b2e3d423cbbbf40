"""The transfer-target port on SQL Server, through pymssql (BCP or parameterized batches).

Same transaction shape as the PostgreSQL adapter, in T-SQL: one fresh connection per call with ``XACT_ABORT`` and a
bounded ``LOCK_TIMEOUT``; a transaction-owned ``sp_getapplock`` on the publication (exclusive to publish, prepare and
clean up; shared to load and reconcile) so that reconcile cannot read "absent" while a publishing transaction is
still able to commit; the receipt row inserted in the publishing transaction (its primary key makes a second commit
impossible); full refresh by ``sp_rename`` swap, window replace by delete-window + insert. Every statement comes from
:mod:`tsql`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, Literal

from airflow_provider_dpone.adapters import transfer_target_common as common
from airflow_provider_dpone.adapters.mssql import checks, digest, tsql
from airflow_provider_dpone.adapters.mssql.driver import (
    DRIVER_ERRORS,
    ConnectionFactory,
    DbConnection,
    negotiated_tds,
    sanitized,
)
from airflow_provider_dpone.adapters.mssql.loaders import load_chunk
from airflow_provider_dpone.adapters.mssql.schema import check_target_columns
from airflow_provider_dpone.adapters.mssql.values import readback
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.native_arrow_chunk import chunk_rows
from airflow_provider_dpone.contracts.native_transfer_options import ImportBackend
from airflow_provider_dpone.contracts.transfer_target import PublicationMode, TargetPlan
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
from airflow_provider_dpone.contracts.typed_digest import LogicalType, MultisetDigest, fold_limb_sums
from airflow_provider_dpone.ports.transfer_target import ChunkData

FETCH_ROWS: Final[int] = 10_000


class _Session:
    """One connection and its cursor for the duration of one port call."""

    def __init__(self, conn: DbConnection, cursor: Any) -> None:
        self.conn = conn
        self.cursor = cursor

    def run(self, statement: str, params: tuple[Any, ...] | None = None) -> Any:
        self.cursor.execute(statement, params)
        return self.cursor

    def one(self, statement: str, params: tuple[Any, ...] | None = None) -> Any:
        return self.run(statement, params).fetchone()


def _datetime2(value: Any) -> Any:
    """TDS < 7.3 returns DATETIME2 as text."""
    return dt.datetime.fromisoformat(value[:26]) if isinstance(value, str) else value


class MsSqlTransferTarget:
    """Stage, verify and atomically publish into one SQL Server database."""

    def __init__(
        self,
        connect: ConnectionFactory,
        *,
        import_backend: ImportBackend = ImportBackend.BCP,
        lock_timeout_ms: int = 30_000,
    ) -> None:
        self._connect = connect
        self._backend = import_backend
        self._lock_timeout_ms = int(lock_timeout_ms)

    # -- plumbing ------------------------------------------------------------------------------------------------
    @contextmanager
    def _session(self) -> Iterator[_Session]:
        try:
            conn = self._connect()
        except DRIVER_ERRORS as exc:
            raise DponeError("mssql_native.target_unavailable", sanitized(exc)) from None
        try:
            try:
                session = _Session(conn, conn.cursor())
                session.run(tsql.session_settings(self._lock_timeout_ms))
            except DRIVER_ERRORS as exc:
                raise DponeError("mssql_native.target_unavailable", sanitized(exc)) from None
            yield session
        finally:
            # Closing a broken connection may fail: the server rolls back whatever was not committed anyway.
            with contextlib.suppress(*DRIVER_ERRORS):
                conn.close()

    def _lock(self, session: _Session, resource: str, mode: Literal["Exclusive", "Shared"], what: str) -> None:
        row = session.one(tsql.applock(mode), (resource, self._lock_timeout_ms))
        if row is not None:
            checks.require_transaction(row[1], what)
        if row is None or int(row[0]) < 0:
            raise DponeError("mssql_native.target_publication_in_flight", what)

    def _begin(self, session: _Session, plan: TargetPlan, mode: Literal["Exclusive", "Shared"]) -> None:
        self._lock(session, plan.lock_resource, mode, common.short(plan))

    @staticmethod
    def _object_type(session: _Session, qualified_name: str) -> str | None:
        row = session.one(tsql.OBJECT_TYPE, (qualified_name,))
        return None if row is None else str(row[0]).strip()

    def _receipt(self, session: _Session, plan: TargetPlan) -> PublicationReceipt | None:
        if self._object_type(session, tsql.receipts(plan)) is None:
            return None
        row = session.one(tsql.select_receipt(plan), (plan.publication_id,))
        if row is None:
            return None
        return common.stored_receipt((*row[:-1], _datetime2(row[-1])))

    def _target_exists(self, session: _Session, plan: TargetPlan) -> bool:
        kind = self._object_type(session, tsql.target(plan))
        if kind is not None and kind != "U":
            raise DponeError("mssql_native.target_schema_mismatch", f"target object type {kind!r} is not a table")
        return kind is not None

    def _require_staging(self, session: _Session, plan: TargetPlan) -> None:
        if self._object_type(session, tsql.staging(plan)) is None:
            raise common.staging_missing(plan, committed=self._receipt(session, plan) is not None)

    @staticmethod
    def _commit_or_unknown(session: _Session, code: str, what: str) -> None:
        try:
            session.conn.commit()
        except Exception as exc:  # noqa: BLE001 - whatever COMMIT raised, its outcome is unknown
            raise DponeError(code, f"{what}: commit outcome unknown ({sanitized(exc)})") from None

    # -- the port ------------------------------------------------------------------------------------------------
    def prepare(self, plan: TargetPlan) -> StagingReady:
        with self._session() as session:
            try:
                self._begin(session, plan, "Exclusive")
                checks.check_session(session.one(tsql.SESSION_FACTS), negotiated_tds(session.conn))
                session.run(tsql.create_receipt_table(plan), (tsql.receipts(plan),))
                common.refuse_committed(plan, self._receipt(session, plan))
                exists = self._target_exists(session, plan)
                if plan.mode is PublicationMode.WINDOW_REPLACE:
                    common.require_window_target(exists)
                    check_target_columns(plan, session.run(tsql.TABLE_COLUMNS, (tsql.target(plan),)).fetchall())
                session.run(tsql.drop_staging(plan))
                session.run(tsql.create_staging(plan))
                session.run(tsql.create_staging_index(plan))
                checks.check_no_triggers(session.one(tsql.TRIGGERS, (tsql.target(plan), tsql.staging(plan))))
            except DRIVER_ERRORS as exc:
                raise DponeError("mssql_native.target_prepare_failed", sanitized(exc)) from None
            self._commit_or_unknown(session, "mssql_native.target_prepare_failed", "prepare")
        if self._backend is ImportBackend.BCP:
            self._probe_bulk_transaction(plan)
        return StagingReady(staging_table=plan.staging_table, target_exists=exists)

    def _probe_bulk_transaction(self, plan: TargetPlan) -> None:
        """Bulk-copy one probe row, roll back, and observe its absence: INSERT BULK must join the transaction."""
        with self._session() as session:
            try:
                self._begin(session, plan, "Shared")
                load_chunk(
                    session.conn,
                    session.cursor,
                    plan,
                    ImportBackend.BCP,
                    checks.PROBE_ORDINAL,
                    [checks.probe_row(plan)],
                )
                session.conn.rollback()
                self._begin(session, plan, "Shared")
                survived = session.one(tsql.chunk_present(plan), (checks.PROBE_ORDINAL,)) is not None
                if survived:
                    session.run(tsql.delete_chunk(plan), (checks.PROBE_ORDINAL,))
            except DRIVER_ERRORS as exc:
                raise DponeError("mssql_native.target_prepare_failed", f"bulk probe: {sanitized(exc)}") from None
            if survived:
                self._commit_or_unknown(session, "mssql_native.target_prepare_failed", "bulk probe removal")
                raise DponeError("mssql_native.target_bulk_outside_transaction", common.short(plan))

    def load_chunk(self, plan: TargetPlan, ordinal: int, rows: ChunkData) -> ChunkLoad:
        rows = chunk_rows(rows, [c.column_type.logical for c in plan.columns])
        with self._session() as session:
            try:
                self._begin(session, plan, "Shared")
                self._lock(session, f"{plan.lock_resource}.chunk.{int(ordinal)}", "Exclusive", f"chunk {ordinal}")
                self._require_staging(session, plan)
                if session.one(tsql.chunk_present(plan), (ordinal,)) is not None:
                    raise DponeError("mssql_native.target_chunk_already_loaded", f"chunk {ordinal}")
                sent = load_chunk(session.conn, session.cursor, plan, self._backend, ordinal, rows)
            except DRIVER_ERRORS as exc:
                raise DponeError("mssql_native.target_load_failed", f"chunk {ordinal}: {sanitized(exc)}") from None
            self._commit_or_unknown(session, "mssql_native.target_load_failed", f"chunk {ordinal}")
        return ChunkLoad(ordinal=ordinal, rows_sent=sent)

    def verify_chunk(self, plan: TargetPlan, expectation: ChunkExpectation) -> ChunkVerification:
        """The chunk's digest as the server computes it from what it stores (``digest.py``); read back only for text
        columns on a server without UTF-8 collations."""
        with self._session() as session:
            try:
                self._require_staging(session, plan)
                if self._server_digest_supported(session, plan):
                    row = session.one(digest.chunk_digest(plan), (expectation.ordinal,))
                    rows, total = int(row[0]), fold_limb_sums([int(value) for value in row[1:]])
                else:
                    rows, total = self._readback_digest(session, plan, expectation.ordinal)
                session.conn.rollback()
            except DRIVER_ERRORS as exc:
                raise DponeError("mssql_native.target_unavailable", f"verify: {sanitized(exc)}") from None
        return common.chunk_verification(expectation, rows, total)

    @staticmethod
    def _server_digest_supported(session: _Session, plan: TargetPlan) -> bool:
        if digest.server_digest_supported(plan, None):
            return True
        row = session.one(digest.SERVER_VERSION)
        return digest.server_digest_supported(plan, None if row is None or row[0] is None else int(row[0]))

    @staticmethod
    def _readback_digest(session: _Session, plan: TargetPlan, ordinal: int) -> tuple[int, int]:
        observed = MultisetDigest(plan.typed_columns)
        normalize = readback([c.column_type for c in plan.columns])
        cursor = session.run(tsql.select_chunk(plan), (ordinal,))
        while batch := cursor.fetchmany(FETCH_ROWS):
            observed.add_rows(normalize(row) for row in batch)
        return observed.rows, observed.total

    def discard_chunk(self, plan: TargetPlan, ordinal: int) -> int:
        with self._session() as session:
            try:
                self._begin(session, plan, "Shared")
                self._lock(session, f"{plan.lock_resource}.chunk.{int(ordinal)}", "Exclusive", f"chunk {ordinal}")
                self._require_staging(session, plan)
                deleted = int(session.run(tsql.delete_chunk(plan), (ordinal,)).rowcount)
            except DRIVER_ERRORS as exc:
                raise DponeError("mssql_native.target_load_failed", f"discard {ordinal}: {sanitized(exc)}") from None
            self._commit_or_unknown(session, "mssql_native.target_load_failed", f"discard {ordinal}")
        return deleted

    def publish(self, plan: TargetPlan, request: PublicationRequest) -> PublicationReceipt:
        with self._session() as session:
            try:
                receipt = self._publish_transaction(session, plan, request)
            except DRIVER_ERRORS as exc:
                raise DponeError("mssql_native.target_publication_failed", sanitized(exc)) from None
            self._commit_or_unknown(session, "mssql_native.target_publication_outcome_unknown", common.short(plan))
        return receipt

    def _publish_transaction(
        self, session: _Session, plan: TargetPlan, request: PublicationRequest
    ) -> PublicationReceipt:
        self._begin(session, plan, "Exclusive")
        common.refuse_committed(plan, self._receipt(session, plan))
        self._require_staging(session, plan)
        counts = {int(o): int(n) for o, n in session.run(tsql.chunk_counts(plan)).fetchall()}
        common.check_staged_chunks(counts, request)
        exists = self._target_exists(session, plan)
        if plan.mode is PublicationMode.FULL_REFRESH:
            for statement, params in tsql.full_refresh_swap(plan, target_exists=exists):
                session.run(statement, params or None)
        else:
            common.require_window_target(exists)
            bounds = self._window_bounds(plan)
            common.check_no_rows_outside_window(session.one(tsql.rows_outside_window(plan), bounds))
            session.run(tsql.delete_window(plan), bounds)
            common.check_inserted(int(session.run(tsql.insert_from_staging(plan)).rowcount), request)
            session.run(tsql.drop_staging(plan))
        row = session.one(tsql.insert_receipt(plan), common.receipt_values(plan, request))
        committed_at = _datetime2(row[0] if row is not None else None)
        if not isinstance(committed_at, dt.datetime):
            raise DponeError("mssql_native.target_publication_failed", "receipt insert returned no commit time")
        return common.committed_receipt(plan, request, committed_at)

    @staticmethod
    def _window_bounds(plan: TargetPlan) -> tuple[str, str]:
        window = plan.window
        assert window is not None
        column = next(c for c in plan.columns if c.name == window.column)
        if column.column_type.logical is LogicalType.DATE:
            return window.start.date().isoformat(), window.end.date().isoformat()
        return tuple(  # type: ignore[return-value]
            bound.replace(tzinfo=None).isoformat(sep="T", timespec="microseconds")
            for bound in (window.start, window.end)
        )

    def reconcile(self, plan: TargetPlan) -> PublicationObservation:
        with self._session() as session:
            try:
                self._begin(session, plan, "Shared")
                receipt = self._receipt(session, plan)
                session.conn.rollback()
            except DRIVER_ERRORS as exc:
                raise DponeError("mssql_native.target_unavailable", f"reconcile: {sanitized(exc)}") from None
        return common.observation(plan, receipt)

    def cleanup(self, plan: TargetPlan) -> CleanupReport:
        dropped: list[str] = []
        with self._session() as session:
            try:
                self._begin(session, plan, "Exclusive")
                for name, statement in (
                    (plan.staging_table, tsql.drop_staging(plan)),
                    (plan.retired_table, tsql.drop_retired(plan)),
                ):
                    if self._object_type(session, tsql.qualified(plan.target_schema, name)) is not None:
                        session.run(statement)
                        dropped.append(name)
            except DRIVER_ERRORS as exc:
                raise DponeError("mssql_native.target_unavailable", f"cleanup: {sanitized(exc)}") from None
            self._commit_or_unknown(session, "mssql_native.target_unavailable", "cleanup")
        return CleanupReport(dropped=tuple(dropped))
