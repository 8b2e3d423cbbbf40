"""A permit's dispatch is recorded before it is sent, so a permit the product never sent is provably unsent.

The permit CAS binds a token; the holder then records the dispatch (one more CAS, stamped before the write) and sends
only within the dispatch deadline of that stamp. A permit without a recorded dispatch is void by construction: the
next try replaces it with a new permit (new epoch, new token) and sends that, without a coordinator restart. A slow
Keeper round trip therefore costs at most a retry: on the permit write it costs nothing, on the dispatch record the
holder withdraws the record (``DISPATCH_NOT_SENT``, retryable). Only a recorded dispatch whose worker died before the
send may have been sent, and only it keeps the runbook's restart and void.

Every new write (the record, the withdrawal) is hit by a crash before it, a crash after it and a lost response, for
each DDL step of both modes; assertions are about the world's queue, UUIDs and rows and the authority record.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest

from airflow_provider_dpone.cluster.values.authority.generation import DdlBinding
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.support.cluster.sim import SETTINGS, UNPROVEN, Sim
from tests.support.fakes.faults import SINGLE_FAULT_KINDS, FaultKind

pytestmark = pytest.mark.protocol

NOT_SENT = "DPONE_CLICKHOUSE_CLUSTER_DISPATCH_NOT_SENT"
SLOW_MS = SETTINGS.dispatch_deadline_ms + 1
"""One Keeper round trip longer than the whole dispatch deadline."""
MODES: tuple[ReplicationMode, ...] = ("external", "internal")
STEPS: dict[ReplicationMode, tuple[str, ...]] = {
    "external": ("exchange", "drop"),
    "internal": ("create", "exchange", "drop"),
}
"""The DDL steps of a run, by the kind of their one queue entry, in order."""
STEPS_OF_EVERY_MODE = [pytest.param(mode, kind, id=f"{mode}-{kind}") for mode in MODES for kind in STEPS[mode]]


def dispatch_points(mode: ReplicationMode) -> list[int]:
    """The fault point of every ``ddl.dispatch`` of a fault-free run, in step order."""
    clean = Sim.build(mode=mode)
    assert clean.run_dag() == "completed"
    return [index for index, name in enumerate(clean.world.faults.trace) if name == "ddl.dispatch"]


def permit_point(mode: ReplicationMode, kind: str) -> int:
    """The fault point of the step's permit write: the first write after the identity read that pins the permit."""
    clean = Sim.build(mode=mode)
    assert clean.run_dag() == "completed"
    trace = clean.world.faults.trace
    dispatch = dispatch_points(mode)[STEPS[mode].index(kind)]
    pinned = max(index for index in range(dispatch) if trace[index] == "ddl.server_identity")
    return trace.index("authority.cas", pinned)


def sent(sim: Sim, kind: str) -> int:
    """Statements of ``kind`` that reached the coordinator's queue."""
    return sum(entry.intent.kind == kind for entry in sim.world.queue)


def slow_round_trip(sim: Sim) -> Callable[[], None]:
    """The Keeper round trip of the write at this point takes longer than the dispatch deadline."""
    return lambda: sim.world.clock.advance(SLOW_MS)


def restart_and_void(sim: Sim) -> None:
    sim.world.clock.advance(SETTINGS.dispatch_deadline_ms + SETTINGS.send_timeout_ms + SETTINGS.void_skew_margin_ms + 1)
    sim.world.restart_coordinator()
    sim.service().void_permit()


def bindings(sim: Sim) -> list[DdlBinding]:
    record = sim.record()
    found = [record.publication, record.cleanup]
    candidate = getattr(record, "candidate", None)
    if candidate is not None:
        found.append(candidate.create)
    return [binding for binding in found if binding is not None and binding.kind != "none"]


def converged_once_each(sim: Sim, mode: ReplicationMode) -> None:
    """COMPLETED, every target the artifact, and each step's DDL queued exactly once."""
    sim.check_converged()
    for kind in STEPS[mode]:
        assert sent(sim, kind) == 1, (kind, [entry.intent.kind for entry in sim.world.queue])


