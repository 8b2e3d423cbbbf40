"""Route-level admission and custody behaviour on the fake source: refusals before extraction, drift before EOF,
replica scope, lease renewal and fencing of a writer that lost its lease."""

from __future__ import annotations

import json

import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer_options import NativeTransferOptions
from airflow_provider_dpone.transfer.values.raw_snapshot_physical import MAX_PARTS
from airflow_provider_dpone.transfer.values.source_observation import ReplicaObservation, RowPolicyObservation
from airflow_provider_dpone.transfer.values.target import TargetTable
from tests.support.fakes.transfer_source import FakePart
from tests.support.transfer.native_route_harness import LEASE, OPERATION, Harness, make_harness, multiset

pytestmark = pytest.mark.protocol

POLICY = RowPolicyObservation(
    policy_id="7",
    name="p",
    select_filter="1",
    is_restrictive=False,
    apply_to_all=True,
    apply_to_list=(),
    apply_to_except=(),
)


def kinds(harness: Harness) -> list[str]:
    directory = harness.root / OPERATION / "journal"
    return [json.loads(p.read_bytes())["kind"] for p in sorted(directory.iterdir())]


def refused_before_extraction(harness: Harness) -> str:
    with pytest.raises(DponeError) as info:
        harness.run()
    assert "plan" not in kinds(harness) and harness.target.calls.count("prepare") == 0
    assert kinds(harness)[-1] == "lease", "a clean refusal releases the lease"
    return info.value.code


def test_pending_mutations_are_refused(tmp_path) -> None:
    harness = make_harness(tmp_path)
    harness.source.tables[("db", "events")].pending_mutations = 1
    assert refused_before_extraction(harness) == "native_transfer.source_read_profile_unsupported"


def test_uninspectable_policies_are_refused(tmp_path) -> None:
    harness = make_harness(tmp_path)
    harness.source.server.policies_inspectable = False
    assert refused_before_extraction(harness) == "native_transfer.source_read_profile_unsupported"


def test_a_profile_constraint_that_overrides_a_frozen_setting_is_refused(tmp_path) -> None:
    harness = make_harness(tmp_path)
    harness.source.server.constrained.add("max_parallel_replicas")
    assert refused_before_extraction(harness) == "native_transfer.source_read_profile_unsupported"


def test_target_mapping_loss_is_refused_before_extraction(tmp_path) -> None:
    harness = make_harness(tmp_path)
    harness.target.table = TargetTable(target_schema="dbo", table="__dpone_reserved")
    assert refused_before_extraction(harness) == "native_transfer.target_plan_invalid"
    assert harness.target.calls == ["admit"]


def test_part_cap_is_enforced_before_data_io(tmp_path) -> None:
    harness = make_harness(tmp_path)
    table = harness.source.tables[("db", "events")]
    table.parts.extend(FakePart(f"all_{i}_{i}_1", "all", [], level=1) for i in range(100, 100 + MAX_PARTS))
    with pytest.raises(DponeError) as info:
        harness.run()
    assert info.value.code == "native_transfer.source_part_cap_exceeded"
    assert harness.target.calls.count("prepare") == 0


def test_policy_drift_before_eof_fails_the_invocation(tmp_path) -> None:
    harness = make_harness(tmp_path)

    def add_policy(point: str) -> None:
        if point == "admitted":
            harness.source.tables[("db", "events")].policies.append(POLICY)

    with pytest.raises(DponeError) as info:
        harness.run(add_policy)
    assert info.value.code == "native_transfer.source_snapshot_drift"
    assert kinds(harness)[-2:] == ["invocation_settled", "lease"]


def replicated(harness: Harness, scope: str) -> None:
    table = harness.source.tables[("db", "events")]
    table.engine, table.engine_args = "ReplicatedReplacingMergeTree", "'/ch/events', '{replica}', ver, is_deleted"
    table.replica = ReplicaObservation(present=True, replica_name="r1", zookeeper_path="/ch/events", replica_path="/r1")
    harness.options = NativeTransferOptions.model_validate(
        {"source_snapshot": {"mode": "exact_raw_rows", "replica_scope": scope}}
    )


