"""An in-memory transfer target with deterministic fault injection.

It implements the one target port (``transfer/ports.py``), with the same observable outcomes as the PostgreSQL and
SQL Server adapters, and runs the same contract suite (``tests/transfer/targets/test_target_contract.py``): a transaction's
effects appear at its commit and all at once; a receipt is written in the publication's transaction; reconcile never
answers while a publication is in flight. Faults are armed for the *next* commit (prepare, a chunk load or a
publication; ``after`` skips that many commits first):

* ``CRASH_BEFORE_COMMIT``: the worker dies before sending COMMIT (nothing is applied; :class:`SimulatedCrash`).
* ``CRASH_AFTER_COMMIT``: the commit applies, then the worker dies (:class:`SimulatedCrash`).
* ``COMMIT_DROPPED``: the connection drops while COMMIT is sent, and the server never received it.
* ``LOST_ACK``: the commit applies but its acknowledgement is lost.
* ``IN_FLIGHT``: COMMIT is sent and the server has not finished; ``settle()`` decides it later.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import pyarrow as pa

from airflow_provider_dpone.core.columns import NativeColumn
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.typed_digest import MultisetDigest
from airflow_provider_dpone.transfer.ports import TargetInvocation
from airflow_provider_dpone.transfer.targets.sql_target import committed_receipt, publication_request
from airflow_provider_dpone.transfer.values.arrow_chunk import chunk_rows
from airflow_provider_dpone.transfer.values.row_digest import RowDigest
from airflow_provider_dpone.transfer.values.target import PublicationMode, TargetPlan, TargetTable
from airflow_provider_dpone.transfer.values.target_receipts import ChunkEvidence, TargetPublicationReceipt
from airflow_provider_dpone.transfer.values.target_values import RowConverter


class Fault(StrEnum):
    CRASH_BEFORE_COMMIT = "crash_before_commit"
    CRASH_AFTER_COMMIT = "crash_after_commit"
    COMMIT_DROPPED = "commit_dropped"
    LOST_ACK = "lost_ack"
    IN_FLIGHT = "in_flight"


class SimulatedCrash(BaseException):
    """The worker process died at a fault point (BaseException: no adapter code may swallow it)."""


class FaultPlan:
    """Faults and observers armed for the next commit of a mutation; shared by every backend's test harness."""

    def __init__(self) -> None:
        self._fault: Fault | None = None
        self._skip = 0
        self._before_commit: Callable[[], None] | None = None

    def arm(self, fault: Fault, *, after: int = 0) -> None:
        self._fault, self._skip = fault, after

    def before_next_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` while the next transaction is complete but not yet committed."""
        self._before_commit = callback

    def take(self) -> tuple[Fault | None, Callable[[], None] | None]:
        callback, self._before_commit = self._before_commit, None
        if self._skip:
            self._skip -= 1
            return None, callback
        fault, self._fault = self._fault, None
        return fault, callback


@dataclass
class FakeTable:
    columns: tuple[tuple[str, str], ...]  # (name, target type spelling) pairs, for schema checks
    rows: list[tuple[object, ...]] = field(default_factory=list)
    kind: str = "table"
    """The catalog kind: anything but ``table`` (a view put in the table's place) is refused as a target."""


@dataclass
class FakeDatabase:
    tables: dict[tuple[str, str], FakeTable] = field(default_factory=dict)
    receipts: dict[tuple[str, str], TargetPublicationReceipt] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    in_flight: dict[str, Callable[[], None]] = field(default_factory=dict)

    def read(self, schema: str, table: str) -> list[tuple[object, ...]] | None:
        with self.lock:
            found = self.tables.get((schema, table))
            return None if found is None else list(found.rows)


def fake_columns(plan: TargetPlan) -> tuple[tuple[str, str], ...]:
    return tuple((c.name, c.column_type.postgres + (" null" if c.column_type.nullable else "")) for c in plan.columns)


class InMemoryTransferTarget:
    """The transfer-target port over :class:`FakeDatabase`; staging rows are stored as ``(ordinal, *values)``.

    ``calls`` records each port call (``load:N``/``verify:N`` with their ordinal); ``lose_a_row`` makes the next
    load store one row fewer than it was sent, a corruption only the target-local verification can see.
    """

    reads_wait_for_writers = False
    row_digests = (RowDigest.TYPED_SHA256,)  # it hashes with the Python typed digest

    def __init__(
        self, table: TargetTable | None = None, database: FakeDatabase | None = None, faults: FaultPlan | None = None
    ) -> None:
        self.table = table or TargetTable(target_schema="dbo", table="events")
        self.database = database or FakeDatabase()
        self.faults = faults or FaultPlan()
        self.calls: list[str] = []
        self.lose_a_row = False

    # -- test handles --------------------------------------------------------------------------------------------
    def plan(self, invocation: TargetInvocation) -> TargetPlan:
        return self.table.plan(invocation.invocation_id, invocation.columns, invocation.window)

    def rows(self) -> list[tuple[object, ...]]:
        """What readers of the bound target table see (empty while it does not exist)."""
        return self.database.read(self.table.target_schema, self.table.table) or []

    @property
    def receipts(self) -> list[TargetPublicationReceipt]:
        return list(self.database.receipts.values())

    def seed(self, columns: Sequence[NativeColumn], rows: Sequence[tuple[object, ...]]) -> None:
        """Create the bound target table with ``columns``, holding ``rows``."""
        plan = self.table.plan("seed-invocation", columns, None)
        self.database.tables[(plan.target_schema, plan.target_table)] = FakeTable(fake_columns(plan), list(rows))

    def settle(self, publication_id: str, *, commit: bool) -> None:
        """Finish an ``IN_FLIGHT`` publication (the server commits it or rolls it back)."""
        apply = self.database.in_flight.pop(publication_id)
        if commit:
            with self.database.lock:
                apply()

    # -- helpers -------------------------------------------------------------------------------------------------
    def _commit(self, apply: Callable[[], None], *, publication: str | None = None) -> None:
        """Apply a finished transaction, honouring the armed fault. Effects appear all at once, under the lock."""
        fault, callback = self.faults.take()
        if callback is not None:
            callback()
        if fault is Fault.CRASH_BEFORE_COMMIT:
            raise SimulatedCrash("before commit")
        if fault is Fault.COMMIT_DROPPED:
            raise ConnectionError("connection dropped during commit")
        if fault is Fault.IN_FLIGHT:
            if publication is not None:
                self.database.in_flight[publication] = apply
            raise ConnectionError("commit sent, outcome pending")
        with self.database.lock:
            apply()
        if fault is Fault.CRASH_AFTER_COMMIT:
            raise SimulatedCrash("after commit")
        if fault is Fault.LOST_ACK:
            raise ConnectionError("commit acknowledgement lost")

    def _staging(self, plan: TargetPlan) -> FakeTable:
        table = self.database.tables.get((plan.target_schema, plan.staging_table))
        if table is None:
            committed = self._receipt(plan) is not None
            code = "target_publication_already_committed" if committed else "target_staging_missing"
            raise DponeError(f"native_transfer.{code}", f"publication {plan.publication_id[:16]}")
        return table

    def _receipt(self, plan: TargetPlan) -> TargetPublicationReceipt | None:
        return self.database.receipts.get((plan.target_schema, plan.publication_id))

    def _not_in_flight(self, plan: TargetPlan) -> None:
        if plan.publication_id in self.database.in_flight:
            raise DponeError("native_transfer.target_publication_in_flight", f"publication {plan.publication_id[:16]}")

    # -- the port ------------------------------------------------------------------------------------------------
    def admit(self, invocation: TargetInvocation) -> None:
        self.calls.append("admit")
        self.plan(invocation)

    def prepare(self, invocation: TargetInvocation) -> None:
        self.calls.append("prepare")
        plan = self.plan(invocation)
        with self.database.lock:
            self._not_in_flight(plan)
            if self._receipt(plan) is not None:
                raise DponeError("native_transfer.target_publication_already_committed", "prepare after commit")
            target = self.database.tables.get((plan.target_schema, plan.target_table))
            _refuse_non_table(target)
            if plan.mode is PublicationMode.WINDOW_REPLACE and target is None:
                raise DponeError("native_transfer.target_relation_not_found", "window_replace target")
            if plan.mode is PublicationMode.WINDOW_REPLACE and target.columns != fake_columns(plan):
                raise DponeError("native_transfer.target_schema_mismatch", "window_replace target")

        def apply() -> None:
            self.database.tables[(plan.target_schema, plan.staging_table)] = FakeTable(fake_columns(plan))

        try:
            self._commit(apply)
        except ConnectionError:
            raise DponeError("native_transfer.target_prepare_failed", "prepare: commit outcome unknown") from None

    def load_chunk(self, invocation: TargetInvocation, ordinal: int, rows: pa.Table) -> None:
        self.calls.append(f"load:{ordinal}")
        plan = self.plan(invocation)
        values = chunk_rows(rows, [c.column_type.logical for c in plan.columns])
        convert = RowConverter(plan.column_names, [c.column_type for c in plan.columns])
        staged = [(ordinal, *convert(row, index)) for index, row in enumerate(values)]
        if self.lose_a_row and staged:
            self.lose_a_row, staged = False, staged[:-1]
        with self.database.lock:
            table = self._staging(plan)
            if any(row[0] == ordinal for row in table.rows):
                raise DponeError("native_transfer.target_chunk_already_loaded", f"chunk {ordinal}")
        try:
            self._commit(lambda: self._staging(plan).rows.extend(staged))
        except ConnectionError:
            raise DponeError("native_transfer.target_load_failed", f"chunk {ordinal}: commit outcome unknown") from None

    def verify_chunk(self, invocation: TargetInvocation, expected: ChunkEvidence) -> ChunkEvidence:
        self.calls.append(f"verify:{expected.ordinal}")
        plan = self.plan(invocation)
        with self.database.lock:
            rows = [row[1:] for row in self._staging(plan).rows if row[0] == expected.ordinal]
        observed = MultisetDigest(plan.typed_columns)
        observed.add_rows(rows)
        return ChunkEvidence(ordinal=expected.ordinal, rows=observed.rows, typed_sum=f"{observed.total:064x}")

    def publish(self, invocation: TargetInvocation, chunks: Sequence[ChunkEvidence]) -> TargetPublicationReceipt:
        self.calls.append("publish")
        plan, request = self.plan(invocation), publication_request(chunks)
        with self.database.lock:
            self._not_in_flight(plan)
            if self._receipt(plan) is not None:
                raise DponeError("native_transfer.target_publication_already_committed", "publish")
            staging = self._staging(plan)
            counts: dict[int, int] = {}
            for row in staging.rows:
                ordinal = row[0]
                assert isinstance(ordinal, int)
                counts[ordinal] = counts.get(ordinal, 0) + 1
            if counts != request.chunk_rows:
                raise DponeError("native_transfer.target_staging_incomplete", f"{len(counts)} staged chunks")
            for chunk in request.chunks:  # recomputed under the lock, as the publishing transaction does
                observed = MultisetDigest(plan.typed_columns)
                observed.add_rows(row[1:] for row in staging.rows if row[0] == chunk.ordinal)
                if (observed.rows, f"{observed.total:064x}") != (chunk.rows, chunk.typed_sum):
                    raise DponeError("native_transfer.target_verification_failed", f"chunk {chunk.ordinal}")
            new_rows = [row[1:] for row in staging.rows]
            key = (plan.target_schema, plan.target_table)
            target = self.database.tables.get(key)
            _refuse_non_table(target)
            if plan.window is not None:
                window, position = plan.window, plan.column_names.index(plan.window.column)
                if target is None:
                    raise DponeError("native_transfer.target_relation_not_found", "window_replace target is gone")
                inside = _inside(window.start, window.end)
                if not all(inside(row[position]) for row in new_rows):
                    raise DponeError("native_transfer.target_rows_outside_window", "staged rows")
                kept = [row for row in target.rows if not inside(row[position])]
                new_rows = kept + new_rows
            receipt = committed_receipt(plan, request, dt.datetime.now(dt.UTC))

        def apply() -> None:
            # Full refresh renames staging into place; window replace drops it: either way it is gone.
            self.database.tables[key] = FakeTable(fake_columns(plan), new_rows)
            del self.database.tables[(plan.target_schema, plan.staging_table)]
            self.database.receipts[(plan.target_schema, plan.publication_id)] = receipt

        try:
            self._commit(apply, publication=plan.publication_id)
        except ConnectionError:
            raise DponeError(
                "native_transfer.target_publication_outcome_unknown", f"publication {plan.publication_id[:16]}"
            ) from None
        return receipt

    def reconcile(self, invocation: TargetInvocation) -> TargetPublicationReceipt | None:
        self.calls.append("reconcile")
        plan = self.plan(invocation)
        with self.database.lock:
            self._not_in_flight(plan)
            receipt = self._receipt(plan)
        return receipt

    def cleanup(self, invocation: TargetInvocation) -> None:
        self.calls.append("cleanup")
        plan = self.plan(invocation)
        with self.database.lock:
            self._not_in_flight(plan)
            for name in (plan.staging_table, plan.retired_table):
                self.database.tables.pop((plan.target_schema, name), None)


def _refuse_non_table(target: FakeTable | None) -> None:
    """As the SQL targets, in prepare and in the publishing transaction: the target name must hold a table."""
    if target is not None and target.kind != "table":
        raise DponeError("native_transfer.target_schema_mismatch", f"target object kind {target.kind!r} is not a table")


def _inside(start: dt.datetime, end: dt.datetime) -> Callable[[object], bool]:
    def inside(value: object) -> bool:
        if isinstance(value, dt.datetime):
            return start <= value < end
        if isinstance(value, dt.date):
            return start.date() <= value < end.date()
        return False

    return inside
