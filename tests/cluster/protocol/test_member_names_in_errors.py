"""A coded error names a member by its one name, ``m<16 hex> (shard S, replica R)``, the position read from the
inventory the operation bound; when the live inventory is not that one, the name says the position is unknown.

Every protocol test is held to this by ``conftest.py`` (each coded error raised while it runs); the cases here pin
the two halves of the rule on refusals an operator meets, and the checker itself.
"""

from __future__ import annotations

import pytest

from airflow_provider_dpone.cluster.values.identities import member_id
from airflow_provider_dpone.cluster.values.inventory import member_label
from airflow_provider_dpone.core.errors import DponeError
from tests.cluster.protocol.test_release import diverged
from tests.support.cluster.member_names import misnamed_members
from tests.support.cluster.sim import Sim

pytestmark = pytest.mark.protocol

NOT_RESTORED = "DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOT_RESTORED"
FOREIGN = "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_FOREIGN"


def test_the_checker_finds_a_bare_id_and_a_position_that_is_not_the_ids() -> None:
    first, second = member_id(1, 1), member_id(1, 2)
    assert misnamed_members(f"member {first} (shard 1, replica 1): drop") == []
    assert misnamed_members(f"member {first} (position unknown: the inventory changed)") == []
    assert misnamed_members(f"member {first} did not answer") == [first]
    assert misnamed_members(f"members ['{first}', '{second} (shard 1, replica 2)']") == [first]
    assert misnamed_members(f"member {second} (shard 1, replica 1)") == [second], "the position must be the id's"
    assert misnamed_members(f"operation {'a' * 64}, token {'0' * 32}") == []


def test_a_refused_release_names_the_member_with_its_bound_position() -> None:
    sim, _ = diverged()  # stopped after its swap; nothing swapped back: no member is restored
    with pytest.raises(DponeError) as refused:
        sim.service().release("restored")
    assert refused.value.code == NOT_RESTORED
    named = {member_label(m.member_id, m.shard_num, m.replica_num) for m in sim.world.members}
    assert any(f"member {label}:" in refused.value.detail for label in named), refused.value.detail
    assert misnamed_members(refused.value.detail) == []


def test_an_abort_after_the_inventory_changed_says_the_position_is_unknown() -> None:
    """A member joined after the fence: the live inventory is not the bound one, so no position is proven, and the
    abort's refusal of a foreign candidate says so instead of taking the live inventory's."""
    sim = Sim.build(members=2)
    sim.service().fence()
    sim.service().stage(sim.source)
    sim.world.add_member(3)
    foreign = sim.world.members[0]
    sim.world.drop_on(foreign, sim.world.database, sim.request.candidate_name)
    sim.world.put_table(foreign, sim.request.candidate_name, (("id", "UInt64"),), [])  # not the operation's
    with pytest.raises(DponeError) as refused:
        sim.service().abort()
    assert refused.value.code == FOREIGN
    assert refused.value.detail == f"member {foreign.member_id} (position unknown: the inventory changed)"
