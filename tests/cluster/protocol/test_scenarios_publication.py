"""Named publication, cleanup and fencing scenarios of seed 000, asserted on the fake world's physical state."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable

import pytest

from airflow_provider_dpone.cluster.ports import TableObservation, TableRead
from airflow_provider_dpone.cluster.protocol.results import Committed, Completed, InProgress
from airflow_provider_dpone.cluster.values.authority.codec import encode
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.support.cluster.sim import (
    BASELINE_ROWS,
    COLUMNS,
    CREATE_WINDOW_MS,
    NEW_ROWS,
    RETRY_DELAY_MS,
    Sim,
    error_code,
    point_of,
    rows_of,
    staged_effects,
)
from tests.support.fakes import parts
from tests.support.fakes.faults import SINGLE_FAULT_KINDS, FaultKind, SimulatedCrash
from tests.support.fakes.ports import FakeMemberSession
from tests.support.fakes.records import internal_v1, internal_v2
from tests.support.fakes.world import FakeMember, FakeTable

pytestmark = pytest.mark.protocol


def test_member_paused_during_exchange_is_in_progress_then_completes_after_resume() -> None:
    sim = Sim.build(members=3)
    service = sim.service()
    service.fence()
    service.stage(sim.source)
    paused = sim.world.members[2]
    paused.paused = True
    result = sim.service().publish()
    assert isinstance(result, InProgress) and result.pending_members == (paused.member_id,)
    assert rows_of(sim, 0, "target_table") == Counter(NEW_ROWS)  # partial: two members already switched
    assert rows_of(sim, 2, "target_table") == Counter(BASELINE_ROWS)
    assert error_code(lambda: sim.service().cleanup()) == "DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY"
    for _ in range(3):
        sim.world.clock.advance(RETRY_DELAY_MS)  # long past the quiet period: still never redispatched
        result = sim.service().reconcile_publication()
        assert isinstance(result, InProgress)
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
    sim.world.faults.schedule([(point_of(sim, "ddl.dispatch"), FaultKind.LOSE_RESPONSE)])
    assert sim.run_dag(tries=1) == "completed"
    assert sim.world.calls["ddl.dispatch"] == 2  # one exchange, one cleanup drop
    record = sim.record()
    assert record.publication is not None and record.publication.entry == "query-0000000000"
    sim.check_converged()


def test_lost_cleanup_response_completes_by_observation() -> None:
    sim = Sim.build()
    sim.world.faults.schedule([(point_of(sim, "ddl.dispatch", 1), FaultKind.LOSE_RESPONSE)])
    assert sim.run_dag(tries=1) == "completed"
    assert sim.world.calls["ddl.dispatch"] == 2
    assert sim.record().cleanup is not None and sim.record().cleanup.entry == "query-0000000001"  # type: ignore[union-attr]
    sim.check_converged()


def test_crash_after_permit_before_dispatch_fails_closed_after_the_quiet_period_and_never_redispatches() -> None:
    sim = Sim.build()
    sim.world.faults.schedule([(point_of(sim, "ddl.dispatch"), FaultKind.CRASH_BEFORE)])
    sim.service().fence()
    sim.service().stage(sim.source)
    with pytest.raises(BaseException, match="simulated crash"):
        sim.service().publish()
    first = sim.record().publication
    assert first is not None and sim.record().phase is Phase.PUBLICATION_DISPATCHING
    early = sim.service().publish()
    assert isinstance(early, InProgress) and early.entry is None  # no entry yet, quiet period not over
    sim.world.clock.advance(RETRY_DELAY_MS)
    for call in (lambda: sim.service().reconcile_publication(), lambda: sim.service().publish()):
        assert error_code(call) == "DPONE_CLICKHOUSE_CLUSTER_DISPATCH_UNPROVEN"
    record = sim.record()
    assert record.publication == first and record.dispatch_epoch == first.epoch  # no second permit
    assert record.last_error is not None and record.last_error.code == "DPONE_CLICKHOUSE_CLUSTER_DISPATCH_UNPROVEN"
    assert sim.world.calls["ddl.dispatch"] == 1 and sim.world.queue == []
    assert all(sim.world.table(m, sim.request.candidate_name) is not None for m in sim.world.members)
    assert rows_of(sim, 0, "target_table") == Counter(BASELINE_ROWS)
    assert sim.successes == 0
    sim.check_invariants()


def test_second_run_racing_an_unresolved_one_is_fenced_and_touches_nothing() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    rival = sim.request.model_copy(update={"run_id": "manual__rival"})
    version_before = sim.world.keeper[sim.request.target_key][1]
    effects_before = len(sim.world.effects)
    for call in (lambda: sim.service(rival).fence(), lambda: sim.service(rival).stage(sim.source)):
        assert error_code(call) == "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED"
    assert error_code(lambda: sim.service(rival).publish()) == "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED"
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
    assert rows_of(rival_sim, 1, "target_table") == Counter([(20, "rival")])


def test_inventory_drift_fences_the_operation_until_the_topology_returns() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    extra = sim.world.add_member(3)
    effects = len(sim.world.effects)
    assert error_code(lambda: sim.service().publish()) == "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_DRIFT"
    assert error_code(lambda: sim.service().fence()) == "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_DRIFT"
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
    sim.world.clock.advance(CREATE_WINDOW_MS)  # no candidate CREATE of a stage try can still arrive
    assert sim.service().abort().phase == "ABORTED"
    assert all(sim.world.table(m, sim.request.candidate_name) is None for m in sim.world.members)
    assert error_code(lambda: sim.service().fence()) == "DPONE_CLICKHOUSE_CLUSTER_OPERATION_ABORTED"
    assert {e.op for e in staged_effects(sim)} == {"create", "load", "drop"}  # only the owned candidates were touched
    fresh = Sim.successor(sim, run_id="manual__after_abort", rows=NEW_ROWS)
    assert fresh.run_dag() == "completed"
    assert len(fresh.record().members) == 3
    fresh.check_converged()


def test_abort_is_refused_after_publication() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    sim.service().publish()
    assert error_code(lambda: sim.service().abort()) == "DPONE_CLICKHOUSE_CLUSTER_ABORT_AFTER_PUBLICATION"


def test_terminal_mixed_publication_fails_closed_and_retains_everything() -> None:
    sim = Sim.build(members=3)
    sim.world.members[1].ddl_fails = True
    outcome = sim.run_dag(tries=1)
    assert outcome == "stopped at publish: DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_MIXED"
    sim.world.members[1].ddl_fails = False
    assert sim.run_dag() == "stopped at publish: DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_MIXED"  # never re-dispatched
    assert sim.world.calls["ddl.dispatch"] == 1
    assert rows_of(sim, 0, "target_table") == Counter(NEW_ROWS)
    assert rows_of(sim, 1, "target_table") == Counter(BASELINE_ROWS)
    assert all(sim.world.table(m, sim.request.candidate_name) is not None for m in sim.world.members)
    assert sim.successes == 0
    sim.check_invariants()


def test_missing_queue_evidence_fails_closed_even_if_members_look_done() -> None:
    sim = Sim.build()
    sim.world.faults.schedule([(point_of(sim, "ddl.dispatch"), FaultKind.CRASH_AFTER)])
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
    assert error_code(lambda: sim.service().publish()) == "DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT"
    assert sim.world.calls["ddl.dispatch"] == 0


def test_unresolved_internal_record_blocks_external_mode_and_a_completed_one_needs_its_physical_truth() -> None:
    """A completed internal record is succeeded only after the target it published is observed on every member
    (the positive migrations run real operations of both modes: ``test_mode_migration.py``)."""
    sim = Sim.build()
    sim.world.keeper[sim.request.target_key] = (encode(internal_v1(Phase.STAGED)), 5)
    assert error_code(lambda: sim.service().fence()) == "DPONE_CLICKHOUSE_CLUSTER_INTERNAL_RECORD_UNRESOLVED"
    completed = encode(internal_v1(Phase.COMPLETED))  # its published UUIDs are not what the members expose
    sim.world.keeper[sim.request.target_key] = (completed, 6)
    assert error_code(lambda: sim.service().fence()) == "DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT"
    assert sim.world.keeper[sim.request.target_key] == (completed, 6)  # no CAS without the physical truth
    assert staged_effects(sim) == []


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
    assert error_code(lambda: sim.service().abort()) == "DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY"
    sim.service().fence()
    rival = sim.request.model_copy(update={"run_id": "manual__rival"})
    assert error_code(lambda: sim.service(rival).abort()) == "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED"
    assert sim.service().abort().phase == "ABORTED"
    version = sim.world.keeper[sim.request.target_key][1]
    assert sim.service().abort().phase == "ABORTED"
    assert sim.world.keeper[sim.request.target_key][1] == version
    assert sim.service(rival).fence().phase == "LOCKED"  # ABORTED is terminal: a new operation takes the slot


def test_lost_permit_acknowledgement_never_dispatches_and_the_retry_replaces_the_unsent_permit() -> None:
    """The permit's dispatch was never recorded, so it was never sent: the retry takes a new permit and dispatches
    once (a lost acknowledgement of the dispatch record itself fails closed instead: test_dispatch_record.py)."""
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    sim.world.faults.schedule(
        [(sim.world.faults.counter + 1, FaultKind.LOSE_RESPONSE)]
    )  # the permit CAS, after the identity read
    assert error_code(lambda: sim.service().publish()) == "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_OUTCOME_UNKNOWN"
    assert sim.record().phase is Phase.PUBLICATION_DISPATCHING  # the write landed, but no permit was granted
    assert sim.world.calls["ddl.dispatch"] == 0 and sim.record().publication.unsent  # type: ignore[union-attr]
    assert isinstance(sim.service().publish(), Committed)
    assert sim.world.calls["ddl.dispatch"] == 1 and sim.record().publication.epoch == 2  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "phase", [Phase.LOCKED, Phase.STAGED, Phase.PUBLICATION_DISPATCHING, Phase.CLEANUP_DISPATCHING]
)
def test_unresolved_internal_v2_record_blocks_external_mode(phase: Phase) -> None:
    sim = Sim.build()
    sim.world.keeper[sim.request.target_key] = (encode(internal_v2(phase)), 2)
    assert error_code(lambda: sim.service().fence()) == "DPONE_CLICKHOUSE_CLUSTER_INTERNAL_RECORD_UNRESOLVED"
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_INTERNAL_RECORD_UNRESOLVED"


def test_a_completed_operation_still_answers_after_later_topology_changes() -> None:
    sim = Sim.build()
    assert sim.run_dag() == "completed"
    scaled_out = sim.world.add_member(3)
    sim.world.put_table(scaled_out, "target_table", COLUMNS, NEW_ROWS)
    assert isinstance(sim.service().cleanup(), Completed)
    assert sim.service().fence().phase == "COMPLETED"


def _staged_counting_digests(
    monkeypatch: pytest.MonkeyPatch, mode: ReplicationMode, parts_read: list[int] | None = None
) -> tuple[Sim, list[str]]:
    """A staged operation, and the member ids whose content is digested from then on (in internal mode, each replica
    of the one replicated candidate); ``parts_read`` collects how many parts each of those digests read."""
    sim = Sim.build(members=3, mode=mode)
    sim.world.insert_block_rows = sim.world.part_rows = 1  # one part per row: a merge can leave some parts as they are
    sim.service().fence()
    sim.service().stage(sim.source)
    digested: list[str] = []
    original = FakeMemberSession.observe_table

    def observe_table(self: FakeMemberSession, read: TableRead) -> TableObservation:
        observed = original(self, read)
        if read.with_content:
            digested.append(self.member.member_id)
            if parts_read is not None:
                parts_read.append(observed.parts_read or 0)
        return observed

    monkeypatch.setattr(FakeMemberSession, "observe_table", observe_table)
    return sim, digested


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_barrier_trusts_unchanged_parts_and_digests_no_candidate_again(
    monkeypatch: pytest.MonkeyPatch, mode: ReplicationMode
) -> None:
    sim, digested = _staged_counting_digests(monkeypatch, mode)
    assert all(member.parts_digest is not None for member in sim.record().members)
    assert isinstance(sim.service().publish(), Committed)
    assert digested == []
    assert isinstance(sim.service().cleanup(), Completed)
    sim.check_converged()


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_barrier_digests_a_merged_candidate_again_and_publishes(
    monkeypatch: pytest.MonkeyPatch, mode: ReplicationMode
) -> None:
    sim, digested = _staged_counting_digests(monkeypatch, mode)
    merged = sim.world.members[1]
    sim.world.table(merged, sim.request.candidate_name).merges += 1  # type: ignore[union-attr]
    assert isinstance(sim.service().publish(), Committed)
    assert digested == [merged.member_id]
    assert isinstance(sim.service().cleanup(), Completed)
    sim.check_converged()


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_barrier_reads_only_the_parts_a_merge_made(monkeypatch: pytest.MonkeyPatch, mode: ReplicationMode) -> None:
    """Two of a candidate's parts merged between its verification and the barrier: the barrier reads that one new
    part, sums the others' recorded facts, and gets exactly the verified digest."""
    read: list[int] = []
    sim, digested = _staged_counting_digests(monkeypatch, mode, read)
    merged = sim.world.members[1]
    table = sim.world.table(merged, sim.request.candidate_name)
    assert table is not None
    verified = sim.record().member(merged.member_id).part_digests
    assert verified is not None and len(verified) == len(sim.rows) >= 3
    parts.merge(table, 0, 2)
    assert isinstance(sim.service().publish(), Committed)
    assert (digested, read) == ([merged.member_id], [1])
    assert isinstance(sim.service().cleanup(), Completed)
    sim.check_converged()


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_barrier_of_a_record_without_part_facts_reads_the_whole_candidate(
    monkeypatch: pytest.MonkeyPatch, mode: ReplicationMode
) -> None:
    """A record written before part facts existed (or above their bound): the barrier falls back to reading every
    part of a merged candidate, as before."""
    read: list[int] = []
    sim, digested = _staged_counting_digests(monkeypatch, mode, read)
    merged = sim.world.members[1]
    record = sim.record()
    members = tuple(member.model_copy(update={"part_digests": None}) for member in record.members)
    key = sim.request.target_key
    sim.world.keeper[key] = (encode(record.evolve(members=members)), sim.world.keeper[key][1])
    table = sim.world.table(merged, sim.request.candidate_name)
    assert table is not None
    parts.merge(table, 0, 2)
    assert isinstance(sim.service().publish(), Committed)
    assert digested == [merged.member_id] and read == [len(parts.active_parts(table))]
    assert isinstance(sim.service().cleanup(), Completed)
    sim.check_converged()


