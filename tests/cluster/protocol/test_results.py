"""What each entry point returns, in both modes: the phase before and after the call and each member's progress,
taken from the records the entry point read and wrote, so a task reports them without reading a port; every member
named by its id and its position in the bound inventory (the id is the position's digest: checked here by
recomputing it)."""

from __future__ import annotations

import pytest

from airflow_provider_dpone.cluster.protocol.mode import MODES
from airflow_provider_dpone.cluster.protocol.results import Committed, Completed, InProgress
from airflow_provider_dpone.cluster.values.identities import member_id
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.support.cluster.sim import CREATE_WINDOW_MS, Sim

pytestmark = pytest.mark.protocol


def _waited(sim: Sim, task: str) -> Committed | Completed:
    """Dispatch ``task`` with one member's DDL worker paused: in progress, then settled once the member resumes."""
    dispatching = ("PUBLICATION" if task == "publish" else "CLEANUP") + "_DISPATCHING"
    before = sim.record().phase.value
    paused = sim.world.members[1]
    paused.paused = True
    waiting = sim.service().publish() if task == "publish" else sim.service().cleanup()
    assert isinstance(waiting, InProgress)
    assert (waiting.phase_before, waiting.phase, waiting.member_count) == (before, dispatching, 3)
    assert waiting.pending_members == (paused.member_id,)
    assert {member_id(*position) for position in waiting.positions.values()} == set(waiting.positions)
    assert set(waiting.positions) == set(sim.record().member_ids()) and len(waiting.positions) == 3
    shard, replica = waiting.positions[paused.member_id]
    assert waiting.pending_labels == (f"{paused.member_id} (shard {shard}, replica {replica})",)
    polled = sim.service().reconcile_publication() if task == "publish" else sim.service().reconcile_cleanup()
    assert isinstance(polled, InProgress) and (polled.phase_before, polled.phase) == (dispatching, dispatching)
    sim.world.resume(paused)
    done = sim.service().reconcile_publication() if task == "publish" else sim.service().reconcile_cleanup()
    assert isinstance(done, Committed | Completed) and done.phase_before == dispatching
    for verified in done.receipt.members:
        assert verified.shard_num is not None and verified.replica_num is not None
        assert member_id(verified.shard_num, verified.replica_num) == verified.member_id
    return done


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_results_carry_the_phases_before_and_after_and_each_members_progress(mode: ReplicationMode) -> None:
    sim = Sim.build(members=3, mode=mode)
    fence = sim.service().fence()
    assert (fence.phase_before, fence.phase) == ("absent", "LOCKED")
    again = sim.service().fence()
    assert (again.phase_before, again.phase) == ("LOCKED", "LOCKED")

    stage = sim.service().stage(sim.source)
    record = sim.record()
    assert (stage.phase_before, stage.phase) == ("LOCKED", "STAGED")
    assert stage.schema == record.schema_ and stage.artifact == record.artifact
    assert stage.members == MODES[mode].progress(
        record, {m.member_id: (m.shard_num, m.replica_num) for m in stage.members}
    )
    assert len(stage.members) == 3
    for progress in stage.members:
        assert progress.shard_num is not None and progress.replica_num is not None
        assert member_id(progress.shard_num, progress.replica_num) == progress.member_id
        assert progress.label == f"{progress.member_id} (shard {progress.shard_num}, replica {progress.replica_num})"
    assert {member.row_count for member in stage.members} == {len(sim.rows)}
    assert (stage.load_member_id is None) == (mode == "external")
    assert stage.load_member_id is None or stage.load_member_id in record.member_ids()
    resumed = sim.service().stage(sim.source)
    assert (resumed.phase_before, resumed.phase, resumed.members) == ("STAGED", "STAGED", stage.members)

    committed = _waited(sim, "publish")
    assert committed.phase == "COMMITTED" == sim.record().phase.value
    again_published = sim.service().publish()
    assert (again_published.phase_before, again_published.phase) == ("COMMITTED", "COMMITTED")

    completed = _waited(sim, "cleanup")
    assert completed.phase == "COMPLETED" == sim.record().phase.value
    after_cleanup = sim.service().publish()
    assert (after_cleanup.phase_before, after_cleanup.phase) == ("COMPLETED", "COMPLETED")


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_an_abort_reports_the_phase_it_left(mode: ReplicationMode) -> None:
    sim = Sim.build(members=3, mode=mode)
    sim.service().fence()
    sim.service().stage(sim.source)
    sim.world.clock.advance(CREATE_WINDOW_MS)  # no candidate CREATE of a stage try can still arrive
    aborted = sim.service().abort()
    assert (aborted.phase_before, aborted.phase) == ("STAGED", "ABORTED")
    again = sim.service().abort()
    assert (again.phase_before, again.phase) == ("ABORTED", "ABORTED")