@pytest.mark.parametrize(("mode", "kind"), STEPS_OF_EVERY_MODE)
def test_a_permit_write_slower_than_the_deadline_is_still_sent_without_a_restart(
    mode: ReplicationMode, kind: str
) -> None:
    """The permit CAS and its read-back take longer than the dispatch deadline. Before the dispatch was recorded
    separately the permit was too old to send and the step ended ``DISPATCH_UNPROVEN`` (a restart to go on); now the
    deadline runs from the dispatch record, and the step sends at once."""
    sim = Sim.build(mode=mode)
    point = permit_point(mode, kind)
    sim.world.faults.interleave(point, slow_round_trip(sim))
    assert sim.run_dag() == "completed", sim.errors
    assert UNPROVEN not in sim.errors and sim.errors == []
    converged_once_each(sim, mode)
    assert all(binding.records_dispatch and binding.dispatching_at_ms is not None for binding in bindings(sim))


@pytest.mark.parametrize(("mode", "kind"), STEPS_OF_EVERY_MODE)
def test_a_dispatch_record_slower_than_the_deadline_is_withdrawn_and_the_retry_sends_a_new_permit(
    mode: ReplicationMode, kind: str
) -> None:
    """The dispatch record's own round trip takes longer than the deadline: the holder does not send, writes the
    record back to 'never sent' and stops retryably; Airflow's retry takes a new permit (new epoch, new token) and
    sends it. No restart, no void, one statement in the queue."""
    sim = Sim.build(mode=mode)
    point = dispatch_points(mode)[STEPS[mode].index(kind)] - 1
    sim.world.faults.interleave(point, slow_round_trip(sim))
    assert sim.run_dag() == "completed", sim.errors
    assert sim.errors == [NOT_SENT]
    assert sim.record().voided == ()
    converged_once_each(sim, mode)
    queued = next(entry.token for entry in sim.world.queue if entry.intent.kind == kind)
    bound = next(binding for binding in bindings(sim) if binding.kind == kind)
    assert queued == bound.correlation_token  # the retry's new permit, the one that was sent


def fault_at(
    mode: ReplicationMode, kind: str, offset: int, fault: FaultKind, *, slow: bool
) -> tuple[Sim, DdlBinding | None, str]:
    """A run with ``fault`` at the write ``offset`` points before the step's dispatch (2: its permit, 1: its dispatch
    record), or with ``slow``, at the withdrawal that follows a slow dispatch record; then Airflow's retries. Also
    returns the step's binding as the faulted try left it."""
    sim = Sim.build(mode=mode)
    point = permit_point(mode, kind) if offset == 2 else dispatch_points(mode)[STEPS[mode].index(kind)] - 1
    if slow:
        sim.world.faults.interleave(point, slow_round_trip(sim))
        point += 1  # the withdrawal comes next, instead of the dispatch
    sim.world.faults.schedule([(point, fault)])
    outcome = sim.run_dag(tries=1)
    assert (point, "authority.cas", fault) in sim.world.faults.fired
    sim.check_invariants()
    left = next((binding for binding in bindings(sim) if binding.kind == kind), None)
    sim.world.faults.disable()
    if outcome != "completed":
        outcome = sim.run_dag()
    return sim, left, outcome


@pytest.mark.parametrize(("mode", "kind"), STEPS_OF_EVERY_MODE)
@pytest.mark.parametrize("fault", SINGLE_FAULT_KINDS)
def test_every_fault_of_the_permit_write_resumes_without_a_restart(
    mode: ReplicationMode, kind: str, fault: FaultKind
) -> None:
    """Crash before the permit write, crash after it, or its answer lost: no dispatch was recorded, so the permit
    (if written) is provably unsent and the retry replaces it. Before the dispatch was recorded, a crash after the
    permit write ended ``DISPATCH_UNPROVEN``."""
    sim, left, outcome = fault_at(mode, kind, 2, fault, slow=False)
    if fault is FaultKind.CRASH_BEFORE:
        assert left is None
    else:
        assert left is not None and left.unsent
    assert outcome == "completed", (outcome, sim.errors)
    assert UNPROVEN not in sim.errors
    converged_once_each(sim, mode)


@pytest.mark.parametrize(("mode", "kind"), STEPS_OF_EVERY_MODE)
@pytest.mark.parametrize("fault", SINGLE_FAULT_KINDS)
def test_every_fault_of_the_dispatch_record(mode: ReplicationMode, kind: str, fault: FaultKind) -> None:
    """Crash before the record: never sent, the retry re-permits. Crash after it, or its answer lost: the record
    says the request may have left, and nothing proves otherwise, so the step fails closed ``DISPATCH_UNPROVEN``
    and only the restart and void go on (then it converges with the DDL queued once)."""
    sim, left, outcome = fault_at(mode, kind, 1, fault, slow=False)
    assert left is not None and left.unsent is (fault is FaultKind.CRASH_BEFORE)
    if fault is FaultKind.CRASH_BEFORE:
        assert outcome == "completed", (outcome, sim.errors)
        assert UNPROVEN not in sim.errors
    else:
        sim.check_fail_closed(outcome, UNPROVEN)
        assert sent(sim, kind) == 0
        restart_and_void(sim)
        assert sim.run_dag() == "completed", sim.errors
    converged_once_each(sim, mode)