@pytest.mark.parametrize("mode", ["external", "internal"])
@pytest.mark.parametrize("change", ["append", "replace"])
def test_a_staged_candidate_whose_rows_changed_blocks_publication(
    monkeypatch: pytest.MonkeyPatch, change: str, mode: ReplicationMode
) -> None:
    sim, digested = _staged_counting_digests(monkeypatch, mode)
    dispatched = sim.world.calls["ddl.dispatch"]  # internal mode: the candidate's CREATE ON CLUSTER
    member = sim.world.members[2]
    table = sim.world.table(member, sim.request.candidate_name)
    assert table is not None
    if change == "append":
        table.rows.append(table.rows[0])
    else:  # same row count: only the content digest can tell
        table.rows[0] = table.rows[1]
    assert error_code(lambda: sim.service().publish()) == "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_DIVERGENT"
    assert digested == [member.member_id] and sim.world.calls["ddl.dispatch"] == dispatched


def _write_during_exchange(sim: Sim, write: Callable[[FakeTable], None]) -> FakeMember:
    """Stage, pause the last member's DDL worker, publish (the others switch), then ``write`` into that member's
    candidate: after the barrier, while the EXCHANGE is in flight there."""
    sim.service().fence()
    sim.service().stage(sim.source)
    paused = sim.world.members[-1]
    paused.paused = True
    assert isinstance(sim.service().publish(), InProgress)
    candidate = sim.world.table(paused, sim.request.candidate_name)
    assert candidate is not None
    write(candidate)
    sim.world.resume(paused)  # the EXCHANGE now runs there: the written candidate becomes the target
    return paused


