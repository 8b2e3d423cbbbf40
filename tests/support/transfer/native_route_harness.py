"""Shared setup of the route tests on fakes: a raw ReplacingMergeTree-like source, file:// stage and journal."""

from __future__ import annotations

import collections
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from airflow_provider_dpone.core.alerts import AlertEvent
from airflow_provider_dpone.core.manifest.transfer_options import NativeTransferOptions
from airflow_provider_dpone.transfer.route.admission import SourceRequest
from airflow_provider_dpone.transfer.route.route import NativeTransferRoute, RouteResult
from airflow_provider_dpone.transfer.storage import ObjectJournalStore, ObjectStageStore
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow
from tests.support.fakes.transfer_source import FakeSnapshotSource, FakeTable, ManualClock
from tests.support.fakes.transfer_target import Fault, InMemoryTransferTarget, SimulatedCrash

OPERATION = "0123456789abcdef0123456789abcdef"
FINGERPRINT = "f" * 64
LEASE = dt.timedelta(minutes=10)
COLUMNS = [
    ("id", "UInt64"),
    ("ver", "UInt64"),
    ("is_deleted", "UInt8"),
    ("payload", "Nullable(String)"),
    ("ts", "DateTime64(3, 'UTC')"),
    ("amount", "Decimal(18, 4)"),
]


def t(day: int, hour: int = 0) -> dt.datetime:
    return dt.datetime(2026, 1, day, hour)


def rows_of_batches() -> list[list[tuple[object, ...]]]:
    """Separate inserts: duplicate keys, identical duplicates, versions, a delete marker, NULL/empty/zero."""
    return [
        [(1, 1, 0, b"a", t(1), Decimal("1.5")), (2, 1, 0, None, t(2), Decimal(0))],
        [(1, 2, 0, b"b", t(3), Decimal(2)), (3, 1, 0, b"", t(4), Decimal(0))],
        [(1, 2, 0, b"b", t(3), Decimal(2)), (4, 1, 0, b"0", t(5), Decimal("-0.0001"))],
        [(2, 2, 1, None, t(6), Decimal(0))],
    ]


def make_table() -> FakeTable:
    table = FakeTable(columns=list(COLUMNS), engine_args="ver, is_deleted", sorting_key="id")
    for batch in rows_of_batches():
        table.insert(batch)
    return table


def multiset(rows: list[tuple[object, ...]]) -> collections.Counter[tuple[object, ...]]:
    """Rows normalized to comparable values (bytes as text, aware datetimes as naive UTC, decimals by value)."""

    def norm(value: object) -> object:
        if isinstance(value, bytes):
            return value.decode()
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            return value.astimezone(dt.UTC).replace(tzinfo=None)
        return value

    return collections.Counter(tuple(norm(v) for v in row) for row in rows)


@dataclass
class Harness:
    root: Path
    source: FakeSnapshotSource
    target: InMemoryTransferTarget = field(default_factory=InMemoryTransferTarget)
    clock: ManualClock = field(default_factory=ManualClock)
    options: NativeTransferOptions = field(
        default_factory=lambda: NativeTransferOptions.model_validate(
            {"source_snapshot": {"mode": "exact_raw_rows"}, "execution": {"chunk_rows": 2}}
        )
    )
    relation: RelationRef = field(default_factory=lambda: RelationRef(database="db", table="events"))
    window: UtcWindow | None = None
    """``None``: a full refresh; else a window replace of this window into the existing target."""
    target_bindings: int = 0
    alerts: list[AlertEvent] = field(default_factory=list)
    """Every alert the route emitted."""

    def request(self) -> SourceRequest:
        return SourceRequest(
            operation_id=OPERATION,
            route_fingerprint=FINGERPRINT,
            relation=self.relation,
            window=self.window,
            options=self.options,
            block_rows=3,
        )

    def stage(self) -> ObjectStageStore:
        return ObjectStageStore(f"file://{self.root}", OPERATION)

    def route(
        self, checkpoint: Callable[[str], None] | None = None, stage: ObjectStageStore | None = None
    ) -> NativeTransferRoute:
        def bind_target() -> InMemoryTransferTarget:
            self.target_bindings += 1
            return self.target

        kwargs = {} if checkpoint is None else {"checkpoint": checkpoint}
        return NativeTransferRoute(
            self.request(),
            connector=self.source,
            journal_store=ObjectJournalStore(f"file://{self.root}", OPERATION),
            stage=self.stage() if stage is None else stage,
            target_factory=bind_target,
            clock=self.clock,
            lease_duration=LEASE,
            alerts=self.alerts.append,
            **kwargs,
        )

    def run(
        self, checkpoint: Callable[[str], None] | None = None, stage: ObjectStageStore | None = None
    ) -> RouteResult:
        return self.route(checkpoint, stage).run()

    def expire_lease(self) -> None:
        self.clock.advance(LEASE * 2)

    def source_rows(self) -> collections.Counter[tuple[object, ...]]:
        table = self.source.tables[("db", "events")]
        return multiset([row for part in table.parts for i, row in enumerate(part.rows) if i not in part.deleted])


def make_harness(root: Path) -> Harness:
    return Harness(root=root, source=FakeSnapshotSource({("db", "events"): make_table()}))


def crash_at(name: str, occurrence: int = 1) -> Callable[[str], None]:
    seen = {"count": 0}

    def checkpoint(point: str) -> None:
        if point == name:
            seen["count"] += 1
            if seen["count"] == occurrence:
                raise SimulatedCrash(point)

    return checkpoint


def fault_at(harness: Harness, point: str | None, fault: Fault, *, after: int = 0) -> Callable[[str], None]:
    """Arm ``fault`` on the target's commit ``after`` commits past route checkpoint ``point`` (``None``: now)."""
    if point is None:
        harness.target.faults.arm(fault, after=after)

    def checkpoint(name: str) -> None:
        if name == point:
            harness.target.faults.arm(fault, after=after)

    return checkpoint
