"""The transfer-target port as SQL Server and PostgreSQL both implement it: one transaction shape, two dialects.

:class:`SqlTransferTarget` is bound to one target table and implements
:class:`~airflow_provider_dpone.transfer.ports.TransferTarget`. Every call derives the invocation's
:class:`TargetPlan` (so a retry in another process touches the same staging and reads the same receipt) and opens
one fresh connection, closed at the end: nothing is replayed on a new connection. What both dialects decide alike
lives here: the order of each transaction, the publication lock each takes (exclusive to prepare, publish and clean
up; shared to load and reconcile, so reconcile cannot read "absent" while a publishing transaction can still
commit), the checks on what a transaction observed, the receipt written in the publishing transaction and read back,
and which failure is definite and which outcome is unknown, and how a chunk is verified: its row count and typed
digest recomputed by the target from what it stores (never from the rows the load was handed), against the source's
typed sum. The publishing transaction locks the staging table against every writer and, under that lock, proves
every chunk is still what was verified before the swap, so nothing can change between the last check and the
publication: a chunk whose verification read its writer and the staging table's identity (:class:`ChunkSeal`) is
proven by both being unchanged, any other chunk's digest is recomputed. A window replace writes into the live target,
which may change rows as they are inserted: it locks the target against other writers before the delete, and after
the insert the target's digest of the window must equal the source's verified total before anything commits.
Statements, locks, drivers, bulk loads and digests stay in each dialect's modules.
"""

from __future__ import annotations

import datetime as dt
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Protocol

import pyarrow as pa

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.ports import TargetInvocation
from airflow_provider_dpone.transfer.values.row_digest import RowDigest
from airflow_provider_dpone.transfer.values.target import RECEIPT_TABLE, PublicationMode, TargetPlan, TargetTable
from airflow_provider_dpone.transfer.values.target_receipts import (
    ChunkEvidence,
    TargetPublication,
    TargetPublicationReceipt,
)

DRIVER_FAULTS: Final[tuple[type[Exception], ...]] = (
    NotImplementedError,
    ValueError,
    TypeError,
    LookupError,
    ArithmeticError,
)
"""What a target driver raises outside its DB-API error classes, while it converts a value the server returned or
was given: psycopg's ``NotImplementedError`` for a timestamp rendered under a ``DateStyle`` it cannot parse, a
``UnicodeDecodeError`` (a ``ValueError``) for text in another client encoding, an unknown type or a short row
(``KeyError``, ``IndexError``), a value beyond Python's range (``OverflowError``); pyarrow's conversion errors in a
bulk load (``ArrowInvalid``, ``ArrowTypeError``, ``ArrowNotImplementedError`` subclass these); pymssql's value
conversions. Each is mapped to ``native_transfer.target_driver_fault`` naming the step and the class: unmapped, it
would leave the port as if the call had been interrupted, and a publication the driver cannot read the receipt of
would be reported as absent on every retry."""


def driver_fault(step: str, exc: BaseException) -> DponeError:
    """The coded failure of a :data:`DRIVER_FAULTS` exception: the step and the exception class (never its message,
    which may quote a value)."""
    return DponeError("native_transfer.target_driver_fault", f"{step}: {type(exc).__name__}")


def short(plan: TargetPlan) -> str:
    """The publication as error details name it: a prefix of its opaque id."""
    return f"publication {plan.publication_id[:16]}"


def staging_missing(plan: TargetPlan, *, committed: bool) -> DponeError:
    """The error for an absent staging table: the publication already committed (the swap or the cleanup consumed
    the table), or its staging is gone."""
    if committed:
        return DponeError("native_transfer.target_publication_already_committed", short(plan))
    return DponeError("native_transfer.target_staging_missing", short(plan))


