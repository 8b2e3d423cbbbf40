"""Permits that ride on a CAS the protocol writes anyway, and the fault matrix of each folded transition.

Internal mode writes the candidate's CREATE permit in the STAGING CAS when the candidate name was observed free on
every replica just before it, and a rebuild's new CREATE permit in the CAS that completes its DROP. Each folded CAS
is checked against process death just before it, just after it, and a lost response: before, nothing is intended
and the same stage converges on retry; after (or unknown), the permit is bound and its dispatch was never recorded,
so it was never sent: the retry replaces it by a new permit and converges with one CREATE, exactly like a permit in
a CAS of its own (``tests/cluster/protocol/test_dispatch_record.py``), no restart and no void. Assertions are on the
authority record and the world's physical state (queue, tables).
"""

from __future__ import annotations

import contextlib

import pytest

from airflow_provider_dpone.cluster.values.authority.internal import InternalAuthorityRecordV1, ReplicatedCandidate
from airflow_provider_dpone.cluster.values.authority.phases import MemberStage, Phase
from airflow_provider_dpone.core.errors import DponeError
from tests.support.cluster.sim import COLUMNS, Sim, candidate_calls, error_code, point_of
from tests.support.fakes.faults import SINGLE_FAULT_KINDS, FaultKind, SimulatedCrash

pytestmark = pytest.mark.protocol

PENDING = "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING"
FOREIGN = "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_FOREIGN"


def candidate_of(sim: Sim) -> ReplicatedCandidate:
    record = sim.record()
    assert isinstance(record, InternalAuthorityRecordV1) and record.candidate is not None
    return record.candidate


def creates(sim: Sim) -> int:
    return sum(entry.intent.kind == "create" for entry in sim.world.queue)


def test_the_staging_cas_carries_the_create_permit() -> None:
    sim = Sim.build(mode="internal")
    sim.service().fence()
    sim.world.stall_coordinator()  # the CREATE is sent but never queued: what the stage wrote stays visible
    assert error_code(lambda: sim.service().stage(sim.source)) == PENDING
    record = sim.record()
    candidate = candidate_of(sim)
    assert record.phase is Phase.STAGING and record.artifact is not None and candidate.stage is MemberStage.INTENDED
    assert candidate.create is not None and candidate.create.epoch == record.dispatch_epoch == 1
    assert candidate.create.dispatching_at_ms is not None  # the one more write: the dispatch recorded, then sent
    assert sim.world.calls["authority.cas"] == 2 and sim.world.calls["ddl.dispatch"] == 1


@pytest.mark.parametrize("kind", SINGLE_FAULT_KINDS)
def test_every_fault_at_the_staging_cas_with_its_create_permit(kind: FaultKind) -> None:
    sim = Sim.build(mode="internal")
    staging = point_of(sim, "authority.cas")  # the first CAS: the fence is a strict insert
    sim.world.faults.schedule([(staging, kind)])
    sim.service().fence()
    with contextlib.suppress(SimulatedCrash, DponeError):
        sim.service().stage(sim.source)
    assert sim.world.faults.fired == [(staging, "authority.cas", kind)]
    sim.world.faults.disable()
    assert sim.world.calls["ddl.dispatch"] == 0 and not sim.world.queue  # no CREATE left the process
    sim.check_invariants()
    if kind is FaultKind.CRASH_BEFORE:
        assert sim.record().phase is Phase.LOCKED  # nothing intended: the retry starts the same stage again
        assert sim.run_dag() == "completed" and creates(sim) == 1
        sim.check_converged()
        return
    record = sim.record()
    permit = candidate_of(sim).create
    assert record.phase is Phase.STAGING and permit is not None and permit.unsent  # a permit, never dispatched
    assert sim.run_dag() == "completed" and creates(sim) == 1  # replaced by a new permit, no restart
    assert sim.record().artifact == record.artifact  # the artifact was bound only once
    assert sim.record().voided == () and not sim.errors
    sim.check_converged()


def test_an_occupied_candidate_name_takes_no_permit_and_stops_before_any_ddl() -> None:
    sim = Sim.build(mode="internal")
    for member in sim.world.members[1:]:
        sim.world.put_table(member, sim.request.candidate_name, COLUMNS, ())
    sim.snapshot()
    sim.service().fence()
    assert error_code(lambda: sim.service().stage(sim.source)) == FOREIGN
    record = sim.record()
    assert record.phase is Phase.STAGING and record.artifact is not None
    assert candidate_of(sim).create is None and record.dispatch_epoch == 0 and not sim.world.queue
    sim.check_invariants()


def test_an_occupied_candidate_name_seen_before_the_external_staging_cas_stops_and_is_left_alone() -> None:
    """External staging starts from the candidate names observed before its STAGING CAS: a foreign table there
    stops the stage (recorded), is never created over or dropped, and the other member's own candidate is kept."""
    sim = Sim.build()
    occupied = sim.world.members[0]
    sim.world.put_table(occupied, sim.request.candidate_name, COLUMNS, ())
    sim.snapshot()
    sim.service().fence()
    assert error_code(lambda: sim.service().stage(sim.source)) == FOREIGN
    record = sim.record()
    assert record.phase is Phase.STAGING and record.last_error is not None and record.last_error.code == FOREIGN
    assert candidate_calls(sim, "member.create") == 1 and candidate_calls(sim, "member.drop") == 0
    sim.check_invariants()  # the foreign table is untouched


def rebuilding() -> tuple[Sim, int]:
    """An internal run whose one load is interrupted (a rebuild follows), and the point of the CAS that completes
    the rebuild's DROP with the new CREATE's permit (the CAS before the second create's dispatch record)."""
    sim = Sim.build(mode="internal")
    prefix = [(point_of(sim, "member.load"), FaultKind.PARTIAL)]
    clean = Sim.build(mode="internal")
    clean.world.faults.schedule(prefix)
    assert clean.run_dag() == "completed"
    trace = clean.world.faults.trace
    dispatches = [point for point, name in enumerate(trace) if name == "ddl.dispatch"]
    second_create = dispatches[2]  # create, rebuild drop, create again
    assert [entry.intent.kind for entry in clean.world.queue][:3] == ["create", "drop", "create"]
    assert trace[second_create - 2 : second_create] == ["authority.cas", "authority.cas"]
    sim.world.faults.schedule(prefix)
    return sim, second_create - 2


@pytest.mark.parametrize("kind", SINGLE_FAULT_KINDS)
def test_every_fault_at_the_rebuild_cas_with_the_new_create_permit(kind: FaultKind) -> None:
    sim, point = rebuilding()
    sim.world.faults.schedule([*sim.world.faults.plan.items(), (point, kind)])
    outcome = sim.run_dag(tries=1)
    assert (point, "authority.cas", kind) in sim.world.faults.fired and outcome.startswith("stopped at stage")
    sim.world.faults.disable()
    sim.check_invariants()
    if kind is FaultKind.CRASH_BEFORE:  # the DROP is still the bound step: reconciled again, then the new permit
        assert candidate_of(sim).drop is not None
        assert sim.run_dag() == "completed" and creates(sim) == 2
        sim.check_converged()
        return
    candidate = candidate_of(sim)
    assert candidate.stage is MemberStage.INTENDED and candidate.rebuilds == 1 and candidate.create is not None
    assert candidate.create.unsent and creates(sim) == 1  # the new CREATE never left the process
    assert sim.run_dag() == "completed" and creates(sim) == 2  # its permit replaced, no restart
    assert sim.record().voided == ()
    sim.check_converged()