def test_connected_replica_binds_its_identity(tmp_path) -> None:
    harness = make_harness(tmp_path)
    replicated(harness, "connected_replica")

    def degrade(point: str) -> None:
        if point == "admitted":
            table = harness.source.tables[("db", "events")]
            table.replica = table.replica.model_copy(update={"is_readonly": True})

    result = harness.run(degrade)
    assert multiset(harness.target.rows()) == harness.source_rows() and result.rows == 7
    records = [json.loads(p.read_bytes()) for p in sorted((tmp_path / OPERATION / "journal").iterdir())]
    profile = next(r for r in records if r["kind"] == "stage_complete")["body"]["completion_metadata"][
        "source_snapshot_v1"
    ]["profile"]
    assert profile["replica"]["scope"] == "connected_replica" and profile["replica"]["identity_sha256"]
    assert profile["engine"]["replicated"] is True


def test_replica_identity_change_before_eof_is_drift(tmp_path) -> None:
    harness = make_harness(tmp_path)
    replicated(harness, "connected_replica")

    def switch(point: str) -> None:
        if point == "admitted":
            table = harness.source.tables[("db", "events")]
            table.replica = table.replica.model_copy(update={"replica_name": "r2"})

    with pytest.raises(DponeError) as info:
        harness.run(switch)
    assert info.value.code == "native_transfer.source_snapshot_drift"


@pytest.mark.parametrize(
    "change",
    [{"macros": (("replica", "r2"), ("shard", "1"))}, {"server_uuid": "0" * 8 + "-0000-0000-0000-" + "0" * 11 + "1"}],
)
def test_another_server_answering_at_eof_is_endpoint_drift(tmp_path, change) -> None:
    """A failover between admission and EOF: same relation and data, another server identity."""
    harness = make_harness(tmp_path)

    def fail_over(point: str) -> None:
        if point == "admitted":
            for name, value in change.items():
                setattr(harness.source.server, name, value)

    with pytest.raises(DponeError) as info:
        harness.run(fail_over)
    assert info.value.code == "native_transfer.source_endpoint_drift"
    assert kinds(harness)[-2:] == ["invocation_settled", "lease"] and not harness.target.rows()


def test_an_unpinned_endpoint_is_refused_before_extraction(tmp_path) -> None:
    harness = make_harness(tmp_path)
    server = harness.source.server
    server.transport = server.transport.model_copy(update={"pinned": False})
    assert refused_before_extraction(harness) == "native_transfer.replica_scope_unproven"


def test_replicated_engine_needs_connected_replica(tmp_path) -> None:
    harness = make_harness(tmp_path)
    replicated(harness, "single_server")
    assert refused_before_extraction(harness) == "native_transfer.replica_scope_unproven"


def test_a_long_extraction_renews_its_lease(tmp_path) -> None:
    harness = make_harness(tmp_path)

    def slow(point: str) -> None:
        if point == "chunk_sealed":
            harness.clock.advance(LEASE * 0.3)

    harness.run(slow)
    records = [json.loads(p.read_bytes()) for p in sorted((tmp_path / OPERATION / "journal").iterdir())]
    actions = [r["body"]["action"] for r in records if r["kind"] == "lease"]
    assert actions.count("renewed") >= 2 and actions[-1] == "released"
    assert multiset(harness.target.rows()) == harness.source_rows()


def test_a_writer_that_lost_its_lease_stops_without_writing(tmp_path) -> None:
    harness = make_harness(tmp_path)
    outcome: dict[str, object] = {}

    def stall_then_get_fenced(point: str) -> None:
        if point == "chunk_sealed" and "recovery" not in outcome:
            harness.clock.advance(LEASE * 2)
            outcome["recovery"] = harness.run()
            outcome["files"] = sorted(p.name for p in (tmp_path / OPERATION).rglob("*") if p.is_file())

    with pytest.raises(DponeError) as stopped:
        harness.run(stall_then_get_fenced)
    assert stopped.value.code == "native_transfer.journal_conflict"
    files_after = sorted(p.name for p in (tmp_path / OPERATION).rglob("*") if p.is_file())
    assert files_after == outcome["files"], "the fenced writer wrote after losing custody"
    assert multiset(harness.target.rows()) == harness.source_rows()
    assert harness.run().resumed_from.value == "succeeded"
