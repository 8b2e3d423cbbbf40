"""A member has one name, ``m<16 hex> (shard S, replica R)``: the position is read from the inventory the operation
bound, never guessed, and the name never carries the host."""

from __future__ import annotations

import pytest
from dpone_embedded import member_names

from airflow_provider_dpone.cluster.protocol.runtime_admission import admit_inventory
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.cluster.values.identities import member_id
from airflow_provider_dpone.cluster.values.inventory import InventoryRow, MemberEndpoint, member_label
from airflow_provider_dpone.cluster.values.publication_receipts import external_receipt
from tests.support.fakes.records import external_record

pytestmark = pytest.mark.unit


def _rows(replicas: int) -> list[InventoryRow]:
    return [
        InventoryRow(
            cluster="dpone_cluster",
            shard_num=1,
            replica_num=replica,
            internal_replication=False,
            endpoint=MemberEndpoint(host=f"host-{replica}.example", port=8123),
            ddl_entry_format_version=5,
        )
        for replica in range(1, replicas + 1)
    ]


def test_the_admitted_member_and_the_bound_positions_name_a_member_the_same_way() -> None:
    inventory = admit_inventory(_rows(3), cluster="dpone_cluster", mode="external")
    positions = inventory.positions(inventory.digest)
    assert positions == {member_id(1, replica): (1, replica) for replica in (1, 2, 3)}
    for member in inventory.members:
        assert member.label == member_label(member.member_id, *positions[member.member_id])
        assert member.label == f"{member_id(1, member.replica_num)} (shard 1, replica {member.replica_num})"
        assert "host-" not in member.label


def test_a_live_inventory_that_is_not_the_bound_one_proves_no_position() -> None:
    bound = admit_inventory(_rows(3), cluster="dpone_cluster", mode="external")
    live = admit_inventory(_rows(2), cluster="dpone_cluster", mode="external")  # a member left since
    assert live.positions(bound.digest) == {}
    assert (
        member_label("m0123456789abcdef", None, None) == "m0123456789abcdef (position unknown: the inventory changed)"
    )


def test_a_receipt_names_each_member_with_the_bound_position_and_no_host() -> None:
    record = external_record(Phase.COMMITTED, members=2)
    inventory = admit_inventory(_rows(2), cluster="dpone_cluster", mode="external")
    receipt = external_receipt(record, 3, inventory.positions(inventory.digest))
    assert [member.label for member in receipt.members] == [
        inventory.member(member.member_id).label for member in receipt.members
    ]
    assert "host-" not in receipt.to_json()
    unproven = external_receipt(record, 3, {})
    assert {(member.shard_num, member.replica_num) for member in unproven.members} == {(None, None)}


def test_the_embedded_cluster_computes_the_provider_member_id_and_name_on_its_own() -> None:
    """The double never imports the provider, yet its CLI prints the product's name of each member: its own
    computation (``dpone_embedded.member_names``) equals the provider's ``member_id`` and ``member_label``."""
    for shard in (1, 2, 7):
        for replica in range(1, 21):
            assert member_names.member_id(shard, replica) == member_id(shard, replica)
            assert member_names.member_label(shard, replica) == member_label(member_id(shard, replica), shard, replica)
