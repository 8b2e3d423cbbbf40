"""The durable reader fence of seed 002 on the fake world: a validation of a COMPLETED operation's capsule keeps
managed successors out, and every crash or lost response around its two authority writes fails closed.

Each test replays the cleanup task of a completed durable run (a validation, never a rescan) and asserts the record
read back from the authority and whether a successor run can fence the target.
"""

from __future__ import annotations

import pytest

from airflow_provider_dpone.cluster.ports import ReplicaStatus
from airflow_provider_dpone.cluster.protocol.quality_fence import READER_LEASE_MS
from airflow_provider_dpone.cluster.protocol.results import Completed
from airflow_provider_dpone.cluster.values.authority.internal import InternalAuthorityRecordV2
from airflow_provider_dpone.core.manifest.cluster import QualityPolicy
from tests.support.cluster.sim import NEW_ROWS, Sim, error_code
from tests.support.fakes.faults import FaultKind, SimulatedCrash
from tests.support.fakes.ports import FakeMemberSession

pytestmark = pytest.mark.protocol

FENCED = "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED"
INCOMPLETE = "DPONE_REPLAY_QUALITY_EVIDENCE_INCOMPLETE"


def completed() -> Sim:
    sim = Sim.build(members=2, mode="internal")
    sim.request = sim.request.model_copy(update={"quality": QualityPolicy(min_rows=1)})
    assert sim.run_dag() == "completed"
    return sim


def record(sim: Sim) -> InternalAuthorityRecordV2:
    current = sim.record()
    assert isinstance(current, InternalAuthorityRecordV2)
    return current


def version(sim: Sim) -> int:
    return sim.world.keeper[sim.request.target_key][1]


def successor(sim: Sim) -> Sim:
    later = Sim.successor(sim, run_id="scheduled__2026-09-19", rows=(*NEW_ROWS, (13, "new-13")))
    later.request = later.request.model_copy(update={"quality": QualityPolicy(min_rows=1)})
    return later


def test_a_validation_holds_the_fence_while_it_reads_and_releases_it(monkeypatch: pytest.MonkeyPatch) -> None:
    sim = completed()
    later = successor(sim)
    seen: list[str] = []
    original = FakeMemberSession.replica_status

    def status(self: FakeMemberSession, database: str, table: str) -> ReplicaStatus | None:
        if not seen:  # a successor tries to fence the target while the guard reads
            seen.append(error_code(lambda: later.service().fence()))
            seen.append("fenced" if record(sim).reader is not None else "open")
        return original(self, database, table)

    monkeypatch.setattr(FakeMemberSession, "replica_status", status)
    before = version(sim)
    assert isinstance(sim.service().cleanup(), Completed)
    assert seen == [FENCED, "fenced"]
    assert record(sim).reader is None and version(sim) == before + 2  # acquired, then released
    monkeypatch.undo()
    assert later.run_dag() == "completed"  # released: the successor takes the target


def test_a_crash_after_the_fence_keeps_successors_out_until_it_expires() -> None:
    sim = completed()
    sim.world.faults.at_next("authority.cas", FaultKind.CRASH_AFTER)
    with pytest.raises(SimulatedCrash):
        sim.service().cleanup()
    fence = record(sim).reader
    assert fence is not None and fence.expires_at_ms == sim.world.clock.ms + READER_LEASE_MS
    later = successor(sim)
    assert error_code(lambda: later.service().fence()) == FENCED
    sim.world.clock.advance(READER_LEASE_MS)
    assert later.run_dag() == "completed"


def test_the_next_validation_takes_an_orphaned_fence_over_and_releases_it() -> None:
    sim = completed()
    sim.world.faults.at_next("authority.cas", FaultKind.LOSE_RESPONSE)  # the acquiring write took effect
    assert error_code(lambda: sim.service().cleanup()) == INCOMPLETE  # store access failed
    assert record(sim).reader is not None
    assert isinstance(sim.service().cleanup(), Completed)
    assert record(sim).reader is None
    assert successor(sim).run_dag() == "completed"


@pytest.mark.parametrize("kind", [FaultKind.LOSE_RESPONSE, FaultKind.CRASH_BEFORE])
def test_a_validation_whose_release_is_not_verified_is_never_success(kind: FaultKind) -> None:
    sim = completed()
    sim.world.faults.at_next("authority.cas", kind, nth=2)  # the releasing write
    if kind is FaultKind.CRASH_BEFORE:
        with pytest.raises(SimulatedCrash):
            sim.service().cleanup()
        assert record(sim).reader is not None  # stays until expiry or the next validation
    else:
        assert error_code(lambda: sim.service().cleanup()) == INCOMPLETE
        assert record(sim).reader is None  # the release took effect; only its answer was lost
    assert isinstance(sim.service().cleanup(), Completed) and record(sim).reader is None


def test_a_fence_taken_over_during_a_validation_makes_it_incomplete(monkeypatch: pytest.MonkeyPatch) -> None:
    sim = completed()
    original = FakeMemberSession.replica_status
    nested: list[object] = []

    def status(self: FakeMemberSession, database: str, table: str) -> ReplicaStatus | None:
        if not nested:
            nested.append(None)
            nested.append(sim.service().cleanup())  # another validation of this operation, start to end
        return original(self, database, table)

    monkeypatch.setattr(FakeMemberSession, "replica_status", status)
    assert error_code(lambda: sim.service().cleanup()) == INCOMPLETE
    assert isinstance(nested[1], Completed) and record(sim).reader is None
