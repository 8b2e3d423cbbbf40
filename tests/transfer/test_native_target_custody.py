"""Target-table custody: one operation per target table; a later try of the same operation takes over its own lease,
and another operation waits until the lease expired or was released."""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.route.journal import RouteJournal
from airflow_provider_dpone.transfer.route.target_custody import TargetCustody
from airflow_provider_dpone.transfer.storage import ObjectJournalStore
from airflow_provider_dpone.transfer.values.journal_records import LeaseRecord
from tests.support.fakes.transfer_source import ManualClock

pytestmark = pytest.mark.integration

LEASE = dt.timedelta(minutes=10)


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
    assert held.value.code == "native_transfer.custody_held"
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