def _insert_one(table: FakeTable) -> None:
    parts.append(table, [(99, "written-after-the-barrier")])


def _update_in_place(table: FakeTable) -> None:
    """ALTER UPDATE: one value rewritten, the row count unchanged."""
    table.rows[0] = (table.rows[0][0], "updated-after-the-barrier")
    table.merges += 1  # a mutation rewrites the part


@pytest.mark.parametrize("mode", ["external", "internal"])
@pytest.mark.parametrize("write", [_insert_one, _update_in_place], ids=["insert", "alter_update"])
def test_a_candidate_written_while_the_exchange_is_in_flight_is_never_committed(
    mode: ReplicationMode, write: Callable[[FakeTable], None]
) -> None:
    sim = Sim.build(members=3, mode=mode)
    paused = _write_during_exchange(sim, write)
    code = "DPONE_CLICKHOUSE_CLUSTER_PUBLISHED_CONTENT_DIVERGENT"
    assert error_code(lambda: sim.service().reconcile_publication()) == code
    assert error_code(lambda: sim.service().publish()) == code  # a retry observes again and stops again
    record = sim.record()
    assert record.phase is Phase.PUBLICATION_DISPATCHING
    assert record.last_error is not None and record.last_error.code == code
    assert sim.successes == 0 and sim.world.calls["ddl.dispatch"] == (1 if mode == "external" else 2)
    for member in sim.world.members:  # retained: the predecessor under the candidate name, the new target
        assert rows_of(sim, sim.world.members.index(member), sim.request.candidate_name) == Counter(BASELINE_ROWS)
    assert rows_of(sim, sim.world.members.index(paused), "target_table") != Counter(NEW_ROWS)  # the foreign write


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_a_merge_while_the_exchange_is_in_flight_still_commits(mode: ReplicationMode) -> None:
    """A background merge renames parts without changing rows: the content digest decides, and it is equal."""
    sim = Sim.build(members=3, mode=mode)

    def merge(table: FakeTable) -> None:
        parts.append(table, [])
        table.merges += 1

    _write_during_exchange(sim, merge)
    committed = sim.service().reconcile_publication()
    assert isinstance(committed, Committed)
    sim.check_success(committed)
    assert isinstance(sim.service().cleanup(), Completed)
    sim.check_converged()


