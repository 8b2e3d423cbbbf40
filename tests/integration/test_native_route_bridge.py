"""The bridge and the target-table custody on the in-memory target (same port contract as the real adapters).

The bridge maps reconcile COMMITTED -> receipt and ABSENT -> None, keeps an in-flight publication held (it raises),
and refuses a receipt that does not match the requested publication. Target custody admits one operation per table
and refuses to overlap a publication whose outcome is unknown.
"""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_provider_dpone.adapters.storage.native_journal import ObjectJournalStore
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.native_journal import LeaseRecord
from airflow_provider_dpone.contracts.native_window import UtcWindow
from airflow_provider_dpone.contracts.transfer_target import PublicationMode
from airflow_provider_dpone.contracts.typed_digest import MultisetDigest
from airflow_provider_dpone.ports.transfer import ChunkEvidence, TargetInvocation
from airflow_provider_dpone.protocol.native_transfer.journal import RouteJournal
from airflow_provider_dpone.protocol.native_transfer.schema_admission import map_type
from airflow_provider_dpone.protocol.native_transfer.target_bridge import TargetPortBridge, TargetTable, target_plan
from airflow_provider_dpone.protocol.native_transfer.target_custody import TargetCustody
from tests.fakes.transfer_source import ManualClock
from tests.fakes.transfer_target import Fault, InMemoryTransferTarget

COLUMNS = (
    map_type("id", "UInt64", implicit_utc=False),
    map_type("payload", "Nullable(String)", implicit_utc=False),
    map_type("ts", "DateTime64(3, 'UTC')", implicit_utc=False),
)
ROWS = [(1, b"a", dt.datetime(2026, 1, 1, tzinfo=dt.UTC)), (1, b"a", dt.datetime(2026, 1, 1, tzinfo=dt.UTC))]
TABLE = TargetTable(schema="dbo", table="events")
LEASE = dt.timedelta(minutes=10)


def invocation(window: UtcWindow | None = None) -> TargetInvocation:
    return TargetInvocation("0" * 32, "1" * 32, COLUMNS, window)


def evidence(rows: list[tuple[object, ...]], ordinal: int = 0) -> ChunkEvidence:
    digest = MultisetDigest([column.typed for column in COLUMNS])
    digest.add_rows(rows)
    return ChunkEvidence(ordinal=ordinal, rows=digest.rows, typed_sum=f"{digest.total:064x}")


def test_plan_maps_window_to_window_replace_and_none_to_full_refresh() -> None:
    window = UtcWindow.of("ts", dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 1, 2, tzinfo=dt.UTC))
    assert target_plan(invocation(), TABLE).mode is PublicationMode.FULL_REFRESH
    plan = target_plan(invocation(window), TABLE)
    assert plan.mode is PublicationMode.WINDOW_REPLACE and plan.window is not None
    assert plan.window.start == window.start_at and plan.invocation_id == "1" * 32
    bad = UtcWindow.of("id", window.start_at, window.end_at)
    with pytest.raises(DponeError) as refused:
        TargetPortBridge(InMemoryTransferTarget(), TABLE).admit(invocation(bad))
    assert refused.value.code == "mssql_native.target_plan_invalid"


def test_publish_reconcile_and_lost_acknowledgement() -> None:
    port = InMemoryTransferTarget()
    bridge = TargetPortBridge(port, TABLE)
    assert bridge.reconcile(invocation()) is None, "ABSENT is None"
    bridge.prepare(invocation())
    bridge.load_chunk(invocation(), 0, ROWS)
    expected = evidence(ROWS)
    assert bridge.verify_chunk(invocation(), expected) == expected
    port.faults.arm(Fault.LOST_ACK)  # type: ignore[attr-defined]
    with pytest.raises(DponeError):
        bridge.publish(invocation(), [expected])
    receipt = bridge.reconcile(invocation())
    assert receipt is not None and receipt.rows == 2
    assert receipt.publication_id == target_plan(invocation(), TABLE).publication_id
    with pytest.raises(DponeError) as again:
        bridge.publish(invocation(), [expected])
    assert again.value.code == "mssql_native.target_publication_already_committed", "never a second commit"


def test_in_flight_publication_keeps_reconcile_held() -> None:
    port = InMemoryTransferTarget()
    bridge = TargetPortBridge(port, TABLE)
    bridge.prepare(invocation())
    bridge.load_chunk(invocation(), 0, ROWS)
    port.faults.arm(Fault.IN_FLIGHT)  # type: ignore[attr-defined]
    with pytest.raises(DponeError):
        bridge.publish(invocation(), [evidence(ROWS)])
    with pytest.raises(DponeError) as held:
        bridge.reconcile(invocation())
    assert held.value.code == "mssql_native.target_publication_in_flight"
    port.settle(target_plan(invocation(), TABLE).publication_id, commit=False)
    assert bridge.reconcile(invocation()) is None


def test_verification_reports_what_the_target_holds() -> None:
    bridge = TargetPortBridge(InMemoryTransferTarget(), TABLE)
    bridge.prepare(invocation())
    bridge.load_chunk(invocation(), 0, ROWS[:1])
    assert bridge.verify_chunk(invocation(), evidence(ROWS)) == evidence(ROWS[:1])


def custody(root, operation: str, clock: ManualClock) -> TargetCustody:
    return TargetCustody(
        ObjectJournalStore(f"file://{root}/targets", "t" * 32),
        operation,
        clock,
        LEASE,
        lambda other: ObjectJournalStore(f"file://{root}", other),
    )


def test_custody_one_operation_per_table(tmp_path) -> None:
    clock = ManualClock()
    first = custody(tmp_path, "a" * 32, clock)
    first.acquire()
    with pytest.raises(DponeError) as held:
        custody(tmp_path, "b" * 32, clock).acquire()
    assert held.value.code == "mssql_native.custody_held"
    again = custody(tmp_path, "a" * 32, clock)
    again.acquire()
    assert again.fenced_holder == "a" * 32, "a later try of the same operation takes over its own lease"
    clock.advance(LEASE * 2)
    second = custody(tmp_path, "b" * 32, clock)
    second.acquire()
    assert second.fenced_holder == "a" * 32
    second.release()
    third = custody(tmp_path, "c" * 32, clock)
    third.acquire()
    assert third.fenced_holder is None
    leases = [r.body for r in RouteJournal(ObjectJournalStore(f"file://{tmp_path}/targets", "t" * 32)).load()]
    assert [lease.holder for lease in leases if isinstance(lease, LeaseRecord)] == ["a" * 32] * 2 + ["b" * 32] * 2 + [
        "c" * 32
    ]
