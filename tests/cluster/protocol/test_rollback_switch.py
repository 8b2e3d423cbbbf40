"""The rollback switch of external replication (seed 000, "Rollback and rollout").

"Rollback disables external admission; it does not delete unresolved authority, candidates, or predecessors.
Internal mode remains available for compatible topologies." With ``ProtocolSettings.external_admission`` false
(``[dpone] external_replication_admission = False``), a new external operation is refused at its fence before
anything is written; an operation fenced before the switch keeps everything it holds and still finishes, aborts and
cleans up; internal mode is not affected.
"""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_dpone.cluster.values.authority.phases import Phase
from tests.support.cluster.sim import CREATE_WINDOW_MS, NEW_ROWS, Sim, error_code

pytestmark = pytest.mark.protocol

DISABLED = "DPONE_CLICKHOUSE_CLUSTER_EXTERNAL_ADMISSION_DISABLED"


def rolled_back(sim: Sim) -> Sim:
    sim.settings = dataclasses.replace(sim.settings, external_admission=False)
    return sim


def test_a_new_external_operation_is_refused_before_anything_is_written() -> None:
    sim = rolled_back(Sim.build(mode="external"))
    for _ in range(2):  # terminal: a retry is refused the same way
        assert error_code(lambda: sim.service().fence()) == DISABLED
    assert sim.world.keeper == {}
    assert sim.world.calls["member.create"] == 0 and sim.world.calls["ddl.dispatch"] == 0
    sim.check_invariants()


def test_a_new_external_operation_after_a_completed_one_is_refused_and_the_published_target_stays() -> None:
    first = Sim.build(mode="external")
    assert first.run_dag() == "completed"
    before = first.world.keeper[first.request.target_key]
    second = rolled_back(Sim.successor(first, run_id="scheduled__2026-09-19", rows=NEW_ROWS[:1]))
    assert error_code(lambda: second.service().fence()) == DISABLED
    assert second.world.keeper[second.request.target_key] == before  # the authority is untouched
    for member in second.world.members:
        target = second.world.table(member, second.request.target)
        assert target is not None and sorted(target.rows) == sorted(first.rows)


@pytest.mark.parametrize("stop_after", ["fence", "stage"])
def test_an_operation_fenced_before_the_rollback_keeps_its_state_and_still_completes(stop_after: str) -> None:
    sim = Sim.build(mode="external")
    sim.service().fence()
    if stop_after == "stage":
        sim.service().stage(sim.source)
    held = sim.record()
    rolled_back(sim)
    assert sim.record() == held  # switching admission off deleted nothing
    assert sim.run_dag() == "completed"  # the same operation resumes: fence, stage, publish and cleanup
    sim.check_converged()


def test_an_operation_fenced_before_the_rollback_can_still_be_aborted() -> None:
    sim = Sim.build(mode="external")
    sim.service().fence()
    sim.service().stage(sim.source)
    rolled_back(sim)
    sim.world.clock.advance(CREATE_WINDOW_MS)  # no candidate CREATE of a stage try can still arrive
    sim.service().abort()
    assert sim.record().phase is Phase.ABORTED
    for member in sim.world.members:
        assert sim.world.table(member, sim.request.candidate_name) is None
    sim.check_invariants()


def test_internal_mode_remains_available() -> None:
    sim = rolled_back(Sim.build(mode="internal"))
    assert sim.run_dag() == "completed"
    sim.check_converged()


def test_with_admission_on_the_same_operation_is_fenced() -> None:
    """The control: the refusal above is the switch's, not the world's."""
    sim = Sim.build(mode="external")
    assert sim.settings.external_admission
    assert sim.run_dag() == "completed"
