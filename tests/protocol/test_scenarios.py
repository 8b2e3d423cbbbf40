"""Named recovery scenarios of seed 000, each asserted on the fake world's physical state."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from airflow_provider_dpone.contracts.authority_codec import decode, encode
from airflow_provider_dpone.contracts.authority_external import ExternalAuthorityRecord
from airflow_provider_dpone.contracts.authority_phases import MemberStage, Phase
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.protocol.results import Committed, Completed, InProgress
from tests.fakes.faults import FaultKind
from tests.fakes.publication import content_digest
from tests.fakes.records import internal_v1
from tests.protocol.sim import BASELINE_ROWS, COLUMNS, NEW_ROWS, RETRY_DELAY_MS, Sim


def _point(sim: Sim, name: str, occurrence: int = 0) -> int:
    """Index of the ``occurrence``-th fault point called ``name`` in a fault-free run of the same scenario."""
    clean = Sim.build(members=len(sim.world.members), baseline=sim.baseline, rows=sim.rows)
    assert clean.run_dag() == "completed"
    return [i for i, n in enumerate(clean.world.faults.trace) if n == name][occurrence]


def _code(call: object) -> str:
    with pytest.raises(DponeError) as raised:
        call()  # type: ignore[operator]
    return raised.value.code


def _rows(sim: Sim, member: int, name: str) -> Counter[tuple[object, ...]] | None:
    table = sim.world.table(sim.world.members[member], name)
    return None if table is None else Counter(table.rows)


def test_lost_load_response_on_member_1_is_resolved_by_observation_without_a_second_insert() -> None:
    sim = Sim.build()
    sim.world.faults.schedule([(_point(sim, "member.load"), FaultKind.LOSE_RESPONSE)])
    assert sim.run_dag(tries=1) == "completed"
    assert sim.world.calls["member.load"] == 2  # one load per member, none repeated
    assert all(member.rebuilds == 0 for member in sim.record().members)
    sim.check_converged()


def test_naive_retry_of_a_lost_load_would_duplicate_rows() -> None:
    """Baseline of the measurable claim: the fake (like MergeTree) does not deduplicate a repeated insert."""
    sim = Sim.build()
    service = sim.service()
    service.fence()
    service.stage(sim.source)
    record = sim.record()
    member = sim.world.members[0]
    session = sim.world.ports().sessions.session(sim.service()._begin()[0].inventory.member(member.member_id))
    handle = sim.world.ports().artifacts.open(record.artifact)  # type: ignore[arg-type]
    uuid = record.member(member.member_id).candidate_uuid
    session.load(sim.world.database, sim.request.candidate_name, uuid, handle, query_id="q", dedup_token="t")  # type: ignore[arg-type]
    assert _rows(sim, 0, sim.request.candidate_name) == Counter(NEW_ROWS * 2)


def test_crash_after_create_before_candidate_cas_adopts_only_the_intended_uuid() -> None:
    sim = Sim.build()
    sim.world.faults.schedule([(_point(sim, "member.create"), FaultKind.CRASH_AFTER)])
    assert sim.run_dag(tries=2) == "completed"
    record = sim.record()
    first = record.members[0]
    assert first.owned_candidate_uuids == (first.candidate_uuid,)  # the table created before the crash was bound
    assert sim.world.calls["member.create"] == 2 and first.rebuilds == 0
    sim.check_converged()


def test_partial_load_triggers_exact_drop_and_rebuild_never_append() -> None:
    sim = Sim.build(members=3)
    sim.world.faults.schedule([(_point(sim, "member.load", 1), FaultKind.PARTIAL)])
    assert sim.run_dag(tries=1) == "completed"
    record = sim.record()
    second = record.members[1]
    assert second.rebuilds == 1 and len(second.owned_candidate_uuids) == 2
    drops = [e for e in sim.world.effects if e.op == "drop" and e.via == "member"]
    assert [d.uuid for d in drops] == [second.owned_candidate_uuids[0]]
    sim.check_converged()


def test_member_paused_during_exchange_is_in_progress_then_completes_after_resume() -> None:
    sim = Sim.build(members=3)
    service = sim.service()
    service.fence()
    service.stage(sim.source)
    paused = sim.world.members[2]
    paused.paused = True
    result = sim.service().publish()
    assert isinstance(result, InProgress) and result.pending_members == (paused.member_id,)
    assert _rows(sim, 0, "target_table") == Counter(NEW_ROWS)  # partial: two members already switched
    assert _rows(sim, 2, "target_table") == Counter(BASELINE_ROWS)
    assert _code(lambda: sim.service().cleanup()) == "DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY"
    for _ in range(3):
        sim.world.clock.advance(RETRY_DELAY_MS)  # long past the quiet period: still never redispatched
        result = sim.service().reconcile_publication()
        assert isinstance(result, InProgress) and not result.redispatch_due
        result = sim.service().publish()
        assert isinstance(result, InProgress)
    assert sim.world.calls["ddl.dispatch"] == 1
    sim.world.resume(paused)
    committed = sim.service().reconcile_publication()
    assert isinstance(committed, Committed)
    sim.check_success(committed)
    completed = sim.service().cleanup()
    assert isinstance(completed, Completed)
    sim.check_converged()


def test_lost_exchange_response_commits_from_the_bound_queue_entry() -> None:
    sim = Sim.build()
    sim.world.faults.schedule([(_point(sim, "ddl.dispatch"), FaultKind.LOSE_RESPONSE)])
    assert sim.run_dag(tries=1) == "completed"
    assert sim.world.calls["ddl.dispatch"] == 2  # one exchange, one cleanup drop
    record = sim.record()
    assert record.publication is not None and record.publication.entry == "query-0000000000"
    assert record.publication.abandoned == ()
    sim.check_converged()


def test_lost_cleanup_response_completes_by_observation() -> None:
    sim = Sim.build()
    sim.world.faults.schedule([(_point(sim, "ddl.dispatch", 1), FaultKind.LOSE_RESPONSE)])
    assert sim.run_dag(tries=1) == "completed"
    assert sim.world.calls["ddl.dispatch"] == 2
    assert sim.record().cleanup is not None and sim.record().cleanup.entry == "query-0000000001"  # type: ignore[union-attr]
    sim.check_converged()


def test_crash_after_permit_before_dispatch_voids_the_permit_only_after_the_quiet_period() -> None:
    sim = Sim.build()
    sim.world.faults.schedule([(_point(sim, "ddl.dispatch"), FaultKind.CRASH_BEFORE)])
    sim.service().fence()
    sim.service().stage(sim.source)
    with pytest.raises(BaseException, match="simulated crash"):
        sim.service().publish()
    first = sim.record().publication
    assert first is not None and sim.record().phase is Phase.PUBLICATION_DISPATCHING
    early = sim.service().publish()
    assert isinstance(early, InProgress) and not early.redispatch_due  # no entry yet, quiet period not over
    assert sim.world.calls["ddl.dispatch"] == 1
    sim.world.clock.advance(RETRY_DELAY_MS)
    assert isinstance(sim.service().reconcile_publication(), InProgress)  # a poller never dispatches
    assert isinstance(sim.service().publish(), Committed)
    second = sim.record().publication
    assert second is not None and second.epoch == first.epoch + 1
    assert second.abandoned == (first.correlation_token,)
    assert [entry.token for entry in sim.world.queue] == [second.correlation_token]


def test_second_run_racing_an_unresolved_one_is_fenced_and_touches_nothing() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    rival = sim.request.model_copy(update={"run_id": "manual__rival"})
    version_before = sim.world.keeper[sim.request.target_key][1]
    effects_before = len(sim.world.effects)
    for call in (lambda: sim.service(rival).fence(), lambda: sim.service(rival).stage(sim.source)):
        assert _code(call) == "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED"
    assert _code(lambda: sim.service(rival).publish()) == "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED"
    assert sim.world.keeper[sim.request.target_key][1] == version_before
    assert len(sim.world.effects) == effects_before
    assert sim.run_dag() == "completed"
    # once the first is COMPLETED, the rival takes the slot by versioned CAS and publishes its own generation
    rival_sim = Sim.successor(sim, run_id="manual__rival", rows=((20, "rival"),))
    assert rival_sim.request == rival
    assert rival_sim.run_dag() == "completed"
    rival_sim.check_converged()
    record = rival_sim.record()
    assert record.operation_id == rival.operation_id and record.previous_operation_id == sim.request.operation_id
    assert _rows(rival_sim, 1, "target_table") == Counter([(20, "rival")])


def test_inventory_drift_fences_the_operation_until_the_topology_returns() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    extra = sim.world.add_member(3)
    effects = len(sim.world.effects)
    assert _code(lambda: sim.service().publish()) == "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_DRIFT"
    assert _code(lambda: sim.service().fence()) == "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_DRIFT"
    assert sim.world.calls["ddl.dispatch"] == 0 and len(sim.world.effects) == effects
    sim.world.members.remove(extra)
    assert sim.run_dag() == "completed"
    sim.check_converged()


def test_inventory_drift_can_be_resolved_by_abort_before_publication_and_a_new_run() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    scaled_out = sim.world.add_member(3)
    sim.world.put_table(scaled_out, "target_table", COLUMNS, BASELINE_ROWS)  # the new replica was seeded with a copy
    assert sim.service().abort().phase == "ABORTED"
    assert all(sim.world.table(m, sim.request.candidate_name) is None for m in sim.world.members)
    assert _code(lambda: sim.service().fence()) == "DPONE_CLICKHOUSE_CLUSTER_OPERATION_ABORTED"
    assert {e.op for e in sim.world.effects} == {"create", "load", "drop"}  # only the owned candidates were touched
    fresh = Sim.successor(sim, run_id="manual__after_abort", rows=NEW_ROWS)
    assert fresh.run_dag() == "completed"
    assert len(fresh.record().members) == 3
    fresh.check_converged()


def test_abort_is_refused_after_publication() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    sim.service().publish()
    assert _code(lambda: sim.service().abort()) == "DPONE_CLICKHOUSE_CLUSTER_ABORT_AFTER_PUBLICATION"


def test_existing_equal_targets_are_adopted_as_the_baseline() -> None:
    sim = Sim.build(members=3)
    predecessors = [sim.world.table(m, "target_table").uuid for m in sim.world.members]  # type: ignore[union-attr]
    sim.service().fence()
    sim.service().stage(sim.source)
    record = sim.record()
    assert record.baseline == "existing"
    assert [m.target_uuid for m in record.members] == [
        sim.world.table(sim.world.member(m.member_id), "target_table").uuid
        for m in record.members  # type: ignore[union-attr]
    ]
    assert len(set(predecessors)) == 3
    assert {m.target_content_digest for m in record.members} == {content_digest(COLUMNS, BASELINE_ROWS)}
    assert sim.run_dag() == "completed"
    assert not any(sim.world.table(m, sim.request.candidate_name) for m in sim.world.members)
    sim.check_converged()


def test_divergent_existing_targets_block_before_any_mutation() -> None:
    sim = Sim.build()
    sim.world.table(sim.world.members[1], "target_table").rows.append((3, "drift"))  # type: ignore[union-attr]
    sim.service().fence()
    assert _code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT"
    assert sim.world.effects == [] and sim.record().phase is Phase.LOCKED


def test_target_present_on_some_members_only_blocks() -> None:
    sim = Sim.build(baseline=None)
    sim.world.put_table(sim.world.members[0], "target_table", COLUMNS, BASELINE_ROWS)
    sim.service().fence()
    assert _code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT"


def test_replicated_existing_target_is_refused_in_external_mode() -> None:
    sim = Sim.build()
    for member in sim.world.members:
        sim.world.table(member, "target_table").engine = "ReplicatedMergeTree"  # type: ignore[union-attr]
    sim.service().fence()
    assert _code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED"


@pytest.mark.parametrize("existing", [True, False])
def test_empty_input_publishes_a_verified_empty_generation(existing: bool) -> None:
    sim = Sim.build(rows=(), baseline=BASELINE_ROWS if existing else None)
    assert sim.run_dag(tries=1) == "completed"
    record = sim.record()
    assert record.artifact is not None and record.artifact.row_count == 0
    assert record.artifact.content_digest == content_digest(COLUMNS, ())
    assert all(m.row_count == 0 and m.stage is MemberStage.READY for m in record.members)
    sim.check_converged()


def test_unsupported_artifact_aborts_before_member_mutation() -> None:
    sim = Sim.build()
    sim.service().fence()
    source = sim.world.source(COLUMNS, NEW_ROWS, replayable=False)
    assert _code(lambda: sim.service().stage(source)) == "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_UNSUPPORTED"
    record = sim.record()
    assert record.phase is Phase.ABORTED and record.last_error is not None
    assert sim.world.effects == []
    oversized = sim.request.model_copy(update={"run_id": "r2", "max_source_bytes": 10})
    sim.service(oversized).fence()
    assert _code(lambda: sim.service(oversized).stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_UNSUPPORTED"


def test_foreign_table_under_the_candidate_name_is_never_adopted_or_dropped() -> None:
    sim = Sim.build()
    foreign = sim.world.put_table(sim.world.members[1], sim.request.candidate_name, COLUMNS, NEW_ROWS)
    assert sim.run_dag(tries=1).endswith("DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_FOREIGN")
    assert sim.world.table(sim.world.members[1], sim.request.candidate_name) is foreign
    assert sim.record().last_error is not None
    assert sim.record().last_error.code == "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_FOREIGN"  # type: ignore[union-attr]
    assert not any(e.uuid == foreign.uuid for e in sim.world.effects)


def test_terminal_mixed_publication_fails_closed_and_retains_everything() -> None:
    sim = Sim.build(members=3)
    sim.world.members[1].ddl_fails = True
    outcome = sim.run_dag(tries=1)
    assert outcome == "stopped at publish: DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_MIXED"
    sim.world.members[1].ddl_fails = False
    assert sim.run_dag() == "stopped at publish: DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_MIXED"  # never re-dispatched
    assert sim.world.calls["ddl.dispatch"] == 1
    assert _rows(sim, 0, "target_table") == Counter(NEW_ROWS)
    assert _rows(sim, 1, "target_table") == Counter(BASELINE_ROWS)
    assert all(sim.world.table(m, sim.request.candidate_name) is not None for m in sim.world.members)
    assert sim.successes == 0
    sim.check_invariants()


def test_missing_queue_evidence_fails_closed_even_if_members_look_done() -> None:
    sim = Sim.build()
    sim.world.faults.schedule([(_point(sim, "ddl.dispatch"), FaultKind.CRASH_AFTER)])
    assert sim.run_dag(tries=1).startswith("stopped at publish")
    sim.world.queue.clear()  # the queue entry expired
    assert sim.run_dag() == "stopped at publish: DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_EVIDENCE_MISSING"
    assert sim.successes == 0


def test_target_replaced_after_staging_blocks_publication() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    member = sim.world.members[0]
    del member.tables[(sim.world.database, "target_table")]
    sim.world.put_table(member, "target_table", COLUMNS, BASELINE_ROWS)
    assert _code(lambda: sim.service().publish()) == "DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT"
    assert sim.world.calls["ddl.dispatch"] == 0


def test_unresolved_internal_record_blocks_external_mode_and_a_completed_one_is_succeeded() -> None:
    sim = Sim.build()
    sim.world.keeper[sim.request.target_key] = (encode(internal_v1(Phase.STAGED)), 5)
    assert _code(lambda: sim.service().fence()) == "DPONE_CLICKHOUSE_CLUSTER_INTERNAL_RECORD_UNRESOLVED"
    sim.world.keeper[sim.request.target_key] = (encode(internal_v1(Phase.COMPLETED)), 6)
    assert sim.run_dag() == "completed"
    record = decode(sim.world.keeper[sim.request.target_key][0])
    assert isinstance(record, ExternalAuthorityRecord)
    assert record.previous_schema == "dpone.clickhouse.cluster-full-refresh.v1"
    assert record.dispatch_epoch > 4  # epochs stay monotonic across the mode migration


def test_completed_operation_is_idempotent() -> None:
    sim = Sim.build()
    assert sim.run_dag() == "completed"
    effects, version = len(sim.world.effects), sim.world.keeper[sim.request.target_key][1]
    first = sim.service().cleanup()
    again = sim.service().publish()
    assert isinstance(first, Completed) and isinstance(again, Committed)
    assert first.receipt == sim.service().cleanup().receipt
    assert sim.service().fence().phase == "COMPLETED"
    assert sim.service().stage(sim.source).phase == "COMPLETED"
    assert len(sim.world.effects) == effects and sim.world.keeper[sim.request.target_key][1] == version
    assert sim.source.seals == 1  # the source is read once per operation


def test_source_is_never_reread_once_an_artifact_is_bound() -> None:
    sim = Sim.build()
    sim.world.faults.schedule([(_point(sim, "member.load", 1), FaultKind.CRASH_BEFORE)])
    assert sim.run_dag(tries=3) == "completed"
    assert sim.source.seals == 1


def test_tampered_artifact_stops_staging() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.world.faults.schedule([(_point(sim, "member.load"), FaultKind.CRASH_BEFORE)])
    with pytest.raises(BaseException, match="simulated crash"):
        sim.service().stage(sim.source)
    artifact = next(iter(sim.world.artifacts.values()))
    artifact.data = artifact.data + b" "
    assert _code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_INVALID"


def test_every_dispatch_carries_the_fixed_settings_and_its_bound_token() -> None:
    sim = Sim.build()
    assert sim.run_dag() == "completed"
    record = sim.record()
    assert record.publication is not None and record.cleanup is not None
    tokens = [record.publication.correlation_token, record.cleanup.correlation_token]
    assert [s.correlation_token for s in sim.world.dispatched] == tokens
    for settings, binding in zip(sim.world.dispatched, (record.publication, record.cleanup), strict=True):
        assert settings.distributed_ddl_output_mode == "throw" and settings.skip_unavailable_shards == 0
        assert settings.query_digest == binding.query_digest
        comment = json.loads(settings.log_comment)
        assert comment == {
            "dpone": "cluster-external-full-refresh",
            "epoch": binding.epoch,
            "operation": record.operation_id[:16],
            "token": binding.correlation_token,
        }


def test_abort_applies_only_to_this_runs_operation_and_is_idempotent() -> None:
    sim = Sim.build()
    assert _code(lambda: sim.service().abort()) == "DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY"
    sim.service().fence()
    rival = sim.request.model_copy(update={"run_id": "manual__rival"})
    assert _code(lambda: sim.service(rival).abort()) == "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED"
    assert sim.service().abort().phase == "ABORTED"
    version = sim.world.keeper[sim.request.target_key][1]
    assert sim.service().abort().phase == "ABORTED"
    assert sim.world.keeper[sim.request.target_key][1] == version
    assert sim.service(rival).fence().phase == "LOCKED"  # ABORTED is terminal: a new operation takes the slot