def check_staged_chunks(counts: dict[int, int], request: TargetPublication) -> None:
    """The staged rows per chunk ordinal must be exactly the requested chunks, none missing, extra, short or long.

    An extra ordinal is refused like a missing one: it is how a row nobody requested (a bulk-copy probe row under
    ordinal -1 orphaned by a crash, a chunk of another attempt) is kept out of the publication. The details say
    which happened to which ordinal, a chunk with rows added apart from one with rows lost.
    """
    expected = request.chunk_rows
    if counts == expected:
        return
    found: dict[str, list[int] | list[str]] = {
        "ordinals not requested": sorted(set(counts) - set(expected)),
        "requested, not staged": sorted(set(expected) - set(counts)),
        "fewer rows than verified": [
            f"{o}: {counts[o]} of {n}" for o, n in sorted(expected.items()) if counts.get(o, n) < n
        ],
        "more rows than verified": [
            f"{o}: {counts[o]} of {n}" for o, n in sorted(expected.items()) if counts.get(o, n) > n
        ],
    }
    raise DponeError(
        "native_transfer.target_staging_incomplete",
        f"{len(counts)} staged chunks, {len(expected)} requested; "
        + "; ".join(f"{what}: [{', '.join(map(str, items[:8]))}]" for what, items in found.items() if items),
    )


@dataclass(frozen=True)
class ChunkSeal:
    """What a chunk's verification read besides its digest, in the same statement and under the same table lock:
    the one transaction that wrote every row it hashed, and the staging table's storage and column identity.

    Rows written by a transaction keep its id for as long as they exist, and no transaction writes after it commits:
    so if, under the publishing transaction's lock, the chunk has the verified row count, every row still names that
    writer, and the table's storage and columns are the verified ones, the chunk holds exactly the rows that were
    hashed (an UPDATE, a DELETE plus INSERT, a TRUNCATE or rewrite, a column dropped, added, renamed or retyped
    each changes one of them)."""

    evidence: ChunkEvidence
    writer: str
    staging: str


def publication_request(chunks: Sequence[ChunkEvidence]) -> TargetPublication:
    return TargetPublication(chunks=tuple(chunks))


def committed_receipt(plan: TargetPlan, request: TargetPublication, committed_at: Any) -> TargetPublicationReceipt:
    return TargetPublicationReceipt(
        publication_id=plan.publication_id,
        invocation_id=plan.invocation_id,
        target_schema=plan.target_schema,
        target_table=plan.target_table,
        mode=plan.mode,
        rows=request.rows,
        digest=request.digest,
        committed_at=committed_at,
    )


class Statements(Protocol):
    """The statements both dialects' modules (``mssql/tsql.py``, ``postgres/statements.py``) build from a plan."""

    def select_receipt(self, plan: TargetPlan) -> str: ...
    def insert_receipt(self, plan: TargetPlan) -> str: ...
    def drop_staging(self, plan: TargetPlan) -> str: ...
    def drop_retired(self, plan: TargetPlan) -> str: ...
    def create_staging(self, plan: TargetPlan) -> str: ...
    def create_staging_index(self, plan: TargetPlan) -> str: ...
    def chunk_counts(self, plan: TargetPlan) -> str: ...
    def lock_staging(self, plan: TargetPlan) -> str: ...
    def rows_outside_window(self, plan: TargetPlan) -> str: ...
    def lock_target(self, plan: TargetPlan) -> str: ...
    def delete_window(self, plan: TargetPlan) -> str: ...
    def insert_from_staging(self, plan: TargetPlan) -> str: ...


class Session:
    """One connection and its statement runner for the duration of one port call."""

    def __init__(self, conn: Any, execute: Callable[[str, Any], Any], cursor: Any = None) -> None:
        self.conn = conn
        self.cursor = cursor
        self._execute = execute

    def run(self, statement: str, params: Sequence[Any] | None = None) -> Any:
        """Execute ``statement``; returns the cursor holding its result."""
        return self._execute(statement, params)

    def one(self, statement: str, params: Sequence[Any] | None = None) -> Any:
        return self.run(statement, params).fetchone()


