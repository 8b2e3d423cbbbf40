"""Round trips to Keeper and to the cluster are O(members) and independent of the row count.

Every port call of a complete fault-free run is counted (authority reads and writes, catalog reads, member sessions,
observations and mutations, DDL dispatches and queue reads, artifact opens). The totals must grow by the same amount
for each added member, and must not change at all when the artifact has a hundred times more rows.
"""

from __future__ import annotations

import pytest

from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.support.cluster.sim import BASELINE_ROWS, Sim

pytestmark = pytest.mark.protocol


def _calls(members: int, rows: int, existing: bool, mode: ReplicationMode = "external") -> dict[str, int]:
    sim = Sim.build(
        members=members,
        baseline=BASELINE_ROWS if existing else None,
        rows=tuple((index, f"row-{index}") for index in range(rows)),
        mode=mode,
    )
    assert sim.run_dag(tries=1) == "completed"
    return dict(sim.world.calls)


BUDGETS: dict[tuple[ReplicationMode, bool], tuple[int, int]] = {
    ("external", True): (33, 32),
    ("external", False): (28, 31),
    ("internal", True): (40, 31),
    ("internal", False): (35, 30),
}
"""(fixed, per member) port calls of one fault-free run, by mode and existing target: the counts as they are, so one
more call anywhere fails."""


@pytest.mark.parametrize("mode", ["external", "internal"])
@pytest.mark.parametrize("existing", [True, False])
def test_port_calls_are_linear_in_members_and_independent_of_rows(existing: bool, mode: ReplicationMode) -> None:
    totals = {n: sum(_calls(n, 3, existing, mode).values()) for n in (2, 3, 4)}
    per_member = totals[3] - totals[2]
    assert totals[4] - totals[3] == per_member, totals
    fixed = totals[2] - 2 * per_member
    budget_fixed, budget_per_member = BUDGETS[(mode, existing)]
    assert 0 <= fixed <= budget_fixed and per_member <= budget_per_member, (fixed, per_member)
    for n in (2, 3, 4):
        assert _calls(n, 300, existing, mode) == _calls(n, 3, existing, mode)


@pytest.mark.parametrize("mode", ["external", "internal"])
@pytest.mark.parametrize("existing", [True, False])
@pytest.mark.parametrize("members", [2, 3])
def test_observations_per_member_are_the_ones_that_decide(members: int, existing: bool, mode: ReplicationMode) -> None:
    """Every member observation of a fault-free run decides something: the exchange probe looks four times (free,
    created, swapped, dropped; names observed free need no second look, and the swap it saw names what it drops),
    the rest of the run twelve times with an existing target (eleven without)."""
    assert _calls(members, 3, existing, mode)["member.observe"] == (16 if existing else 15) * members


@pytest.mark.parametrize("members", [2, 3, 4])
def test_mutations_per_member_are_constant(members: int) -> None:
    calls = _calls(members, 10, True)
    # each member's candidate, and the fence's exchange probe: two scratch tables created, exchanged and dropped
    assert calls["member.create"] == 3 * members and calls["member.load"] == members
    assert calls["member.exchange"] == members and calls["member.drop"] == 2 * members
    assert calls["ddl.dispatch"] == 2  # one exchange and one cleanup drop, whatever the member count
    assert calls["authority.create"] == 1
    # STAGING (every intent), one CREATED binding every fresh candidate, STAGED (every READY), publication permit and
    # its dispatch record, COMMITTED, cleanup permit and its dispatch record, COMPLETED: whatever the member count
    assert calls["authority.cas"] == 9
    # admission at each of the four entry points: the inventory, and one catalog read per member
    assert calls["catalog.inventory"] == 4 and calls["catalog.admission_facts"] == 4 * members


@pytest.mark.parametrize("members", [2, 3, 4])
def test_internal_mutations_do_not_grow_with_members(members: int) -> None:
    """One ON CLUSTER create, one load through one replica, one publication, one cleanup, whatever the replica count;
    only the observations (status, sync, content) are per replica."""
    calls = _calls(members, 10, True, "internal")
    assert calls["member.load"] == 1
    # only the fence's exchange probe is per member: two scratch tables created, exchanged and dropped on each
    assert calls["member.create"] == 2 * members and calls["member.exchange"] == members
    assert calls["member.drop"] == 2 * members
    assert calls["ddl.dispatch"] == 3  # create, exchange, cleanup drop
    assert calls["member.sync_replica"] == members and calls["member.replica_status"] == members
    assert calls["authority.create"] == 1
    # STAGING (with the create permit), the create's dispatch record, CREATED, STAGED (with READY), publication permit
    # and its dispatch record, COMMITTED, cleanup permit and its dispatch record, COMPLETED
    assert calls["authority.cas"] == 10
