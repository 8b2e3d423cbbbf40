"""The transfer-target port on SQL Server, through pymssql (BCP or parameterized batches).

The transaction shape is :class:`~airflow_provider_dpone.transfer.targets.sql_target.SqlTransferTarget`'s, in
T-SQL: every connection sets ``XACT_ABORT``, the ANSI options the load and the digest depend on (read back and
checked before anything else runs: :data:`checks.SESSION_OPTIONS`) and a bounded ``LOCK_TIMEOUT``; the publication lock is a
transaction-owned ``sp_getapplock``; the receipt's primary key makes a second commit impossible; full refresh swaps by
``sp_rename``, window replace deletes the window and inserts. Every statement comes from :mod:`tsql` (and the
verification reads from :mod:`digest`).

A chunk is verified by the typed digest SQL Server computes in T-SQL over what it stores (:mod:`digest`), a path that
shares nothing with the BCP or batch load. On a server without UTF-8 collations a plan with text columns is read back
exactly instead (each field in the server's rendering, text as its stored UTF-16LE code units) and hashed in the
worker; nothing is verified through the driver's own value conversions.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Final, Literal

import pyarrow as pa

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer_options import ImportBackend
from airflow_provider_dpone.core.typed_digest import MODULUS, LogicalType, fold_limb_sums
from airflow_provider_dpone.transfer.targets.mssql import checks, digest, tsql
from airflow_provider_dpone.transfer.targets.mssql.driver import (
    DRIVER_ERRORS,
    ConnectionFactory,
    DbCursor,
    error_number,
    negotiated_tds,
    require_supported_driver,
    sanitized,
)
from airflow_provider_dpone.transfer.targets.mssql.loaders import load_chunk
from airflow_provider_dpone.transfer.targets.mssql.schema import check_staging_columns, check_target_columns
from airflow_provider_dpone.transfer.targets.sql_target import (
    DRIVER_FAULTS,
    Session,
    SqlTransferTarget,
    Statements,
    driver_fault,
    short,
)
from airflow_provider_dpone.transfer.values.target import TargetPlan, TargetTable

FETCH_ROWS: Final[int] = 10_000
SWAP_LOCK_TIMEOUT: Final[frozenset[int]] = frozenset({1222})
"""SQL Server error 1222, "Lock request time out period exceeded": a reader held the table past ``LOCK_TIMEOUT``."""
SWAP_BLOCKED: Final[frozenset[int]] = frozenset({15336, 3726, 3729})
"""sp_rename 15336 ("cannot be renamed because the object participates in enforced dependencies": a schema-bound
view or function), DROP TABLE 3726 ("referenced by a FOREIGN KEY constraint") and 3729 ("is being referenced by
object": a schema-bound view)."""


def _runner(cursor: DbCursor) -> Any:
    def execute(statement: str, params: Any) -> DbCursor:
        cursor.execute(statement, params)
        return cursor

    return execute


def _datetime2(value: Any) -> Any:
    """TDS < 7.3 returns DATETIME2 as text."""
    return dt.datetime.fromisoformat(value[:26]) if isinstance(value, str) else value


class MsSqlTransferTarget(SqlTransferTarget):
    """Stage, verify and atomically publish into one table of one SQL Server database."""

    errors: ClassVar[tuple[type[BaseException], ...]] = DRIVER_ERRORS
    statements: ClassVar[Statements] = tsql
    table_kinds: ClassVar[frozenset[str]] = frozenset({"U"})
    reads_wait_for_writers: ClassVar[bool] = True
    """Locking READ COMMITTED: a chunk's bulk load holds row locks, escalated to a table lock past ~5,000 locks in
    one statement; a verifying read of staging then waits until the load commits (``LOCK_TIMEOUT`` at most)."""

    def __init__(
        self,
        connect: ConnectionFactory,
        table: TargetTable,
        *,
        import_backend: ImportBackend = ImportBackend.BCP,
        lock_timeout_ms: int = 30_000,
    ) -> None:
        super().__init__(table, lock_timeout_ms=lock_timeout_ms)
        self._connect = connect
        self._backend = import_backend

    # -- the dialect ---------------------------------------------------------------------------------------------
    @contextmanager
    def _session(self) -> Iterator[Session]:
        require_supported_driver()
        try:
            conn = self._connect()
        except DRIVER_ERRORS as exc:
            raise DponeError("native_transfer.target_unavailable", sanitized(exc)) from None
        try:
            try:
                cursor = conn.cursor()
                session = Session(conn, _runner(cursor), cursor)
                options = session.one(tsql.session_settings(self._lock_timeout_ms))
            except DRIVER_ERRORS as exc:
                raise DponeError("native_transfer.target_unavailable", sanitized(exc)) from None
            except DRIVER_FAULTS as exc:
                raise driver_fault("session settings", exc) from None
            checks.check_options(None if options is None else options[0])
            yield session
        finally:
            # Closing a broken connection may fail: the server rolls back whatever was not committed anyway.
            with contextlib.suppress(*DRIVER_ERRORS):
                conn.close()

    @staticmethod
    def _sanitized(exc: BaseException) -> str:
        return sanitized(exc)

    def _lock(self, session: Session, resource: str, mode: Literal["Exclusive", "Shared"], what: str) -> None:
        row = session.one(tsql.applock(mode), (resource, self._lock_timeout_ms))
        if row is not None:
            checks.require_transaction(row[1], what)
        if row is None or int(row[0]) < 0:
            raise DponeError("native_transfer.target_publication_in_flight", what)

    def _begin(self, session: Session, plan: TargetPlan, *, exclusive: bool) -> None:
        self._lock(session, plan.lock_resource, "Exclusive" if exclusive else "Shared", short(plan))

    def _lock_chunk(self, session: Session, plan: TargetPlan, ordinal: int) -> None:
        self._begin(session, plan, exclusive=False)
        self._lock(session, f"{plan.lock_resource}.chunk.{int(ordinal)}", "Exclusive", f"chunk {ordinal}")

    def _kind(self, session: Session, schema: str, name: str) -> str | None:
        row = session.one(tsql.OBJECT_TYPE, (tsql.qualified(schema, name),))
        return None if row is None else str(row[0]).strip()

    def _timestamp(self, value: Any) -> Any:
        return _datetime2(value)

    def _check_session(self, session: Session) -> None:
        checks.check_session(session.one(tsql.SESSION_FACTS), negotiated_tds(session.conn))

    def _create_receipt_table(self, session: Session, plan: TargetPlan) -> None:
        session.run(tsql.create_receipt_table(plan), (tsql.receipts(plan),))

    def _check_target_columns(self, session: Session, plan: TargetPlan) -> None:
        check_target_columns(plan, session.run(tsql.TABLE_COLUMNS, (tsql.target(plan),)).fetchall())

    def _check_staging_schema(self, session: Session, plan: TargetPlan) -> None:
        check_staging_columns(plan, session.run(tsql.TABLE_COLUMNS, (tsql.staging(plan),)).fetchall())

    def _check_staging(self, session: Session, plan: TargetPlan) -> None:
        checks.check_no_triggers(session.one(tsql.TRIGGERS, (tsql.target(plan), tsql.staging(plan))))

    def _prepared(self, plan: TargetPlan) -> None:
        if self._backend is ImportBackend.BCP:
            self._probe_bulk_transaction(plan)

    def _swap(self, session: Session, plan: TargetPlan, *, target_exists: bool) -> None:
        """Each step needs a schema-modification lock on its table, which waits for every reader of it; a failed
        step dooms the transaction (XACT_ABORT), so the old target stays as it was. Two failures are the target's
        and get their own codes: a lock wait past LOCK_TIMEOUT (:data:`SWAP_LOCK_TIMEOUT`, retryable: the readers
        finish) and an object bound to the old table (:data:`SWAP_BLOCKED`, terminal until someone removes it)."""
        for statement, params in tsql.full_refresh_swap(plan, target_exists=target_exists):
            try:
                session.run(statement, params or None)
            except DRIVER_ERRORS as exc:
                number = error_number(exc)
                if number in SWAP_LOCK_TIMEOUT:
                    raise DponeError("native_transfer.target_swap_lock_timeout", sanitized(exc)) from None
                if number in SWAP_BLOCKED:
                    raise DponeError("native_transfer.target_swap_blocked", sanitized(exc)) from None
                raise

    def _window_bounds(self, plan: TargetPlan) -> tuple[object, object]:
        window = plan.window
        assert window is not None
        column = next(c for c in plan.columns if c.name == window.column)
        if column.column_type.logical is LogicalType.DATE:
            return window.start.date().isoformat(), window.end.date().isoformat()
        start, end = (
            bound.replace(tzinfo=None).isoformat(sep="T", timespec="microseconds")
            for bound in (window.start, window.end)
        )
        return start, end

    def _probe_bulk_transaction(self, plan: TargetPlan) -> None:
        """Bulk-copy one probe row, roll back, and observe its absence: INSERT BULK must join the transaction."""
        with self._session() as session:
            try:
                self._begin(session, plan, exclusive=False)
                probe = checks.probe_table(plan)
                load_chunk(session.conn, session.cursor, plan, ImportBackend.BCP, checks.PROBE_ORDINAL, probe)
                session.conn.rollback()
                self._begin(session, plan, exclusive=False)
                survived = session.one(tsql.chunk_present(plan), (checks.PROBE_ORDINAL,)) is not None
                if survived:
                    session.run(tsql.delete_chunk(plan), (checks.PROBE_ORDINAL,))
            except DRIVER_ERRORS as exc:
                raise DponeError("native_transfer.target_prepare_failed", f"bulk probe: {sanitized(exc)}") from None
            except DRIVER_FAULTS as exc:
                raise driver_fault("bulk probe", exc) from None
            if survived:
                self._commit_or_unknown(session, "native_transfer.target_prepare_failed", "bulk probe removal")
                raise DponeError("native_transfer.target_bulk_outside_transaction", short(plan))

    def _load(self, plan: TargetPlan, ordinal: int, rows: pa.Table) -> None:
        with self._session() as session:
            try:
                self._lock_chunk(session, plan, ordinal)
                self._require_staging(session, plan)
                if session.one(tsql.chunk_present(plan), (ordinal,)) is not None:
                    raise DponeError("native_transfer.target_chunk_already_loaded", f"chunk {ordinal}")
                load_chunk(session.conn, session.cursor, plan, self._backend, ordinal, rows)
            except DRIVER_ERRORS as exc:
                raise DponeError("native_transfer.target_load_failed", f"chunk {ordinal}: {sanitized(exc)}") from None
            except DRIVER_FAULTS as exc:  # before the chunk's COMMIT: XACT_ABORT and the close roll it back
                raise driver_fault(f"load chunk {ordinal}", exc) from None
            self._commit_or_unknown(session, "native_transfer.target_load_failed", f"chunk {ordinal}")

    def _staged_digest(self, session: Session, plan: TargetPlan, ordinal: int) -> tuple[int, int]:
        """As the server computes it from what it stores (``digest.py``); read back exactly only for text columns on
        a server without UTF-8 collations."""
        if not self._server_digest(session, plan):
            return self._readback_digest(session, plan, digest.chunk_fields(plan), (ordinal,), f"chunk {ordinal}")
        row = session.one(digest.chunk_digest(plan), (ordinal,))
        return int(row[0]), fold_limb_sums([int(value) for value in row[1:]])

    def _window_digest(self, session: Session, plan: TargetPlan, bounds: tuple[object, object]) -> tuple[int, int]:
        """The same digest over the target's window (``digest.window_digest``), read back exactly where a chunk is."""
        if not self._server_digest(session, plan):
            return self._readback_digest(session, plan, digest.window_fields(plan), bounds, "window")
        row = session.one(digest.window_digest(plan), bounds)
        return int(row[0]), fold_limb_sums([int(value) for value in row[1:]])

    @staticmethod
    def _server_digest(session: Session, plan: TargetPlan) -> bool:
        if digest.server_digest_supported(plan, None):
            return True
        row = session.one(digest.SERVER_VERSION)
        version = None if row is None or row[0] is None else int(row[0])
        return digest.server_digest_supported(plan, version)

    @staticmethod
    def _readback_digest(
        session: Session, plan: TargetPlan, statement: str, params: tuple[object, ...], what: str
    ) -> tuple[int, int]:
        text = digest.text_columns(plan)
        rows, total = 0, 0
        cursor = session.run(statement, params)
        while batch := cursor.fetchmany(FETCH_ROWS):
            for fields in batch:
                total = (total + digest.fields_row_hash(fields, text, what)) % MODULUS
            rows += len(batch)
        return rows, total