class SqlTransferTarget(ABC):
    """Stage, verify and atomically publish into one bound table of a SQL database (see the module docstring)."""

    row_digests: tuple[RowDigest, ...] = (RowDigest.TYPED_SHA256,)
    """The row digest methods this target computes over what it stores; the first is the one a new route plans."""

    errors: ClassVar[tuple[type[BaseException], ...]]
    """What the driver raises for a failed statement or round trip."""
    statements: ClassVar[Statements]
    table_kinds: ClassVar[frozenset[str]]
    """The catalog's kinds of an ordinary table (any other object in the target's name is refused)."""
    reads_wait_for_writers: ClassVar[bool]
    """Whether a read of staging waits on another transaction's uncommitted load (``TransferTarget``)."""

    def __init__(self, table: TargetTable, *, lock_timeout_ms: int) -> None:
        self.table = table
        self._lock_timeout_ms = int(lock_timeout_ms)
        self._seals: dict[tuple[str, int], ChunkSeal] = {}
        self._seals_lock = threading.Lock()

    # -- the dialect ---------------------------------------------------------------------------------------------
    @abstractmethod
    def _session(self) -> AbstractContextManager[Session]:
        """A fresh connection in an explicit transaction (``target_unavailable`` if it cannot be opened)."""

    @staticmethod
    @abstractmethod
    def _sanitized(exc: BaseException) -> str:
        """Exception class and the server's error number only: server messages may quote values."""

    @abstractmethod
    def _begin(self, session: Session, plan: TargetPlan, *, exclusive: bool) -> None:
        """Take the publication's transaction-owned lock (bounded wait); refused: ``target_publication_in_flight``."""

    @abstractmethod
    def _kind(self, session: Session, schema: str, name: str) -> str | None:
        """The catalog kind of an object, or ``None`` when it does not exist."""

    @abstractmethod
    def _create_receipt_table(self, session: Session, plan: TargetPlan) -> None: ...

    @abstractmethod
    def _check_target_columns(self, session: Session, plan: TargetPlan) -> None:
        """A window-replace target must hold exactly the planned columns, in their target types."""

    @abstractmethod
    def _swap(self, session: Session, plan: TargetPlan, *, target_exists: bool) -> None:
        """Rename staging into place (the old table retired and dropped) in the publishing transaction."""

    @abstractmethod
    def _window_bounds(self, plan: TargetPlan) -> tuple[object, object]: ...

    @abstractmethod
    def _load(self, plan: TargetPlan, ordinal: int, rows: pa.Table) -> None:
        """One transaction: shared publication lock, exclusive chunk lock, refuse a staged ordinal, load, commit."""

    @abstractmethod
    def _staged_digest(self, session: Session, plan: TargetPlan, ordinal: int) -> tuple[int, int]:
        """Row count and typed sum of one staged ordinal, recomputed from what the target stores."""

    def _lock_target(self, session: Session, plan: TargetPlan, bounds: tuple[object, object]) -> None:
        """Lock the target against every other writer until the publishing transaction ends (before the delete)."""
        session.run(self.statements.lock_target(plan), bounds)

    @abstractmethod
    def _window_digest(self, session: Session, plan: TargetPlan, bounds: tuple[object, object]) -> tuple[int, int]:
        """Row count and typed sum of the target's rows inside the window, recomputed by the target from what it
        stores (the chunk digest's builder, over the target table and the window's predicate)."""

    def _staged_digest_and_writer(
        self, session: Session, plan: TargetPlan, ordinal: int
    ) -> tuple[int, int, str | None]:
        """As ``_staged_digest``, with the one transaction that wrote every row hashed, read by the same statement;
        ``None`` where the dialect cannot name it (the chunk is then recomputed at publication)."""
        return (*self._staged_digest(session, plan, ordinal), None)

    def _staging_identity(self, session: Session, plan: TargetPlan) -> str | None:
        """The staging table's storage and column identity (read while a lock on it is held); ``None``: the dialect
        has none, and every chunk is recomputed at publication."""
        return None

    def _staged_chunks(self, session: Session, plan: TargetPlan) -> dict[int, tuple[int, str | None]]:
        """Per staged ordinal: its row count and, where the dialect can name it, its one writer."""
        return {int(o): (int(n), None) for o, n in session.run(self.statements.chunk_counts(plan)).fetchall()}

    def _check_staging_schema(self, session: Session, plan: TargetPlan) -> None:
        """Under the publishing transaction's lock on staging: its columns (names, order, types, nullability,
        collation) are the ones ``prepare`` created from the plan, which the chunks were loaded and verified into;
        else ``target_staging_schema_changed``. A digest recomputed over a retyped column can equal the source's
        (``bigint`` and ``numeric`` render one integer alike), so values alone would publish a foreign type."""
        return None

    def _seals_trusted(self, session: Session) -> bool:
        """Whether a :class:`ChunkSeal` may stand for a chunk's digest at publication (``False``: recompute every
        chunk). A seal proves that no SQL writer touched the chunk; what lies below the database is the storage's."""
        return True

    def _check_session(self, session: Session) -> None:
        """Refuse a server or session the transaction shape does not hold on (prepare, before any DDL)."""
        return None

    def _check_staging(self, session: Session, plan: TargetPlan) -> None:
        """Refuse staging or a target the load would not write exactly (prepare, after staging is created)."""
        return None

    def _prepared(self, plan: TargetPlan) -> None:
        """Runs after the prepare transaction committed."""
        return None

    def _timestamp(self, value: Any) -> Any:
        """A receipt's commit time as the driver returns it -> ``datetime``."""
        return value

    # -- shared plumbing -----------------------------------------------------------------------------------------
    def plan(self, invocation: TargetInvocation) -> TargetPlan:
        """The invocation's plan; ``native_transfer.row_digest_unsupported`` when its rows were hashed by a method this
        target does not compute."""
        if invocation.row_digest not in self.row_digests:
            raise DponeError(
                "native_transfer.row_digest_unsupported",
                f"{type(self).__name__} computes {', '.join(self.row_digests)}, not {invocation.row_digest}",
            )
        return self.table.plan(invocation.invocation_id, invocation.columns, invocation.window, invocation.row_digest)

    def _receipt(self, session: Session, plan: TargetPlan) -> TargetPublicationReceipt | None:
        if self._kind(session, plan.target_schema, RECEIPT_TABLE) is None:
            return None
        row = session.one(self.statements.select_receipt(plan), (plan.publication_id,))
        if row is None:
            return None
        publication_id, invocation_id, schema, table, mode, rows, digest, committed_at = row
        committed = self._timestamp(committed_at)
        try:
            return TargetPublicationReceipt(
                publication_id=publication_id,
                invocation_id=invocation_id,
                target_schema=schema,
                target_table=table,
                mode=PublicationMode(mode),
                rows=int(rows),
                digest=digest,
                committed_at=committed,
            )
        except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError: not the driver's fault
            detail = f"{short(plan)}: the stored receipt is not one this provider writes ({type(exc).__name__})"
            raise DponeError("native_transfer.target_receipt_conflict", detail) from None

    def _refuse_committed(self, session: Session, plan: TargetPlan) -> None:
        """A publication whose receipt exists is done: nothing may stage or publish it again."""
        if self._receipt(session, plan) is not None:
            raise DponeError("native_transfer.target_publication_already_committed", short(plan))

    def _target_exists(self, session: Session, plan: TargetPlan, *, required: bool = False) -> bool:
        """Whether the target is a table; window replace (``required``) writes into an existing one, never creates."""
        kind = self._kind(session, plan.target_schema, plan.target_table)
        if kind is not None and kind not in self.table_kinds:
            raise DponeError("native_transfer.target_schema_mismatch", f"target object kind {kind!r} is not a table")
        if required and kind is None:
            raise DponeError("native_transfer.target_relation_not_found", "window_replace target does not exist")
        return kind is not None

    def _require_staging(self, session: Session, plan: TargetPlan) -> None:
        if self._kind(session, plan.target_schema, plan.staging_table) is None:
            raise staging_missing(plan, committed=self._receipt(session, plan) is not None)

    def _commit_or_unknown(self, session: Session, code: str, what: str) -> None:
        try:
            session.conn.commit()
        except Exception as exc:  # noqa: BLE001 - whatever COMMIT raised, its outcome is unknown
            raise DponeError(code, f"{what}: commit outcome unknown ({self._sanitized(exc)})") from None

    def _failed(self, code: str, what: str, exc: BaseException) -> DponeError:
        return DponeError(code, f"{what}{': ' if what else ''}{self._sanitized(exc)}")

    # -- the port ------------------------------------------------------------------------------------------------
    def admit(self, invocation: TargetInvocation) -> None:
        """Building the plan refuses unsupported types, reserved names and a window on a non-temporal column."""
        self.plan(invocation)

    def prepare(self, invocation: TargetInvocation) -> None:
        plan = self.plan(invocation)
        with self._seals_lock:  # a new staging table: no earlier verification speaks for it
            for key in [key for key in self._seals if key[0] == plan.publication_id]:
                del self._seals[key]
        with self._session() as session:
            try:
                self._begin(session, plan, exclusive=True)
                self._check_session(session)
                self._create_receipt_table(session, plan)
                self._refuse_committed(session, plan)
                window = plan.mode is PublicationMode.WINDOW_REPLACE
                self._target_exists(session, plan, required=window)
                if window:
                    self._check_target_columns(session, plan)
                sql = self.statements
                for build in (sql.drop_staging, sql.create_staging, sql.create_staging_index):
                    session.run(build(plan))
                self._check_staging(session, plan)
            except self.errors as exc:
                raise self._failed("native_transfer.target_prepare_failed", "", exc) from None
            except DRIVER_FAULTS as exc:
                raise driver_fault("prepare", exc) from None
            self._commit_or_unknown(session, "native_transfer.target_prepare_failed", "prepare")
        self._prepared(plan)

    def load_chunk(self, invocation: TargetInvocation, ordinal: int, rows: pa.Table) -> None:
        self._load(self.plan(invocation), ordinal, rows)

    def verify_chunk(self, invocation: TargetInvocation, expected: ChunkEvidence) -> ChunkEvidence:
        """Reads only: the staged chunk's row count and typed sum as the target recomputes them from what it stores
        (``expected`` names the ordinal; its values are never used), and its :class:`ChunkSeal` where the dialect
        reads one. Every read is rolled back."""
        plan = self.plan(invocation)
        with self._session() as session:
            try:
                self._require_staging(session, plan)
                rows, total, writer = self._staged_digest_and_writer(session, plan, expected.ordinal)
                # the digest's read holds a lock on staging until the rollback: no DDL lands between the two reads
                staging = None if writer is None else self._staging_identity(session, plan)
                session.conn.rollback()
            except self.errors as exc:
                raise self._failed("native_transfer.target_unavailable", "verify", exc) from None
            except DRIVER_FAULTS as exc:
                raise driver_fault(f"verify chunk {expected.ordinal}", exc) from None
        evidence = ChunkEvidence(ordinal=expected.ordinal, rows=rows, typed_sum=f"{total:064x}")
        if writer is not None and staging is not None:
            with self._seals_lock:
                self._seals[(plan.publication_id, evidence.ordinal)] = ChunkSeal(evidence, writer, staging)
        return evidence

    def publish(self, invocation: TargetInvocation, chunks: Sequence[ChunkEvidence]) -> TargetPublicationReceipt:
        """One transaction: receipt absent, staging locked against writers and exactly the requested chunks, every
        chunk under that lock either proven unchanged since a verification that recomputed the requested evidence
        (:class:`ChunkSeal`) or its count and typed digest recomputed and equal to the requested, swap or window
        replace, receipt.

        A failure before COMMIT is rolled back by the server (``target_publication_failed``; a chunk that differs:
        ``target_verification_failed``, the old target intact); any failure of the COMMIT itself is unknown
        (``target_publication_outcome_unknown``).
        """
        plan, request = self.plan(invocation), publication_request(chunks)
        with self._session() as session:
            try:
                receipt = self._publish_transaction(session, plan, request)
            except self.errors as exc:
                raise self._failed("native_transfer.target_publication_failed", "", exc) from None
            except DRIVER_FAULTS as exc:  # before COMMIT: the server rolls the transaction back
                raise driver_fault("publish, before commit", exc) from None
            self._commit_or_unknown(session, "native_transfer.target_publication_outcome_unknown", short(plan))
        return receipt.require_matches(request)

    def _publish_transaction(
        self, session: Session, plan: TargetPlan, request: TargetPublication
    ) -> TargetPublicationReceipt:
        sql = self.statements
        self._begin(session, plan, exclusive=True)
        self._refuse_committed(session, plan)
        self._require_staging(session, plan)
        session.run(sql.lock_staging(plan))
        self._check_staging_schema(session, plan)
        staged = self._staged_chunks(session, plan)
        check_staged_chunks({ordinal: rows for ordinal, (rows, _) in staged.items()}, request)
        staging = self._staging_identity(session, plan)
        seals: dict[int, ChunkSeal] = {}
        if self._seals_trusted(session):
            with self._seals_lock:
                seals = {
                    ordinal: seal
                    for (publication, ordinal), seal in self._seals.items()
                    if publication == plan.publication_id
                }
        for chunk in request.chunks:
            seal = seals.get(chunk.ordinal)
            if seal is not None and (seal.evidence, seal.writer, seal.staging) == (
                chunk,
                staged[chunk.ordinal][1],
                staging,
            ):
                continue  # proven unchanged since it was verified (ChunkSeal)
            rows, total = self._staged_digest(session, plan, chunk.ordinal)
            if rows != chunk.rows or f"{total:064x}" != chunk.typed_sum:
                raise DponeError(
                    "native_transfer.target_verification_failed",
                    f"chunk {chunk.ordinal}: the staged rows differ from the source's at publication",
                )
        if plan.mode is PublicationMode.FULL_REFRESH:
            self._swap(session, plan, target_exists=self._target_exists(session, plan))
        else:
            self._target_exists(session, plan, required=True)
            bounds = self._window_bounds(plan)
            outside = session.one(sql.rows_outside_window(plan), bounds)
            if outside is None or int(outside[0]):
                raise DponeError("native_transfer.target_rows_outside_window", f"{outside and outside[0]} staged rows")
            self._lock_target(session, plan, bounds)
            session.run(sql.delete_window(plan), bounds)
            inserted = int(session.run(sql.insert_from_staging(plan)).rowcount)
            if inserted != request.rows:
                raise DponeError("native_transfer.target_staging_incomplete", f"inserted {inserted} of {request.rows}")
            self._require_published_window(session, plan, request, bounds)
            session.run(sql.drop_staging(plan))
        values = (plan.publication_id, plan.invocation_id, plan.target_schema, plan.target_table, plan.mode.value)
        row = session.one(sql.insert_receipt(plan), (*values, request.rows, request.digest))
        committed_at = None if row is None else self._timestamp(row[0])
        if not isinstance(committed_at, dt.datetime):
            raise DponeError("native_transfer.target_publication_failed", "receipt insert returned no commit time")
        return committed_receipt(plan, request, committed_at)

    def _require_published_window(
        self, session: Session, plan: TargetPlan, request: TargetPublication, bounds: tuple[object, object]
    ) -> None:
        """What the window holds after the replace, as the target computes it over its own rows, inside the
        publishing transaction and under its lock on the target, must be the source's verified total (the chunk
        receipts' rows and typed sums), not what the insert reported: a trigger, rule, generated column or padding
        rule that changed a row as it was inserted, or a row another writer put into the window, is refused and
        rolled back with the old target."""
        rows, total = self._window_digest(session, plan, bounds)
        if rows != request.rows or total != request.typed_sum:
            raise DponeError(
                "native_transfer.target_published_window_differs",
                f"{short(plan)}: the window holds {rows} rows, {request.rows} verified; "
                f"typed digest {'equal' if total == request.typed_sum else 'differs'}",
            )

    def reconcile(self, invocation: TargetInvocation) -> TargetPublicationReceipt | None:
        """The receipt, read under the shared publication lock; ``None`` is final. Never changes anything."""
        plan = self.plan(invocation)
        with self._session() as session:
            try:
                self._begin(session, plan, exclusive=False)
                receipt = self._receipt(session, plan)
                session.conn.rollback()
            except self.errors as exc:
                raise self._failed("native_transfer.target_unavailable", "reconcile", exc) from None
            except DRIVER_FAULTS as exc:  # the receipt could not be read: never "absent"
                raise driver_fault("reconcile, reading the receipt", exc) from None
        return receipt

    def cleanup(self, invocation: TargetInvocation) -> None:
        """Drop the invocation's staging and retired tables (idempotent); waits out an in-flight publication."""
        plan = self.plan(invocation)
        with self._session() as session:
            try:
                self._begin(session, plan, exclusive=True)
                for name, build in (
                    (plan.staging_table, self.statements.drop_staging),
                    (plan.retired_table, self.statements.drop_retired),
                ):
                    if self._kind(session, plan.target_schema, name) is not None:
                        session.run(build(plan))
            except self.errors as exc:
                raise self._failed("native_transfer.target_unavailable", "cleanup", exc) from None
            except DRIVER_FAULTS as exc:
                raise driver_fault("cleanup", exc) from None
            self._commit_or_unknown(session, "native_transfer.target_unavailable", "cleanup")
