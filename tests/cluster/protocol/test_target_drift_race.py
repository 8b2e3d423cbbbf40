"""A writer that bypasses the provider inserts into the live target of one member, at every point of a full refresh,
both modes; alone, and together with every single fault at that same point.

The write runs at each fault point of the clean run's trace (before that point's request leaves), into whatever
table holds the target name on that member then: the old target before its EXCHANGE ran there, the published one
after. Afterwards Airflow keeps going (the DAG's retries, then one more run with faults off), and the write must
never be lost: it is still in a table of that member, under the target name or (the predecessor, retained) under
the candidate name. The run completes only when the write landed in the published table; otherwise it stops with a
code that says why: the target differed between members at the baseline (``TARGET_DIVERGENT``), the live target
changed in place since its baseline (``TARGET_DRIFT``, at the barrier or after the DDL), the published table was
written before COMMITTED (``PUBLISHED_CONTENT_DIVERGENT``), or a permit that was never sent (``DISPATCH_UNPROVEN``, a
fault's own outcome). Never a success reported while the write is in the predecessor.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from airflow_provider_dpone.cluster.protocol.results import InProgress
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.support.cluster.sim import BASELINE_ROWS, UNPROVEN, Sim
from tests.support.fakes import parts
from tests.support.fakes.faults import SINGLE_FAULT_KINDS, FaultKind, SimulatedCrash

pytestmark = pytest.mark.protocol

WRITTEN = (4242, "written-into-the-live-target")
DRIFT = "DPONE_CLICKHOUSE_CLUSTER_TARGET_DRIFT"
STOPS = {
    "stopped at stage: DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT",
    f"stopped at publish: {DRIFT}",
    "stopped at publish: DPONE_CLICKHOUSE_CLUSTER_PUBLISHED_CONTENT_DIVERGENT",
    f"stopped at stage: {UNPROVEN}",
    f"stopped at publish: {UNPROVEN}",
}


def _build(mode: ReplicationMode, members: int) -> Sim:
    return Sim.build(members=members, baseline=BASELINE_ROWS, mode=mode)


def _write(sim: Sim, wrote: list[bool]) -> Callable[[], None]:
    """The bypassing writer's one INSERT into the last member's live target while it is still the old one (a write
    into the published table is the next generation's, or ``PUBLISHED_CONTENT_DIVERGENT``'s, business)."""
    member = sim.world.members[-1]
    old_uuid, _ = sim.initial[(member.member_id, sim.request.target)]

    def run() -> None:
        target = sim.world.table(member, sim.request.target)
        assert target is not None  # an existing baseline: the name is never free (EXCHANGE swaps two tables)
        if target.uuid == old_uuid:
            parts.append(target, [WRITTEN])
            wrote.append(True)

    return run


def _run(sim: Sim, point: int) -> tuple[str, bool]:
    """The DAG with the write at ``point``: its outcome, and whether the write happened."""
    wrote: list[bool] = []
    sim.world.faults.interleave(point, _write(sim, wrote))
    outcome = sim.run_dag()
    return outcome, bool(wrote)


def _kept(sim: Sim) -> bool:
    member = sim.world.members[-1]
    names = (sim.request.target, sim.request.candidate_name)
    return any(
        table is not None and WRITTEN in table.rows for table in (sim.world.table(member, name) for name in names)
    )


def _check(sim: Sim, outcome: str, wrote: bool) -> None:
    if not wrote:  # the EXCHANGE had already run there: no drift to see (a fault's own permit may stay unproven)
        assert outcome == "completed" or outcome.endswith(UNPROVEN), outcome
        return
    assert _kept(sim), f"the write was dropped ({outcome})"
    if outcome == "completed":
        target = sim.world.table(sim.world.members[-1], sim.request.target)
        assert target is not None and WRITTEN in target.rows  # the write landed in the published table
        return
    assert outcome in STOPS, outcome
    assert sim.successes == 0 or sim.record().phase is Phase.CLEANUP_DISPATCHING
    if outcome.endswith(DRIFT):
        record = sim.record()
        assert record.phase in (Phase.STAGED, Phase.PUBLICATION_DISPATCHING), record.phase
        assert sim.successes == 0


def _trace(mode: ReplicationMode, members: int) -> list[str]:
    clean = _build(mode, members)
    assert clean.run_dag() == "completed"
    return clean.world.faults.trace


@pytest.mark.parametrize("members", [2, 3])
@pytest.mark.parametrize("mode", ["external", "internal"])
def test_a_write_into_the_live_target_at_any_point_is_never_dropped(mode: ReplicationMode, members: int) -> None:
    trace = _trace(mode, members)
    outcomes = set()
    for point in range(len(trace)):
        sim = _build(mode, members)
        outcome, wrote = _run(sim, point)
        _check(sim, outcome, wrote)
        outcomes.add(outcome.split(":")[-1].strip())
    # every verdict is reached: before the baseline, between it and the swap (at the barrier or after the DDL),
    # and after the swap
    assert {"completed", "DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT", DRIFT} <= outcomes, outcomes


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_a_write_into_the_live_target_with_a_fault_at_the_same_point_is_never_dropped(mode: ReplicationMode) -> None:
    trace = _trace(mode, 2)
    for point in range(len(trace)):
        for kind in SINGLE_FAULT_KINDS:
            sim = _build(mode, 2)
            sim.world.faults.schedule([(point, kind)])
            outcome, wrote = _run(sim, point)
            assert (point, trace[point], kind) in sim.world.faults.fired, (point, kind)
            if outcome != "completed":
                sim.world.faults.disable()
                outcome = sim.run_dag()
            _check(sim, outcome, wrote)


def test_the_post_ddl_drift_is_reached_between_the_barrier_and_the_exchange() -> None:
    """The enumeration above reaches the window the barrier cannot see: a write after the barrier's reads, before
    the EXCHANGE runs on that member, is found after the DDL and the operation is never COMMITTED."""
    trace = _trace("external", 2)
    reached = []
    for point, name in enumerate(trace):
        if name != "ddl.dispatch":
            continue
        sim = _build("external", 2)
        outcome, wrote = _run(sim, point)
        _check(sim, outcome, wrote)
        reached.append((outcome, sim.record().phase))
    assert (f"stopped at publish: {DRIFT}", Phase.PUBLICATION_DISPATCHING) in reached, reached


@pytest.mark.parametrize("kind", SINGLE_FAULT_KINDS)
@pytest.mark.parametrize("mode", ["external", "internal"])
def test_the_post_ddl_drift_record_dying_or_losing_its_response_still_never_commits(
    mode: ReplicationMode, kind: FaultKind
) -> None:
    """The last member's EXCHANGE is held back, its live target written, then the EXCHANGE runs there. The
    reconciliation that finds the drifted predecessor records it with one CAS: the process dies just before it,
    just after it, or loses its answer. Every later try finds the predecessor drifted again: the operation stops
    with ``TARGET_DRIFT`` recorded, never COMMITTED, and the predecessor keeps the write under the candidate name."""
    sim = _build(mode, 3)
    sim.service().fence()
    sim.service().stage(sim.source)
    paused = sim.world.members[-1]
    paused.paused = True
    assert isinstance(sim.service().publish(), InProgress)
    wrote: list[bool] = []
    _write(sim, wrote)()
    assert wrote
    sim.world.resume(paused)
    sim.world.faults.at_next("authority.cas", kind)
    with pytest.raises((SimulatedCrash, DponeError)):
        sim.service().reconcile_publication()
    assert sim.world.faults.fired and sim.record().phase is Phase.PUBLICATION_DISPATCHING
    sim.world.faults.disable()
    outcome = sim.run_dag()
    assert outcome == f"stopped at publish: {DRIFT}"
    record = sim.record()
    assert record.phase is Phase.PUBLICATION_DISPATCHING and sim.successes == 0
    assert record.last_error is not None and record.last_error.code == DRIFT
    predecessor = sim.world.table(paused, sim.request.candidate_name)
    assert predecessor is not None and WRITTEN in predecessor.rows
