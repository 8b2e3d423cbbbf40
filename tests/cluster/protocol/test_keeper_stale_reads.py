"""A Keeper server behind the write answers the read-back of an authority CAS (Keeper reads are not linearizable
across servers; KeeperMap sends no ``sync`` before a read).

For every authority CAS of a complete run, in both modes, the CAS's read-back and the next reads are served the
previous version:

* within the bound (``ProtocolSettings.authority_rereads``): no false conflict, the run completes without a stop,
  and every mutation is sent exactly as often as in the run without lag;
* past the bound: the attempt stops with the coded unknown outcome ``AUTHORITY_OUTCOME_UNKNOWN``, no mutation is
  repeated, and a retry resolves it by observation: it converges, or, where the CAS was a dispatch permit that was
  never sent, fails closed with ``DISPATCH_UNPROVEN`` exactly as after a lost acknowledgement.
"""

from __future__ import annotations

from collections import Counter

import pytest

from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.support.cluster.sim import SETTINGS, UNPROVEN, Sim, permit_without_dispatch
from tests.support.fakes.faults import FaultKind

pytestmark = pytest.mark.protocol

OUTCOME_UNKNOWN = "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_OUTCOME_UNKNOWN"
CONFLICT = "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_CONFLICT"
MUTATIONS = ("authority.create", "authority.cas", "member.create", "member.load", "member.drop", "ddl.dispatch")


def _clean(mode: ReplicationMode) -> Sim:
    clean = Sim.build(mode=mode)
    assert clean.run_dag() == "completed"
    return clean


def _cas_points(trace: list[str]) -> list[int]:
    return [point for point, name in enumerate(trace) if name == "authority.cas"]


def _lagging_at(mode: ReplicationMode, point: int, reads: int) -> Sim:
    sim = Sim.build(mode=mode)
    sim.world.faults.interleave(point, lambda: sim.world.lag_keeper(reads))  # armed just before that CAS is sent
    return sim


def _mutations(sim: Sim) -> Counter[str]:
    return Counter(name for name in sim.world.faults.trace if name in MUTATIONS)


@pytest.mark.parametrize("mode", ["external", "internal"])
@pytest.mark.parametrize("reads", [1, SETTINGS.authority_rereads])  # the read-back and then rereads - 1 reads
def test_a_lagging_read_back_within_the_bound_is_no_conflict_and_repeats_nothing(
    mode: ReplicationMode, reads: int
) -> None:
    clean = _clean(mode)
    points = _cas_points(clean.world.faults.trace)
    assert points
    for point in points:
        sim = _lagging_at(mode, point, reads)
        assert sim.run_dag(tries=1) == "completed", (point, sim.errors)
        assert sim.errors == [] and sim.world.keeper_lagging_reads == 0
        assert _mutations(sim) == _mutations(clean), point  # no write, load, create or dispatch sent twice
        assert sim.world.calls["ddl.dispatch"] == clean.world.calls["ddl.dispatch"]
        _once_per_token(sim)
        sim.check_converged()


def _retried(sim: Sim) -> str:
    """The stopped run's first attempt, then a later retry with every fault and every lag gone."""
    outcome = sim.run_dag(tries=1)
    sim.world.faults.disable()
    sim.world.lag_keeper(0)
    return f"{outcome} | {sim.run_dag()}"


def _once_per_token(sim: Sim) -> None:
    tokens = [settings.correlation_token for settings in sim.world.dispatched]
    assert len(tokens) == len(set(tokens)), "a permit was dispatched twice"


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_a_read_back_lagging_past_the_bound_is_a_coded_unknown_outcome_resolved_by_observation(
    mode: ReplicationMode,
) -> None:
    """Past the bound the CAS is an unknown outcome like a lost acknowledgement: the same stop, the same recovery
    and the same mutations as a run whose CAS reply was lost (``FaultKind.LOSE_RESPONSE`` at that point)."""
    clean = _clean(mode)
    trace = clean.world.faults.trace
    for point in _cas_points(trace):
        sim = _lagging_at(mode, point, 1 + SETTINGS.authority_rereads)  # the read-back and every reread
        lost = Sim.build(mode=mode)
        lost.world.faults.schedule([(point, FaultKind.LOSE_RESPONSE)])
        outcome = _retried(sim)
        assert outcome.startswith("stopped at") and outcome.split(" | ")[0].endswith(f": {OUTCOME_UNKNOWN}"), point
        assert CONFLICT not in sim.errors
        assert outcome == _retried(lost), point
        assert _mutations(sim) == _mutations(lost), point
        _once_per_token(sim)
        final = outcome.split(" | ")[1]
        if permit_without_dispatch(trace, point, FaultKind.LOSE_RESPONSE):
            sim.check_fail_closed(final, UNPROVEN)  # a permit never sent: fail closed, never dispatched again
        else:
            assert final == "completed", (point, outcome, sim.errors)
            sim.check_converged()
