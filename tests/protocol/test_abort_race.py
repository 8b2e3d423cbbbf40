"""An operator abort racing a publish try of the same operation, every interleaving, both modes, and every fault on
the abort's own writes.

Both calls start from STAGED. One worker's whole call runs at each fault point of the other's (before that point's
request leaves), so every order of their authority writes and member drops is reached. Afterwards the operator and
Airflow keep going (abort again; the DAG's retries), and exactly one of two outcomes must hold:

* the abort won: ABORTED, no candidate left on any member, every target exactly as it was before the operation, and
  publish refuses without touching anything;
* the publication won: the abort is refused (``ABORT_AFTER_PUBLICATION``) and the DAG completes with every member
  equal to the artifact.

Never a publication against dropped candidates, never an operation that neither can finish.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest

from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.fakes.faults import SINGLE_FAULT_KINDS, FaultKind, SimulatedCrash
from tests.protocol.sim import BASELINE_ROWS, Sim

AFTER_PUBLICATION = "DPONE_CLICKHOUSE_CLUSTER_ABORT_AFTER_PUBLICATION"
ABORTED = "DPONE_CLICKHOUSE_CLUSTER_OPERATION_ABORTED"
CONFIGS = [
    pytest.param(mode, existing, id=f"{mode}-{'existing' if existing else 'absent'}-target")
    for mode in ("external", "internal")
    for existing in (True, False)
]


def staged(mode: ReplicationMode, existing: bool) -> Sim:
    sim = Sim.build(members=2, baseline=BASELINE_ROWS if existing else None, mode=mode)
    sim.service().fence()
    sim.service().stage(sim.source)
    assert sim.record().phase is Phase.STAGED
    return sim


def attempt(call: Callable[[], object]) -> None:
    """One worker's call; a coded refusal or a process death ends it, as it ends a task try."""
    with contextlib.suppress(DponeError, SimulatedCrash):
        call()


def publish_try(sim: Sim) -> Callable[[], None]:
    def run() -> None:
        sim.check_success(sim.service().publish())

    return lambda: attempt(run)


def abort_try(sim: Sim) -> Callable[[], None]:
    return lambda: attempt(lambda: sim.service().abort())


def points_of(mode: ReplicationMode, existing: bool, call: Callable[[Sim], Callable[[], None]]) -> range:
    """The fault points ``call`` reaches from STAGED in a run on its own."""
    clean = staged(mode, existing)
    start = clean.world.faults.counter
    call(clean)()
    return range(start, clean.world.faults.counter)


def settle(sim: Sim) -> str:
    """The operator aborts again and the DAG runs again; exactly one of them resolves the operation."""
    sim.world.faults.disable()
    sim.check_invariants()
    try:
        phase = sim.service().abort().phase
    except DponeError as refusal:
        phase = refusal.code
    if phase == AFTER_PUBLICATION:
        assert sim.run_dag() == "completed", sim.errors
        sim.check_converged()
        return "published"
    assert phase == "ABORTED", (phase, sim.errors)
    effects = len(sim.world.effects)
    assert sim.run_dag() == f"stopped at fence: {ABORTED}"
    assert len(sim.world.effects) == effects  # a refused publish touches nothing
    for member in sim.world.members:
        assert sim.world.table(member, sim.request.candidate_name) is None, f"candidate left on {member.member_id}"
        before = sim.initial.get((member.member_id, sim.request.target))
        target = sim.world.table(member, sim.request.target)
        assert (None if target is None else (target.uuid, tuple(target.rows))) == before, "target changed"
    assert sim.successes == 0
    return "aborted"


@pytest.mark.parametrize(("mode", "existing"), CONFIGS)
def test_a_publish_try_at_any_point_of_an_abort_either_loses_or_wins_cleanly(
    mode: ReplicationMode, existing: bool
) -> None:
    outcomes = []
    for point in points_of(mode, existing, abort_try):
        sim = staged(mode, existing)
        sim.world.faults.interleave(point, publish_try(sim))
        abort_try(sim)()
        outcomes.append(settle(sim))
    assert set(outcomes) == {"aborted", "published"}  # the first point lets publish win, later ones are fenced


@pytest.mark.parametrize(("mode", "existing"), CONFIGS)
def test_an_abort_at_any_point_of_a_publish_try_either_wins_before_its_permit_or_is_refused(
    mode: ReplicationMode, existing: bool
) -> None:
    """At each point of the publish try an abort runs, whole or stopped by a fault at any of its own points (a
    worker that died, or lost an acknowledgement, half way): in particular one that read STAGED and dropped while
    the publish try, which had already observed its candidates, was about to take its permit."""
    abort_points = len(points_of(mode, existing, abort_try))
    faults = [None, *((offset, kind) for offset in range(abort_points) for kind in SINGLE_FAULT_KINDS)]
    outcomes = []
    for point in points_of(mode, existing, publish_try):
        for fault in faults:
            sim = staged(mode, existing)
            if fault is not None:
                sim.world.faults.schedule([(point + 1 + fault[0], fault[1])])  # the abort's points follow ``point``
            sim.world.faults.interleave(point, abort_try(sim))
            publish_try(sim)()
            outcomes.append((point, fault, settle(sim)))
    assert outcomes[0][2] == "aborted" and outcomes[-1][2] == "published"


@pytest.mark.parametrize(("mode", "existing"), CONFIGS)
def test_every_fault_of_an_abort_then_a_racing_publish_try_still_resolves(
    mode: ReplicationMode, existing: bool
) -> None:
    """Crash before / after and lost response at each of the abort's points (its fence write, each drop, its final
    write), then a publish try, then the operator's next abort."""
    for point in points_of(mode, existing, abort_try):
        for kind in SINGLE_FAULT_KINDS:
            sim = staged(mode, existing)
            sim.world.faults.schedule([(point, kind)])
            abort_try(sim)()
            assert (point, kind) in [(index, fired) for index, _, fired in sim.world.faults.fired]
            publish_try(sim)()
            settle(sim)


def test_the_fence_write_comes_before_any_drop_and_is_the_abort_s_first_mutation() -> None:
    sim = staged("external", True)
    start = sim.world.faults.counter
    sim.service().abort()
    trace = sim.world.faults.trace[start:]
    assert trace[0] == "authority.cas" and trace[-1] == "authority.cas"
    assert trace.count("member.drop") == 2 and trace.count("authority.cas") == 2


def test_a_fenced_operation_refuses_publish_until_the_abort_finishes() -> None:
    sim = staged("external", True)
    sim.world.faults.schedule([(sim.world.faults.counter + 1, FaultKind.CRASH_BEFORE)])  # the first drop
    abort_try(sim)()
    assert sim.record().phase is Phase.ABORTING
    effects = len(sim.world.effects)
    with pytest.raises(DponeError) as refused:
        sim.service().publish()
    assert refused.value.code == "DPONE_CLICKHOUSE_CLUSTER_ABORT_INCOMPLETE"
    assert len(sim.world.effects) == effects
    assert settle(sim) == "aborted"
