"""Named publication, cleanup and fencing scenarios of seed 000, asserted on the fake world's physical state."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from airflow_provider_dpone.cluster.ports import TableObservation
from airflow_provider_dpone.cluster.protocol.results import Committed, Completed, InProgress
from airflow_provider_dpone.cluster.values.authority.codec import encode
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.fakes import parts
from tests.fakes.faults import FaultKind
from tests.fakes.ports import FakeMemberSession
from tests.fakes.records import internal_v1, internal_v2
from tests.fakes.world import FakeMember, FakeTable
from tests.protocol.sim import (
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

    def observe_table(self: FakeMemberSession, *args: Any, **kwargs: Any) -> TableObservation:
        observed = original(self, *args, **kwargs)
        if kwargs.get("with_content"):
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
