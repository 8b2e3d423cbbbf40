"""Coexistence and migration of the two record versions in one target-key namespace (seed 000 "Compatibility and
migration", ADR 0069): an unresolved record of one mode blocks the other mode and stays recoverable under its own
rules; a terminal record of one mode is succeeded by the other mode only by a versioned CAS that records the
predecessor, after the physical truth it left was observed on every member. Every transition runs real operations of
both modes on one fake world whose ``internal_replication`` flag flips with the mode, as the cluster's would."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from airflow_provider_dpone.cluster.protocol.results import InProgress
from airflow_provider_dpone.cluster.values.authority.codec import decode, encode
from airflow_provider_dpone.cluster.values.authority.external import ExternalAuthorityRecord
from airflow_provider_dpone.cluster.values.authority.internal import (
    INTERNAL_SCHEMA_V1,
    INTERNAL_SCHEMA_V2,
    InternalAuthorityRecordV1,
    InternalAuthorityRecordV2,
)
from airflow_provider_dpone.cluster.values.authority.phases import TERMINAL_PHASES, Phase
from airflow_provider_dpone.cluster.values.identities import PROTOCOL_VERSION
from airflow_provider_dpone.cluster.values.quality_capsule import QualityBinding
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.support.cluster.sim import (
    BASELINE_ROWS,
    COLUMNS,
    CREATE_WINDOW_MS,
    NEW_ROWS,
    Sim,
    error_code,
    point_of,
    rows_of,
)
from tests.support.fakes.faults import FaultKind, SimulatedCrash
from tests.support.fakes.records import capsule

pytestmark = pytest.mark.protocol

OTHER: dict[ReplicationMode, ReplicationMode] = {"internal": "external", "external": "internal"}
BLOCKED_BY: dict[ReplicationMode, str] = {
    "internal": "DPONE_CLICKHOUSE_CLUSTER_INTERNAL_RECORD_UNRESOLVED",
    "external": "DPONE_CLICKHOUSE_CLUSTER_EXTERNAL_RECORD_UNRESOLVED",
}
SECOND_ROWS = ((30, "second-30"), (31, "second-31"))


def hold_in(sim: Sim, phase: Phase) -> Callable[[], None]:
    """Drive the operation of ``sim`` to ``phase`` and leave it there; returns what lets it continue."""
    world = sim.world
    paused = world.members[-1]
    if phase is Phase.STAGING:
        world.faults.schedule([(point_of(sim, "member.load"), FaultKind.CRASH_BEFORE)])
    sim.service().fence()
    if phase is Phase.STAGING:
        with pytest.raises(SimulatedCrash):  # the planned crash before the first load
            sim.service().stage(sim.source)
    elif phase is not Phase.LOCKED:
        sim.service().stage(sim.source)
    if phase in (Phase.PUBLICATION_DISPATCHING, Phase.COMMITTED, Phase.CLEANUP_DISPATCHING):
        paused.paused = phase is Phase.PUBLICATION_DISPATCHING
        assert isinstance(sim.service().publish(), InProgress) == paused.paused
    if phase is Phase.CLEANUP_DISPATCHING:
        paused.paused = True
        assert isinstance(sim.service().cleanup(), InProgress)
    assert sim.record().phase is phase

    def resume() -> None:
        world.faults.disable()
        world.resume(paused)

    return resume


def test_a_completed_internal_operation_is_succeeded_by_external_mode_after_its_physical_truth() -> None:
    first = Sim.build(members=3, mode="internal")
    assert first.run_dag() == "completed"
    internal = first.record()
    replicated = first.world.table(first.world.members[0], "target_table")
    assert replicated is not None and replicated.replica is not None
    second = Sim.successor(first, run_id="scheduled__2026-09-19", rows=SECOND_ROWS, mode="external")
    assert second.run_dag() == "completed"
    second.check_converged()
    record = second.record()
    assert isinstance(record, ExternalAuthorityRecord)
    assert (record.previous_schema, record.previous_operation_id) == (INTERNAL_SCHEMA_V1, internal.operation_id)
    assert record.baseline == "existing"
    assert {m.target_uuid for m in record.members} == {replicated.uuid}  # the replicas' shared UUID, adopted
    assert record.dispatch_epoch > internal.dispatch_epoch  # epochs stay monotonic across the migration
    assert replicated.replica.log.path not in second.world.replicated_logs  # the replicated predecessor is gone
    assert all(second.world.table(m, "target_table").replica is None for m in second.world.members)  # type: ignore[union-attr]


def test_a_completed_external_operation_is_succeeded_by_internal_mode_after_its_physical_truth() -> None:
    first = Sim.build(members=2, mode="external")
    assert first.run_dag() == "completed"
    external = first.record()
    second = Sim.successor(first, run_id="scheduled__2026-09-19", rows=SECOND_ROWS, mode="internal")
    assert second.run_dag() == "completed"
    second.check_converged()
    record = second.record()
    assert isinstance(record, InternalAuthorityRecordV1)
    assert (record.previous_schema, record.previous_operation_id) == (PROTOCOL_VERSION, external.operation_id)
    assert [m.target_uuid for m in record.members] == [m.candidate_uuid for m in external.members]
    targets = [second.world.table(m, "target_table") for m in second.world.members]
    assert all(t is not None and t.replica is not None for t in targets)  # now one replicated table
    assert len({t.uuid for t in targets if t is not None}) == 1


@pytest.mark.parametrize("holder", ["internal", "external"])
@pytest.mark.parametrize("phase", [phase for phase in Phase if phase not in TERMINAL_PHASES | {Phase.ABORTING}])
def test_an_unresolved_record_blocks_the_other_mode_and_resumes_under_its_own_rules(
    holder: ReplicationMode, phase: Phase
) -> None:
    first = Sim.build(members=2, mode=holder)
    resume = hold_in(first, phase)
    row, version = first.world.keeper[first.request.target_key]
    effects = len(first.world.effects)
    other = Sim.successor(first, run_id="manual__other_mode", rows=SECOND_ROWS, mode=OTHER[holder])
    for call in (lambda: other.service().fence(), lambda: other.service().stage(other.source)):
        assert error_code(call) == BLOCKED_BY[holder]
    assert error_code(lambda: other.service().abort()) == "DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY"
    assert first.world.keeper[first.request.target_key] == (row, version) and len(first.world.effects) == effects
    first.world.internal_replication = holder == "internal"  # the topology the holder was admitted on
    resume()
    assert first.run_dag() == "completed"  # resumed or cleaned up under its own mode's rules
    first.check_converged()
    other = Sim.successor(first, run_id="manual__other_mode", rows=SECOND_ROWS, mode=OTHER[holder])
    assert other.run_dag() == "completed"
    other.check_converged()


@pytest.mark.parametrize("holder", ["internal", "external"])
def test_an_aborting_record_blocks_the_other_mode_until_its_abort_finishes(holder: ReplicationMode) -> None:
    first = Sim.build(members=2, mode=holder)
    hold_in(first, Phase.STAGED)
    first.world.faults.at_next("member.drop", FaultKind.CRASH_BEFORE)
    with pytest.raises(SimulatedCrash):
        first.service().abort()
    assert first.record().phase is Phase.ABORTING
    other = Sim.successor(first, run_id="manual__other_mode", rows=SECOND_ROWS, mode=OTHER[holder])
    assert error_code(lambda: other.service().fence()) == BLOCKED_BY[holder]
    first.world.internal_replication = holder == "internal"
    first.world.clock.advance(CREATE_WINDOW_MS)  # no candidate CREATE of a stage try can still arrive
    assert first.service().abort().phase == "ABORTED"
    other = Sim.successor(first, run_id="manual__other_mode", rows=SECOND_ROWS, mode=OTHER[holder])
    assert other.run_dag() == "completed"
    other.check_converged()


@pytest.mark.parametrize("holder", ["internal", "external"])
def test_an_aborted_record_is_succeeded_by_the_other_mode(holder: ReplicationMode) -> None:
    first = Sim.build(members=3, mode=holder)
    hold_in(first, Phase.STAGED)
    first.world.clock.advance(CREATE_WINDOW_MS)  # no candidate CREATE of a stage try can still arrive
    assert first.service().abort().phase == "ABORTED"
    second = Sim.successor(first, run_id="manual__after_abort", rows=SECOND_ROWS, mode=OTHER[holder])
    assert second.run_dag() == "completed"
    second.check_converged()
    assert second.record().previous_operation_id == first.request.operation_id


def test_a_target_changed_since_the_internal_commit_blocks_the_migration_without_a_cas() -> None:
    first = Sim.build(members=2, mode="internal")
    assert first.run_dag() == "completed"
    member = first.world.members[1]
    first.world.drop_on(member, first.world.database, "target_table")
    first.world.put_table(member, "target_table", COLUMNS, NEW_ROWS, engine="ReplicatedMergeTree")
    row = first.world.keeper[first.request.target_key]
    second = Sim.successor(first, run_id="scheduled__2026-09-19", rows=SECOND_ROWS, mode="external")
    assert error_code(lambda: second.service().fence()) == "DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT"
    assert first.world.keeper[first.request.target_key] == row


def test_a_migration_needs_the_members_the_previous_operation_bound() -> None:
    first = Sim.build(members=2, mode="external")
    assert first.run_dag() == "completed"
    first.world.add_member(3)
    row = first.world.keeper[first.request.target_key]
    second = Sim.successor(first, run_id="scheduled__2026-09-19", rows=SECOND_ROWS, mode="internal")
    assert error_code(lambda: second.service().fence()) == "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_DRIFT"
    assert first.world.keeper[first.request.target_key] == row


def rewrite_as_v2(sim: Sim, quality: QualityBinding | None = None) -> None:
    """The operation's v1 record rewritten as the v2 a provider with quality evidence would write (next version)."""
    key = sim.request.target_key
    v1 = decode(sim.world.keeper[key][0])
    assert isinstance(v1, InternalAuthorityRecordV1)
    values = {name: getattr(v1, name) for name in type(v1).model_fields if name != "schema_"}
    v2 = InternalAuthorityRecordV2.model_validate({**values, "quality": quality})
    sim.world.keeper[key] = (encode(v2), sim.world.keeper[key][1] + 1)