def _delete_one(table: FakeTable) -> None:
    """ALTER DELETE: one row removed by a mutation (the part is rewritten)."""
    del table.rows[0]
    table.merges += 1


def _add_column(table: FakeTable) -> None:
    """ALTER ADD COLUMN: metadata only, every part kept as it was (``tests.support.fakes.parts.add_column``)."""
    parts.add_column(table, ("added", "UInt64"), 0)


def _merge(table: FakeTable) -> None:
    """A background merge: new part names, the same rows."""
    parts.append(table, [])
    table.merges += 1


DRIFT = "DPONE_CLICKHOUSE_CLUSTER_TARGET_DRIFT"


def _stage_then_write_the_target(sim: Sim, write: Callable[[FakeTable], None]) -> FakeTable:
    """Fence and stage (every member's baseline observed and recorded), then ``write`` into the live target of the
    last member in place (same UUID): after the baseline, before the publication barrier."""
    sim.service().fence()
    sim.service().stage(sim.source)
    target = sim.world.table(sim.world.members[-1], sim.request.target)
    assert target is not None
    write(target)
    return target


@pytest.mark.parametrize("mode", ["external", "internal"])
@pytest.mark.parametrize(
    "write",
    [_insert_one, _update_in_place, _delete_one, _add_column],
    ids=["insert", "alter_update", "alter_delete", "alter_add_column"],
)
def test_a_live_target_written_in_place_after_its_baseline_stops_the_publication_before_its_permit(
    mode: ReplicationMode, write: Callable[[FakeTable], None]
) -> None:
    """Seed 000 E6: an in-place write or ALTER of the old target would be exchanged out and dropped by cleanup as the
    predecessor. The barrier sees it and stops before the permit: nothing is published, no DDL is dispatched, the
    written target stays the target with the write, every candidate is retained, and a retry stops again."""
    sim = Sim.build(members=3, mode=mode)
    target = _stage_then_write_the_target(sim, write)
    written = (target.uuid, target.columns, Counter(target.rows))
    dispatched = sim.world.calls["ddl.dispatch"]  # internal mode: the candidate's ON CLUSTER CREATE
    staged = sim.record()
    assert error_code(lambda: sim.service().publish()) == DRIFT
    assert error_code(lambda: sim.service().publish()) == DRIFT  # a retry observes again and stops again
    record = sim.record()
    assert record == staged and record.phase is Phase.STAGED and record.publication is None  # no permit, no write
    assert sim.world.calls["ddl.dispatch"] == dispatched and sim.successes == 0
    member = sim.world.members[-1]
    table = sim.world.table(member, sim.request.target)
    assert table is not None and (table.uuid, table.columns, Counter(table.rows)) == written
    assert table.uuid == record.member(member.member_id).target_uuid  # still the target, the write in it
    for index in range(len(sim.world.members)):  # every candidate retained as staged
        assert rows_of(sim, index, sim.request.candidate_name) == Counter(NEW_ROWS)
    alerts = [event.as_dict() for event in sim.world.alerts]
    assert [(a["alert"], a["member_id"], a["code"]) for a in alerts] == [
        ("dpone.alert.cluster.target_drift", member.member_id, DRIFT)
    ] * 2  # once per decision


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_a_merge_of_the_live_target_after_its_baseline_still_publishes(mode: ReplicationMode) -> None:
    """The control: a merge renames the target's parts and keeps every row, so the barrier digests it again, finds
    the baseline's content and publishes."""
    sim = Sim.build(members=3, mode=mode)
    target = _stage_then_write_the_target(sim, _merge)
    assert target.merges == 1
    committed = sim.service().publish()
    assert isinstance(committed, Committed)
    sim.check_success(committed)
    assert isinstance(sim.service().cleanup(), Completed)
    sim.check_converged()
    assert sim.world.alerts == []


