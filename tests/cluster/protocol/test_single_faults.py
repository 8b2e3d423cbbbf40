"""Exhaustive single-fault enumeration: every fault point x every fault kind, both modes, for 2 and 3 members.

For each configuration the fault-free run is traced first; then, for every point index of that trace and every kind,
a fresh world runs the DAG with exactly that fault. The fault must actually fire, the invariants must hold right
after the faulty run, and -- when the faulty run stopped -- a later retry with faults off must converge to COMPLETED.
The one exception is a permit whose DDL was provably never sent (the process died or lost the permit's
acknowledgement before dispatching): nothing can prove the request is not still in flight, so the step fails closed
with ``DISPATCH_UNPROVEN`` and every object is retained; exactly those faults, and no others, may end that way.
``tries=1`` makes every fault stop the run (the resume path); ``tries=3`` exercises Airflow's own retries.
"""

from __future__ import annotations

import pytest

from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.support.cluster.sim import BASELINE_ROWS, UNPROVEN, Sim, permit_without_dispatch
from tests.support.fakes.faults import SINGLE_FAULT_KINDS, FaultKind

pytestmark = pytest.mark.protocol

CONFIGS = [
    pytest.param(mode, members, existing, id=f"{mode}-{members}-members-{'existing' if existing else 'absent'}-target")
    for mode in ("external", "internal")
    for members in (2, 3)
    for existing in (True, False)
]
EVERY_BOUNDARY: dict[ReplicationMode, set[str]] = {
    "external": {
        "authority.create",
        "authority.cas",
        "member.create",
        "member.exchange",  # the fence's exchange probe (with its scratch creates and drops)
        "member.drop",
        "member.load",
        "ddl.dispatch",
        "ddl.queue_status",
        "ddl.server_identity",
    },
    "internal": {
        "authority.create",
        "authority.cas",
        "ddl.dispatch",  # the candidate's ON CLUSTER create, the publication, the cleanup
        "ddl.queue_status",
        "ddl.server_identity",
        "member.load",  # once, through one replica
        "member.replica_status",
        "member.sync_replica",
        "member.create",  # the fence's exchange probe: two scratch tables created, exchanged, dropped per member
        "member.exchange",
        "member.drop",
    },
}


def _build(mode: ReplicationMode, members: int, existing: bool) -> Sim:
    return Sim.build(members=members, baseline=BASELINE_ROWS if existing else None, mode=mode)


def _enumerate(
    mode: ReplicationMode, members: int, existing: bool, *, prefix: list[tuple[int, FaultKind]], tries: int
) -> int:
    clean = _build(mode, members, existing)
    clean.world.faults.schedule(prefix)
    assert clean.run_dag() == "completed"
    trace = clean.world.faults.trace
    first = max((point for point, _ in prefix), default=-1) + 1
    runs = 0
    for point in range(first, len(trace)):
        kinds = (*SINGLE_FAULT_KINDS, FaultKind.PARTIAL) if trace[point] == "member.load" else SINGLE_FAULT_KINDS
        for kind in kinds:
            sim = _build(mode, members, existing)
            sim.world.faults.schedule([*prefix, (point, kind)])
            outcome = sim.run_dag(tries=tries)
            assert (point, trace[point], kind) in sim.world.faults.fired, (point, kind)
            sim.check_invariants()
            if outcome != "completed":
                sim.world.faults.disable()
                outcome = sim.run_dag()
            if permit_without_dispatch(trace, point, kind):
                sim.check_fail_closed(outcome, UNPROVEN)
            else:
                assert outcome == "completed", (point, trace[point], kind, sim.errors)
                sim.check_converged()
            runs += 1
    return runs


@pytest.mark.parametrize(("mode", "members", "existing"), CONFIGS)
@pytest.mark.parametrize("tries", [1, 3])
def test_every_single_fault_converges(mode: ReplicationMode, members: int, existing: bool, tries: int) -> None:
    clean = _build(mode, members, existing)
    assert clean.run_dag() == "completed"
    trace = clean.world.faults.trace
    assert set(trace) == EVERY_BOUNDARY[mode]
    loads, creates = (1, 0) if mode == "internal" else (members, members)
    assert trace.count("member.load") == loads and trace.count("member.create") == creates + 2 * members
    assert _enumerate(mode, members, existing, prefix=[], tries=tries) >= 3 * len(trace)


@pytest.mark.parametrize(("mode", "members", "existing"), CONFIGS)
def test_every_single_fault_during_an_exact_rebuild_converges(
    mode: ReplicationMode, members: int, existing: bool
) -> None:
    """A partial first load forces the drop-and-rebuild path (external: member drops; internal: the fenced ON
    CLUSTER drop of the owned candidate and a second create), so those become fault points too."""
    clean = _build(mode, members, existing)
    clean.run_dag()
    first_load = clean.world.faults.trace.index("member.load")
    prefix = [(first_load, FaultKind.PARTIAL)]
    rebuilt = _build(mode, members, existing)
    rebuilt.world.faults.schedule(prefix)
    assert rebuilt.run_dag() == "completed"
    if mode == "external":
        assert "member.drop" in rebuilt.world.faults.trace[first_load:]
    else:
        assert [entry.intent.kind for entry in rebuilt.world.queue][:3] == ["create", "drop", "create"]
    assert _enumerate(mode, members, existing, prefix=prefix, tries=1) > 0