def test_a_completed_v2_internal_record_is_succeeded_and_named_as_the_predecessor() -> None:
    first = Sim.build(members=2, mode="internal")
    assert first.run_dag() == "completed"
    rewrite_as_v2(first, capsule("COMPLETE"))
    second = Sim.successor(first, run_id="scheduled__2026-09-19", rows=SECOND_ROWS, mode="external")
    assert second.run_dag() == "completed"
    assert second.record().previous_schema == INTERNAL_SCHEMA_V2
    assert rows_of(second, 1, "target_table") == Counter(SECOND_ROWS)


def test_a_v2_internal_operation_left_mid_flight_resumes_as_v2() -> None:
    """A record another provider version wrote as v2 is resumed under the same rules and never downgraded."""
    sim = Sim.build(members=2, mode="internal")
    hold_in(sim, Phase.STAGED)
    rewrite_as_v2(sim)
    assert sim.run_dag() == "completed"
    record = sim.record()
    assert isinstance(record, InternalAuthorityRecordV2) and record.phase is Phase.COMPLETED
    sim.check_converged()


@pytest.mark.parametrize("kind", [FaultKind.LOSE_RESPONSE, FaultKind.CRASH_AFTER, FaultKind.CRASH_BEFORE])
def test_a_fault_at_the_migration_cas_resumes_by_observation(kind: FaultKind) -> None:
    first = Sim.build(members=2, mode="internal", baseline=BASELINE_ROWS)
    assert first.run_dag() == "completed"
    second = Sim.successor(first, run_id="scheduled__2026-09-19", rows=SECOND_ROWS, mode="external")
    second.world.faults = type(second.world.faults)()
    # the first write of the new run after the fence's exchange probe is the migration CAS
    second.world.faults.schedule([(2 * len(second.world.members) * 2 + len(second.world.members), kind)])
    assert second.run_dag(tries=1) != "completed"
    assert second.world.faults.fired and second.world.faults.fired[0][1] == "authority.cas"
    second.world.faults.disable()
    assert second.run_dag() == "completed"
    second.check_converged()
    assert second.record().previous_schema == INTERNAL_SCHEMA_V1
