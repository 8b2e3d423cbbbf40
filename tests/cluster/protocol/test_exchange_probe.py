"""The fence proves that every member can EXCHANGE tables before anything is fenced or staged.

A member whose metadata directory's filesystem has no ``renameat2(RENAME_EXCHANGE)`` refuses every EXCHANGE with
Code 1 (the fake follows ``renameExchange``, src/Common/renameat2.cpp). Found at publication, the ON CLUSTER EXCHANGE
would already have swapped the other members; found by the fence's probe, nothing is fenced, created or loaded.
Every fault at the probe's own I/O (crash before or after, lost answer) is resolved by observation: the next attempt
drops what this operation's scratch names hold, by UUID, and probes again; nothing is left behind.
"""

from __future__ import annotations

import pytest

from airflow_provider_dpone.cluster.protocol.exchange_probe import scratch_names
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.support.cluster.sim import Sim, error_code
from tests.support.fakes.faults import SINGLE_FAULT_KINDS

pytestmark = pytest.mark.protocol

UNSUPPORTED = "DPONE_CLICKHOUSE_CLUSTER_EXCHANGE_UNSUPPORTED"
PROBE_POINTS = ("member.create", "member.exchange", "member.drop", "member.observe")


def _scratch_left(sim: Sim) -> list[tuple[str, str]]:
    names = scratch_names(sim.request.operation_id)
    return [(member.member_id, name) for member in sim.world.members for (_, name) in member.tables if name in names]


@pytest.mark.parametrize("mode", ["external", "internal"])
@pytest.mark.parametrize("member", [0, 1])
def test_a_member_that_cannot_exchange_stops_the_fence_before_anything_is_fenced_or_staged(
    mode: ReplicationMode, member: int
) -> None:
    sim = Sim.build(mode=mode)
    sim.world.members[member].no_rename_exchange = True
    for _ in range(2):  # terminal: a retry stops the same way, and changes nothing either
        assert error_code(lambda: sim.service().fence()) == UNSUPPORTED
        assert sim.world.keeper == {}  # the target is not fenced
        assert _scratch_left(sim) == []  # the probe's scratch tables were dropped
        assert sim.world.calls["ddl.dispatch"] == 0 and sim.world.calls["member.load"] == 0
        sim.check_invariants()
    for other in sim.world.members:
        assert sim.world.table(other, sim.request.candidate_name) is None
    sim.world.members[member].no_rename_exchange = False  # the member moved to a filesystem that can
    assert sim.run_dag() == "completed"
    assert _scratch_left(sim) == []
    sim.check_converged()


def test_without_the_probe_the_same_member_would_fail_the_publication_mixed() -> None:
    """Why the probe exists: the member that cannot exchange fails its part of the ON CLUSTER EXCHANGE while the
    others swap (the fake's DDL worker follows the same rule)."""
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    sim.world.members[1].no_rename_exchange = True  # after the fence's probe: the filesystem changed since
    sim.run_dag(tries=1)
    (entry,) = [entry for entry in sim.world.queue if entry.intent.kind == "exchange"]
    states = {member_id: code for member_id, (_, code) in entry.hosts.items()}
    assert states[sim.world.members[0].member_id] == 0 and states[sim.world.members[1].member_id] == 1
    assert sim.record().phase.value == "PUBLICATION_DISPATCHING"  # never COMMITTED: fails closed, mixed


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_every_fault_of_the_probe_is_resolved_by_the_next_attempt_and_leaves_nothing(mode: ReplicationMode) -> None:
    clean = Sim.build(mode=mode)
    clean.service().fence()
    trace = clean.world.faults.trace
    points = [point for point, name in enumerate(trace) if name in PROBE_POINTS]
    assert {trace[point] for point in points} >= {"member.create", "member.exchange", "member.drop"}
    for point in points:
        for kind in SINGLE_FAULT_KINDS:
            sim = Sim.build(mode=mode)
            sim.world.faults.schedule([(point, kind)])
            outcome = sim.run_dag(tries=1)
            assert (point, trace[point], kind) in sim.world.faults.fired
            sim.check_invariants()
            if outcome != "completed":
                assert outcome.startswith("stopped at fence"), (point, kind, outcome)
                sim.world.faults.disable()
                assert sim.run_dag() == "completed", (point, kind, sim.errors)
            assert _scratch_left(sim) == [], (point, kind)
            assert UNSUPPORTED not in sim.errors
            sim.check_converged()


def test_leftovers_of_an_earlier_attempt_are_dropped_by_their_uuid_and_nothing_foreign_is_touched() -> None:
    sim = Sim.build()
    left, _ = scratch_names(sim.request.operation_id)
    sim.world.faults.at_next("member.create", kind=SINGLE_FAULT_KINDS[1], nth=1)  # crash after the first create
    assert sim.run_dag(tries=1).startswith("stopped at fence")
    assert _scratch_left(sim) == [(sim.world.members[0].member_id, left)]
    sim.world.faults.disable()
    assert sim.run_dag() == "completed"
    assert _scratch_left(sim) == []
    sim.check_converged()  # the unrelated tables and the predecessor untouched (check_invariants)
