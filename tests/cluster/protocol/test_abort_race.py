"""An operator abort racing a publish try or a stage try of the same operation, every interleaving, both modes, and
every fault on the abort's own writes and on the racing try's.

Against publish, both calls start from STAGED; against stage, from LOCKED (the stage try writes STAGING, creates and
loads) or from STAGING with every candidate intended and none created. One worker's whole call runs at each fault
point of the other's (before that point's request leaves), so every order of their authority writes and member
mutations is reached; the interrupted request then leaves cleanly, or its worker dies before or after it, or loses
its answer. Afterwards the operator and Airflow keep going (abort again, later; the DAG's retries), and exactly one
of two outcomes must hold:

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
from tests.support.cluster.sim import BASELINE_ROWS, CREATE_WINDOW_MS, RETRY_DELAY_MS, SETTINGS, UNPROVEN, Sim
from tests.support.fakes.faults import SINGLE_FAULT_KINDS, FaultKind, SimulatedCrash

pytestmark = pytest.mark.protocol

AFTER_PUBLICATION = "DPONE_CLICKHOUSE_CLUSTER_ABORT_AFTER_PUBLICATION"
ABORTED = "DPONE_CLICKHOUSE_CLUSTER_OPERATION_ABORTED"
CREATE_IN_FLIGHT = "DPONE_CLICKHOUSE_CLUSTER_ABORT_CREATE_IN_FLIGHT"
STAGING_PENDING = "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING"
OPERATOR_TRIES = 3
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
    sim.world.clock.advance(CREATE_WINDOW_MS)  # the run stopped after staging; the operator acts later
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


def locked(mode: ReplicationMode, existing: bool) -> Sim:
    sim = Sim.build(members=2, baseline=BASELINE_ROWS if existing else None, mode=mode)
    sim.service().fence()
    assert sim.record().phase is Phase.LOCKED
    return sim


def intended(mode: ReplicationMode, existing: bool) -> Sim:
    """STAGING, every candidate intended (internal: its create permitted, the dispatch not recorded) and none
    created: the stage try died right after its STAGING write."""
    sim = locked(mode, existing)
    sim.world.faults.at_next("authority.cas", FaultKind.CRASH_AFTER)  # the STAGING write
    stage_try(sim)()
    assert sim.record().phase is Phase.STAGING
    assert all(sim.world.table(m, sim.request.candidate_name) is None for m in sim.world.members)
    return sim


def stage_try(sim: Sim) -> Callable[[], None]:
    return lambda: attempt(lambda: sim.service().stage(sim.source))


Start = Callable[[ReplicationMode, bool], Sim]


def points_of(
    mode: ReplicationMode, existing: bool, call: Callable[[Sim], Callable[[], None]], start: Start | None = None
) -> range:
    """The fault points ``call`` reaches from ``start`` (default: STAGED) in a run on its own."""
    clean = (start or staged)(mode, existing)
    first = clean.world.faults.counter
    call(clean)()
    return range(first, clean.world.faults.counter)


def operator_abort(sim: Sim) -> str:
    """The operator's abort, repeated as Airflow retries it while it waits (a create that may still reach a member),
    a retry delay apart: the phase it ends in, or the code it is refused with."""
    for _ in range(OPERATOR_TRIES):
        try:
            return sim.service().abort().phase
        except DponeError as refusal:
            if refusal.code != CREATE_IN_FLIGHT:
                return refusal.code
        sim.world.clock.advance(RETRY_DELAY_MS)
    return CREATE_IN_FLIGHT


def sent_unproven(sim: Sim) -> bool:
    """Whether a worker died between recording a dispatch and sending it: the one case the record cannot tell from
    a request in flight (it may have been sent), so only the runbook's restart and void release it."""
    return any(name == "ddl.dispatch" and kind is FaultKind.CRASH_BEFORE for _, name, kind in sim.world.faults.fired)


def restart_and_void(sim: Sim) -> None:
    """The runbook's way on for a permit that may have been sent: restart the coordinator past every margin, void."""
    sim.world.clock.advance(SETTINGS.dispatch_deadline_ms + SETTINGS.send_timeout_ms + SETTINGS.void_skew_margin_ms + 1)
    sim.world.restart_coordinator()
    sim.service().void_permit()


def settle(sim: Sim) -> str:
    """The operator aborts again and the DAG runs again; exactly one of them resolves the operation. The restart
    and void are taken only where a dispatch was recorded and its worker died before sending it."""
    sim.world.faults.disable()
    sim.check_invariants()
    phase = operator_abort(sim)
    if phase == STAGING_PENDING:
        assert sent_unproven(sim), sim.world.faults.fired
        restart_and_void(sim)
        phase = operator_abort(sim)
    if phase == AFTER_PUBLICATION:
        outcome = sim.run_dag()
        if outcome == f"stopped at publish: {UNPROVEN}":
            assert sent_unproven(sim), sim.world.faults.fired
            restart_and_void(sim)
            outcome = sim.run_dag()
        assert outcome == "completed", sim.errors
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


RACER_FAULTS: tuple[FaultKind | None, ...] = (None, *SINGLE_FAULT_KINDS)
"""What becomes of the interrupted request after the racing call ran: it leaves cleanly, or its worker dies before
it leaves, dies after it took effect, or loses the answer."""


def left_candidates(sim: Sim) -> list[str]:
    return [m.member_id for m in sim.world.members if sim.world.table(m, sim.request.candidate_name) is not None]


Call = Callable[[Sim], Callable[[], None]]


def race(mode: ReplicationMode, existing: bool, start: Start, first: Call, racer: Call) -> set[str]:
    """At each point of ``first`` from ``start`` the whole ``racer`` runs, and ``first``'s request at that point then
    meets each of ``RACER_FAULTS``. Right after, an ABORTED record never coexists with a candidate; then it settles."""
    outcomes = set()
    for point in points_of(mode, existing, first, start):
        for kind in RACER_FAULTS:
            sim = start(mode, existing)
            if kind is not None:
                sim.world.faults.schedule([(point, kind)])
            sim.world.faults.interleave(point, racer(sim))
            first(sim)()
            assert not left_candidates(sim) or sim.record().phase is not Phase.ABORTED, (point, kind)
            outcomes.add(settle(sim))
    return outcomes


@pytest.mark.parametrize(("mode", "existing"), CONFIGS)
def test_an_abort_at_any_point_of_a_stage_try_leaves_no_owned_candidate(mode: ReplicationMode, existing: bool) -> None:
    """At each point of a stage try from LOCKED (the STAGING write with the intents, each CREATE, the binding write,
    each load, the STAGED write; internal: the create permit and its ON CLUSTER dispatch, the load, ...) a whole abort
    runs; in particular one that saw a member's candidate absent while that member's CREATE ... UUID was about to
    leave. The abort wins every race (it is allowed before publication): ABORTED, and no candidate on any member,
    whatever became of the stage try's interrupted request."""
    assert race(mode, existing, locked, stage_try, abort_try) == {"aborted"}


@pytest.mark.parametrize(("mode", "existing"), CONFIGS)
def test_a_stage_try_at_any_point_of_an_abort_leaves_no_owned_candidate(mode: ReplicationMode, existing: bool) -> None:
    """From STAGING with every candidate intended and none created yet, a whole stage try runs at each point of an
    abort (its fence write, each drop, its final write), and the abort's request at that point then leaves cleanly,
    dies before or after it, or loses its answer: the creates the stage try sends before the fence land, the ones
    after it are never sent, and the abort ends ABORTED with no candidate left."""
    assert race(mode, existing, intended, abort_try, stage_try) == {"aborted"}