def _target_reads(sim: Sim, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int | None]]:
    """From now on, every (member id, parts read) of a content digest of the target the server computes."""
    seen: list[tuple[str, int | None]] = []
    original = FakeMemberSession.observe_table

    def observe_table(self: FakeMemberSession, read: TableRead) -> TableObservation:
        observed = original(self, read)
        if read.with_content and read.table == sim.request.target:
            seen.append((self.member.member_id, observed.parts_read))
        return observed

    monkeypatch.setattr(FakeMemberSession, "observe_table", observe_table)
    return seen


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_the_barrier_digests_the_live_target_only_when_its_parts_changed(
    mode: ReplicationMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The baseline's parts are recorded with its content: an unchanged target costs the barrier no content read; a
    merged one is read again, only on its member, reusing the predecessor's part facts for the parts it kept."""
    first = Sim.build(members=2, mode=mode)
    first.world.insert_block_rows = first.world.part_rows = 1  # one part per row
    assert first.run_dag() == "completed"
    for merged in (False, True):
        sim = Sim.successor(first, run_id=f"scheduled__merged-{merged}", rows=NEW_ROWS)
        sim.service().fence()
        sim.service().stage(sim.source)
        assert all(member.target_parts_digest is not None for member in sim.record().members)
        member = sim.world.members[1]
        target = sim.world.table(member, sim.request.target)
        assert target is not None and len(parts.active_parts(target)) >= 3
        if merged:
            parts.merge(target, 0, 2)
        reads = _target_reads(sim, monkeypatch)
        committed = sim.service().publish()
        assert isinstance(committed, Committed)
        assert reads == ([(member.member_id, 1)] if merged else [])  # the one merged part, nothing else
        monkeypatch.undo()
        assert isinstance(sim.service().cleanup(), Completed)
        first = sim


@pytest.mark.parametrize("mode", ["external", "internal"])
@pytest.mark.parametrize("write", [_insert_one, _merge], ids=["insert", "merge"])
def test_a_record_written_without_the_baseline_parts_digests_the_live_target_whole_at_the_barrier(
    mode: ReplicationMode, write: Callable[[FakeTable], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record staged before baselines recorded their parts (as an older writer left it: the fields absent, so it
    re-encodes to its own bytes): the barrier digests every member's target whole and compares it with the
    baseline's row count and content digest. A write still stops the publication; a merge still publishes."""
    sim = Sim.build(members=3, mode=mode)
    _stage_then_write_the_target(sim, write)
    record = sim.record()
    bare = tuple(
        member.model_copy(update={"target_schema_digest": None, "target_parts_digest": None})
        for member in record.members
    )
    key = sim.request.target_key
    sim.world.keeper[key] = (encode(record.evolve(members=bare)), sim.world.keeper[key][1])
    assert "target_parts_digest" not in sim.world.keeper[key][0].payload
    reads = _target_reads(sim, monkeypatch)
    if write is _merge:
        assert isinstance(sim.service().publish(), Committed)
    else:
        assert error_code(lambda: sim.service().publish()) == DRIFT
        assert sim.record().phase is Phase.STAGED and sim.world.calls["ddl.dispatch"] == (mode == "internal")
    assert sorted(member_id for member_id, _ in reads) == sorted(sim.record().member_ids())


@pytest.mark.parametrize("mode", ["external", "internal"])
@pytest.mark.parametrize("kind", SINGLE_FAULT_KINDS)
def test_the_baseline_write_dying_or_losing_its_response_keeps_the_live_target_fenced(
    mode: ReplicationMode, kind: FaultKind
) -> None:
    """The baseline's schema and parts ride on the STAGING CAS. The process dies just before it, just after it, or
    loses its response; then one member's live target is written; then the DAG runs on with retries. A baseline
    that landed is the one the barrier holds the target to: the publication stops with ``TARGET_DRIFT`` (internal
    mode: that CAS also carried the candidate CREATE's permit, whose dispatch was never recorded, so the retry
    replaces it and stages). One that never landed is observed again, after the write: the members then differ and
    the stage stops before any mutation. Whichever: never a success, and the write stays in the live target."""
    sim = Sim.build(members=3, mode=mode)
    sim.world.faults.schedule([(point_of(sim, "authority.cas"), kind)])
    sim.service().fence()
    with pytest.raises((SimulatedCrash, DponeError)):
        sim.service().stage(sim.source)
    landed = sim.record().phase is not Phase.LOCKED
    assert landed == (kind is not FaultKind.CRASH_BEFORE)
    target = sim.world.table(sim.world.members[-1], sim.request.target)
    assert target is not None
    _insert_one(target)
    written = Counter(target.rows)
    if not landed:
        expected = "stopped at stage: DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT"
    else:
        expected = "stopped at publish: " + DRIFT
    assert sim.run_dag() == expected
    assert sim.successes == 0 and sim.record().publication is None
    assert rows_of(sim, len(sim.world.members) - 1, sim.request.target) == written
    assert sim.world.table(sim.world.members[-1], sim.request.target) is target  # still the target


FOREIGN_ROWS = ((7, "a table someone else created"),)


@pytest.mark.parametrize("mode", ["external", "internal"])
@pytest.mark.parametrize("resumed", [False, True], ids=["before_its_exchange", "then_exchanged"])
def test_a_target_replaced_by_a_foreign_table_while_the_exchange_is_in_flight_fails_closed(
    mode: ReplicationMode, resumed: bool
) -> None:
    """Seed 000, A5.5: a member whose (target, candidate) UUID pair is neither the bound pair before the DDL nor after
    it is foreign: the publication fails closed with ``PUBLICATION_FOREIGN_UUID``, is never COMMITTED, touches
    nothing it does not own, and every retry stops the same way."""
    sim = Sim.build(members=3, mode=mode)
    sim.service().fence()
    sim.service().stage(sim.source)
    paused = sim.world.members[-1]
    paused.paused = True
    assert isinstance(sim.service().publish(), InProgress)
    sim.world.drop_on(paused, sim.world.database, sim.request.target)  # someone replaces the target there
    foreign = sim.world.put_table(paused, sim.request.target, COLUMNS, FOREIGN_ROWS)
    if resumed:  # the member's EXCHANGE then swaps the foreign table under the candidate name
        sim.world.resume(paused)
    code = "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_FOREIGN_UUID"
    assert error_code(lambda: sim.service().reconcile_publication()) == code
    assert error_code(lambda: sim.service().publish()) == code  # a retry observes again and stops again
    record = sim.record()
    assert record.phase is Phase.PUBLICATION_DISPATCHING and record.last_error is not None
    assert record.last_error.code == code
    assert sim.successes == 0
    held = [table for table in paused.tables.values() if table.uuid == foreign.uuid]
    assert len(held) == 1 and tuple(held[0].rows) == FOREIGN_ROWS  # the foreign table is untouched