@pytest.mark.parametrize(("mode", "kind"), STEPS_OF_EVERY_MODE)
@pytest.mark.parametrize("fault", SINGLE_FAULT_KINDS)
def test_every_fault_of_the_withdrawal_of_a_late_dispatch_record(
    mode: ReplicationMode, kind: str, fault: FaultKind
) -> None:
    """After a dispatch record slower than the deadline: a crash before the withdrawal leaves the record saying 'may
    have been sent' (the restart path, as for any recorded dispatch whose worker died); a crash after it or a lost
    answer leaves it 'never sent', and the retry re-permits without a restart."""
    sim, left, outcome = fault_at(mode, kind, 1, fault, slow=True)
    assert left is not None and left.unsent is (fault is not FaultKind.CRASH_BEFORE)
    if fault is FaultKind.CRASH_BEFORE:
        sim.check_fail_closed(outcome, UNPROVEN)
        restart_and_void(sim)
        assert sim.run_dag() == "completed", sim.errors
    else:
        assert outcome == "completed", (outcome, sim.errors)
        assert UNPROVEN not in sim.errors
    converged_once_each(sim, mode)


def test_an_unsent_permit_needs_no_void_and_the_void_changes_nothing() -> None:
    """A publication permit whose worker died before recording its dispatch: the operator's void refuses
    (nothing to void), changes nothing, and the DAG's retry publishes."""
    sim = Sim.build()
    point = dispatch_points("external")[0] - 1
    sim.world.faults.schedule([(point, FaultKind.CRASH_BEFORE)])
    assert sim.run_dag(tries=1) == "stopped at publish: crash"
    binding = sim.record().publication
    assert sim.record().phase is Phase.PUBLICATION_DISPATCHING and binding is not None and binding.unsent
    row = sim.world.keeper[sim.request.target_key]
    with pytest.raises(Exception) as refused:
        sim.service().void_permit()
    assert getattr(refused.value, "code", None) == "DPONE_CLICKHOUSE_CLUSTER_VOID_NOTHING_TO_VOID"
    assert sim.world.keeper[sim.request.target_key] == row
    sim.world.faults.disable()
    assert sim.run_dag() == "completed"
    converged_once_each(sim, "external")


def step_try(sim: Sim, kind: str) -> Callable[[], None]:
    """Another worker's try of the task that runs the step (a coded refusal ends it, as it ends a task try)."""
    calls: dict[str, Callable[[], object]] = {
        "create": lambda: sim.service().stage(sim.source),
        "exchange": lambda: sim.service().publish(),
        "drop": lambda: sim.service().cleanup(),
    }

    def run() -> None:
        with contextlib.suppress(DponeError):
            calls[kind]()

    return run


@pytest.mark.parametrize(("mode", "kind"), STEPS_OF_EVERY_MODE)
@pytest.mark.parametrize("before", ["record", "send"])
def test_a_concurrent_try_at_the_dispatch_record_or_the_send_never_sends_twice(
    mode: ReplicationMode, kind: str, before: str
) -> None:
    """A second try of the same task runs whole just before the holder's dispatch record (it finds the permit
    unsent, replaces it, records and sends its own; the holder's record then loses its CAS and sends nothing), or
    just before the holder's send (it finds the dispatch recorded, so it only reconciles, in progress). Either way
    the step's statement is queued exactly once and the run converges."""
    sim = Sim.build(mode=mode)
    dispatch = dispatch_points(mode)[STEPS[mode].index(kind)]
    sim.world.faults.interleave(dispatch - 1 if before == "record" else dispatch, step_try(sim, kind))
    assert sim.run_dag() == "completed", sim.errors
    assert UNPROVEN not in sim.errors and sim.record().voided == ()
    converged_once_each(sim, mode)
    queued = next(entry.token for entry in sim.world.queue if entry.intent.kind == kind)
    bound = next(binding for binding in bindings(sim) if binding.kind == kind)
    assert queued == bound.correlation_token
    clean = Sim.build(mode=mode)
    assert clean.run_dag() == "completed"
    undisturbed = next(binding.epoch for binding in bindings(clean) if binding.kind == kind)
    assert bound.epoch == undisturbed + (before == "record")  # the replacing permit is the one that was sent
