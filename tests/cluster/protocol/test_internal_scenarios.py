"""Named scenarios of the internal (replicated) route, asserted on the fake world's physical state: one ON CLUSTER
create, one load through one replica, bounded convergence, rebuild instead of a resend, and the shared publication."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from airflow_provider_dpone.cluster.ports import TableObservation, TableRead
from airflow_provider_dpone.cluster.protocol.context import ProtocolSettings
from airflow_provider_dpone.cluster.protocol.results import Committed, Completed, InProgress
from airflow_provider_dpone.cluster.values.authority.internal import InternalAuthorityRecordV1
from airflow_provider_dpone.cluster.values.authority.phases import MemberStage, Phase
from airflow_provider_dpone.cluster.values.publication_receipts import InternalPublicationReceipt
from airflow_provider_dpone.core.errors import UnavailableError
from tests.support.cluster.sim import (
    BASELINE_ROWS,
    COLUMNS,
    NEW_ROWS,
    RETRY_DELAY_MS,
    Sim,
    candidate_calls,
    error_code,
    point_of,
    rows_of,
    staged_effects,
)
from tests.support.fakes import parts
from tests.support.fakes.faults import FaultKind
from tests.support.fakes.ports import FakeMemberSession

pytestmark = pytest.mark.protocol

NOT_CONVERGED = "DPONE_CLICKHOUSE_CLUSTER_REPLICA_NOT_CONVERGED"


def internal(members: int = 2, *, baseline: tuple[tuple[object, ...], ...] | None = BASELINE_ROWS) -> Sim:
    return Sim.build(members=members, baseline=baseline, mode="internal")


def record_of(sim: Sim) -> InternalAuthorityRecordV1:
    record = sim.record()
    assert isinstance(record, InternalAuthorityRecordV1)
    return record


@pytest.mark.parametrize("members", [2, 3])
@pytest.mark.parametrize("existing", [True, False])
def test_one_create_one_load_through_the_lowest_replica_and_every_replica_verified(
    members: int, existing: bool
) -> None:
    sim = internal(members, baseline=BASELINE_ROWS if existing else None)
    assert sim.run_dag() == "completed"
    sim.check_converged()
    record = record_of(sim)
    candidate = record.candidate
    assert candidate is not None and candidate.load is not None and candidate.create is not None
    assert candidate.load.member_id == min(record.member_ids()) and candidate.rebuilds == 0
    assert sim.world.calls["member.load"] == 1 and candidate_calls(sim, "member.create") == 0
    assert sim.world.dispatched[0].correlation_token == candidate.create.correlation_token
    assert [entry.intent.kind for entry in sim.world.queue] == ["create", "exchange" if existing else "rename"] + (
        ["drop"] if existing else []
    )
    uuids = {sim.world.table(member, "target_table").uuid for member in sim.world.members}  # type: ignore[union-attr]
    assert uuids == {candidate.uuid_intent}  # every replica exposes the one replicated candidate
    assert all(member.row_count == len(NEW_ROWS) for member in record.members)  # per replica, never summed
    receipt = sim.service().cleanup()
    assert isinstance(receipt, Completed) and isinstance(receipt.receipt, InternalPublicationReceipt)
    assert receipt.receipt.schema_ == "dpone.clickhouse.cluster-full-refresh-receipt.v1"
    assert receipt.receipt.load_member_id == candidate.load.member_id and len(receipt.receipt.members) == members
    assert not sim.world.replicated_logs.keys() - {
        sim.world.table(sim.world.members[0], "target_table").replica.log.path
    }  # type: ignore[union-attr]


def test_a_lost_load_response_is_resolved_by_observation_and_never_resent() -> None:
    sim = internal(3)
    sim.world.faults.schedule([(point_of(sim, "member.load"), FaultKind.LOSE_RESPONSE)])
    assert sim.run_dag(tries=1) == "completed"
    candidate = record_of(sim).candidate
    assert candidate is not None and candidate.rebuilds == 0  # every replica converged to exactly the artifact
    assert sim.world.calls["member.load"] == 1
    sim.check_converged()


def test_a_load_that_may_not_have_happened_is_never_sent_again_the_candidate_is_rebuilt() -> None:
    sim = internal(3)
    sim.world.faults.schedule([(point_of(sim, "member.load"), FaultKind.CRASH_BEFORE)])
    assert sim.run_dag(tries=1) == "stopped at stage: crash"
    assert sim.run_dag(tries=1) == "completed"
    record = record_of(sim)
    candidate = record.candidate
    assert candidate is not None and candidate.rebuilds == 1 and len(candidate.owned_uuids) == 2
    loads = [effect for effect in sim.world.effects if effect.op == "load"]
    assert [effect.uuid for effect in loads] == [candidate.owned_uuids[1]]  # one load, into the rebuilt candidate
    drops = [effect for effect in sim.world.effects if effect.op == "drop" and effect.via == "ddl"]
    assert {effect.uuid for effect in drops[: len(sim.world.members)]} == {candidate.owned_uuids[0]}
    assert len(drops) == 2 * len(sim.world.members)  # the rebuild drop, then the predecessor cleanup
    sim.check_converged()


def test_a_partial_load_is_rebuilt_not_appended() -> None:
    sim = internal(2)
    sim.world.faults.schedule([(point_of(sim, "member.load"), FaultKind.PARTIAL)])
    assert sim.run_dag(tries=1) == "completed"
    assert record_of(sim).candidate.rebuilds == 1  # type: ignore[union-attr]
    sim.check_converged()


def test_dedup_would_depend_on_identical_block_splitting_which_is_why_nothing_is_resent() -> None:
    """Baseline of the rationale: resending the same load with the same token is harmless only while the blocks split
    identically (and inside the dedup window); a different split appends duplicates."""
    sim = internal(2, baseline=None)
    sim.world.faults.schedule([(point_of(sim, "member.load"), FaultKind.CRASH_AFTER)])
    sim.service().fence()
    with pytest.raises(BaseException, match="simulated crash"):
        sim.service().stage(sim.source)
    record = record_of(sim)
    load = record.candidate.load  # type: ignore[union-attr]
    assert load is not None
    ports = sim.world.ports()
    member = sim.service()._begin()[0].inventory.member(load.member_id)
    handle = ports.artifacts.open(record.artifact)  # type: ignore[arg-type]
    session = ports.sessions.session(member)
    database, name = sim.world.database, sim.request.candidate_name
    session.load(database, name, load.candidate_uuid, handle, query_id=load.query_id, dedup_token=load.dedup_token)
    assert rows_of(sim, 0, name) == Counter(NEW_ROWS)  # same split: every block deduplicated
    sim.world.insert_block_rows = 1
    session.load(database, name, load.candidate_uuid, handle, query_id=load.query_id, dedup_token=load.dedup_token)
    assert rows_of(sim, 0, name) != Counter(NEW_ROWS)  # another split: rows appended twice


def test_a_replica_that_does_not_catch_up_stops_the_attempt_retryably_and_mutates_nothing() -> None:
    sim = internal(3)
    lagging = sim.world.members[2]
    lagging.fetch_paused = True
    sim.service().fence()
    assert error_code(lambda: sim.service().stage(sim.source)) == NOT_CONVERGED
    version, effects = sim.world.keeper[sim.request.target_key][1], len(sim.world.effects)
    for _ in range(2):  # a retry waits again, nothing else
        assert error_code(lambda: sim.service().stage(sim.source)) == NOT_CONVERGED
    assert sim.world.keeper[sim.request.target_key][1] == version and len(sim.world.effects) == effects
    assert record_of(sim).candidate.stage is MemberStage.CREATED  # type: ignore[union-attr]
    assert rows_of(sim, 2, sim.request.candidate_name) == Counter()
    lagging.fetch_paused = False
    assert sim.service().stage(sim.source).phase == "STAGED"
    assert sim.world.calls["member.load"] == 1  # converged, never reloaded
    assert sim.run_dag() == "completed"
    sim.check_converged()


def test_a_read_only_replica_is_not_converged() -> None:
    sim = internal(2)
    sim.world.members[1].replica_readonly = True
    sim.service().fence()
    assert error_code(lambda: sim.service().stage(sim.source)) == NOT_CONVERGED
    sim.world.members[1].replica_readonly = False
    assert sim.run_dag() == "completed"
    sim.check_converged()


def test_a_replica_that_converged_to_other_content_forces_a_rebuild() -> None:
    sim = internal(3)
    sim.world.members[1].fetch_corrupt = 1  # the first fetched part loses a row on that replica
    assert sim.run_dag(tries=1) == "completed"
    candidate = record_of(sim).candidate
    assert candidate is not None and candidate.rebuilds == 1
    assert sim.world.calls["member.load"] == 2
    sim.check_converged()


def test_a_replica_that_always_diverges_ends_fail_closed_at_the_rebuild_limit_never_in_success() -> None:
    sim = internal(2)
    sim.world.members[1].fetch_corrupt = -1
    outcomes = {sim.run_dag(tries=3) for _ in range(8)}
    assert "stopped at stage: DPONE_CLICKHOUSE_CLUSTER_STAGING_REBUILD_LIMIT" in outcomes
    record = record_of(sim)
    assert record.phase is Phase.STAGING and record.candidate is not None
    assert record.candidate.rebuilds == 16 and sim.successes == 0
    assert rows_of(sim, 0, "target_table") == Counter(BASELINE_ROWS)
    sim.check_invariants()


def test_a_replica_with_more_rows_than_the_artifact_stops_staging_instead_of_a_rebuild() -> None:
    sim = internal(2)
    sim.world.faults.schedule([(point_of(sim, "member.load"), FaultKind.CRASH_AFTER)])
    assert sim.run_dag(tries=1).startswith("stopped at stage")
    sim.world.faults.disable()
    replica = sim.world.table(sim.world.members[1], sim.request.candidate_name)
    assert replica is not None
    parts.append(replica, [NEW_ROWS[0]])  # a write that bypasses the provider: one row twice on one replica
    assert sim.run_dag() == "stopped at stage: DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_DIVERGENT"
    candidate = record_of(sim).candidate
    assert candidate is not None and candidate.rebuilds == 0 and sim.successes == 0
    assert sim.world.table(sim.world.members[1], sim.request.candidate_name) is replica  # retained, never dropped
    assert rows_of(sim, 1, sim.request.candidate_name) == Counter(NEW_ROWS) + Counter([NEW_ROWS[0]])
    assert rows_of(sim, 0, "target_table") == Counter(BASELINE_ROWS)  # nothing was published


def test_a_replica_missing_from_system_replicas_fails_closed_and_keeps_everything() -> None:
    sim = internal(2)
    sim.world.faults.schedule([(point_of(sim, "member.load"), FaultKind.CRASH_AFTER)])
    assert sim.run_dag(tries=1).startswith("stopped at stage")
    sim.world.faults.disable()
    sim.world.table(sim.world.members[1], sim.request.candidate_name).replica = None  # type: ignore[union-attr]
    assert sim.run_dag() == "stopped at stage: DPONE_CLICKHOUSE_CLUSTER_REPLICA_SET_INVALID"
    assert all(sim.world.table(m, sim.request.candidate_name) is not None for m in sim.world.members)
    assert sim.successes == 0
    sim.check_invariants()


def test_replicas_observed_concurrently_are_judged_in_member_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """A foreign table on the first replica fails the create closed even when a later replica, read at the same
    time, does not answer: the verdict is the one a replica-by-replica pass reaches, not the first thread's."""
    sim = internal(3)
    sim.settings = ProtocolSettings(dispatch_quiet_ms=120_000, member_parallelism=3)
    first, silent = sorted(sim.world.members, key=lambda member: member.member_id)[:2]
    sim.world.put_table(first, sim.request.candidate_name, COLUMNS, ((7, "x"),))
    uuids = FakeMemberSession.table_uuids

    def unanswered(self: FakeMemberSession, database: str, tables: tuple[str, ...]) -> tuple[str | None, ...]:
        if self.member is silent:
            raise UnavailableError("no answer")
        return uuids(self, database, tables)

    sim.service().fence()
    monkeypatch.setattr(FakeMemberSession, "table_uuids", unanswered)
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_FOREIGN"
    assert sim.world.calls["ddl.dispatch"] == 0 and staged_effects(sim) == []


def test_a_foreign_table_under_the_candidate_name_blocks_the_create() -> None:
    sim = internal(2)
    foreign = sim.world.put_table(sim.world.members[1], sim.request.candidate_name, COLUMNS, ((7, "x"),))
    sim.snapshot()
    sim.service().fence()
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_FOREIGN"
    assert sim.world.calls["ddl.dispatch"] == 0 and staged_effects(sim) == []
    assert sim.world.table(sim.world.members[1], sim.request.candidate_name) is foreign
    sim.check_invariants()


def test_a_create_still_queued_on_a_replica_is_pending_and_resumes_without_a_second_dispatch() -> None:
    sim = internal(3)
    paused = sim.world.members[1]
    paused.paused = True
    sim.service().fence()
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING"
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING"
    assert sim.world.calls["ddl.dispatch"] == 1 and sim.world.calls["member.load"] == 0
    sim.world.resume(paused)
    assert sim.service().stage(sim.source).phase == "STAGED"
    assert sim.run_dag() == "completed"
    assert sim.world.calls["ddl.dispatch"] == 3  # create, exchange, cleanup drop
    sim.check_converged()


def test_a_create_that_failed_on_one_replica_fails_closed() -> None:
    sim = internal(3)
    sim.world.members[2].ddl_fails = True
    assert sim.run_dag(tries=1) == "stopped at stage: DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_MIXED"
    sim.world.members[2].ddl_fails = False
    assert sim.run_dag() == "stopped at stage: DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_MIXED"  # never re-dispatched
    assert sim.world.calls["ddl.dispatch"] == 1 and sim.world.calls["member.load"] == 0
    assert record_of(sim).last_error.code == "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_MIXED"  # type: ignore[union-attr]
    sim.check_invariants()


def test_a_replica_paused_during_the_exchange_is_in_progress_until_it_resumes() -> None:
    sim = internal(3)
    sim.service().fence()
    sim.service().stage(sim.source)
    paused = sim.world.members[0]
    paused.paused = True
    result = sim.service().publish()
    assert isinstance(result, InProgress) and result.pending_members == (paused.member_id,)
    sim.world.clock.advance(RETRY_DELAY_MS)
    assert isinstance(sim.service().reconcile_publication(), InProgress)
    sim.world.resume(paused)
    committed = sim.service().reconcile_publication()
    assert isinstance(committed, Committed)
    sim.check_success(committed)
    assert isinstance(sim.service().cleanup(), Completed)
    sim.check_converged()


@pytest.mark.parametrize("phase", ["LOCKED", "STAGING", "STAGED"])
def test_abort_drops_every_replica_of_the_owned_candidate_and_frees_the_target(phase: str) -> None:
    sim = internal(3)
    sim.service().fence()
    if phase == "STAGING":
        sim.world.members[2].fetch_paused = True
        assert error_code(lambda: sim.service().stage(sim.source)) == NOT_CONVERGED
    elif phase == "STAGED":
        sim.service().stage(sim.source)
    assert sim.record().phase.value == phase
    assert sim.service().abort().phase == "ABORTED"
    assert all(sim.world.table(m, sim.request.candidate_name) is None for m in sim.world.members)
    target_path = sim.world.table(sim.world.members[0], "target_table").replica.log.path  # type: ignore[union-attr]
    assert set(sim.world.replicated_logs) == {target_path}  # the candidate's Keeper path is gone
    assert rows_of(sim, 0, "target_table") == Counter(BASELINE_ROWS)
    sim.world.members[2].fetch_paused = False
    fresh = Sim.successor(sim, run_id="manual__after_abort", rows=NEW_ROWS)
    assert fresh.run_dag() == "completed"
    fresh.check_converged()


def test_a_second_run_is_fenced_while_the_first_is_unresolved_and_succeeds_it_afterwards() -> None:
    sim = internal(2)
    sim.service().fence()
    sim.service().stage(sim.source)
    rival = Sim.successor(sim, run_id="manual__rival", rows=((20, "rival"),))
    effects = len(sim.world.effects)
    assert error_code(lambda: rival.service().fence()) == "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED"
    assert len(sim.world.effects) == effects
    assert sim.run_dag() == "completed"
    rival.snapshot()
    assert rival.run_dag() == "completed"
    rival.check_converged()
    assert record_of(rival).previous_operation_id == sim.request.operation_id


def test_a_completed_internal_operation_is_idempotent() -> None:
    sim = internal(2)
    assert sim.run_dag() == "completed"
    effects, version = len(sim.world.effects), sim.world.keeper[sim.request.target_key][1]
    assert sim.service().fence().phase == "COMPLETED"
    assert sim.service().stage(sim.source).phase == "COMPLETED"
    assert isinstance(sim.service().publish(), Committed) and isinstance(sim.service().cleanup(), Completed)
    assert len(sim.world.effects) == effects and sim.world.keeper[sim.request.target_key][1] == version
    assert sim.source.seals == 1


def test_an_existing_non_replicated_target_is_not_adopted_by_internal_mode() -> None:
    sim = internal(2, baseline=None)
    for member in sim.world.members:
        sim.world.put_table(member, "target_table", COLUMNS, BASELINE_ROWS)
    sim.snapshot()
    sim.service().fence()
    code = error_code(lambda: sim.service().stage(sim.source))
    assert code == "DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED"
    assert staged_effects(sim) == [] and sim.record().phase is Phase.LOCKED
    assert sim.source.seals == 0, "blocked before the source is extracted"


def test_abort_waits_until_the_candidate_create_ran_on_every_replica_so_no_replica_is_left_behind() -> None:
    sim = internal(3)
    paused = sim.world.members[2]
    paused.paused = True
    sim.service().fence()
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING"
    assert error_code(lambda: sim.service().abort()) == "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING"
    assert sim.record().phase is Phase.STAGING
    sim.world.resume(paused)
    assert sim.service().abort().phase == "ABORTED"
    assert all(sim.world.table(m, sim.request.candidate_name) is None for m in sim.world.members)
    sim.check_invariants()


def test_abort_of_an_unproven_create_permit_waits_for_its_void() -> None:
    sim = internal(2)
    sim.world.faults.schedule([(point_of(sim, "ddl.dispatch"), FaultKind.CRASH_BEFORE)])
    sim.service().fence()
    with pytest.raises(BaseException, match="simulated crash"):
        sim.service().stage(sim.source)
    assert error_code(lambda: sim.service().abort()) == "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING"
    sim.world.clock.advance(RETRY_DELAY_MS)
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_DISPATCH_UNPROVEN"
    pending = "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING"
    assert error_code(lambda: sim.service().abort()) == pending  # the quiet period proves nothing
    sim.world.clock.advance(RETRY_DELAY_MS)
    sim.world.restart_coordinator()  # later than the permit plus every margin
    assert sim.service().void_permit().step == "candidate create"
    assert sim.service().abort().phase == "ABORTED"  # the runbook's way out once the permit is proven void
    assert sim.world.queue == [] and sim.world.calls["ddl.dispatch"] == 1


def test_a_create_held_by_a_stalled_coordinator_is_never_left_behind_by_an_abort() -> None:
    sim = internal(2)
    sim.service().fence()
    sim.world.stall_coordinator()
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING"
    sim.world.clock.advance(RETRY_DELAY_MS)
    assert error_code(lambda: sim.service().abort()) == "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING"
    sim.world.resume_coordinator()  # the late CREATE runs on every replica
    assert all(sim.world.table(m, sim.request.candidate_name) is not None for m in sim.world.members)
    assert sim.service().abort().phase == "ABORTED"
    assert all(sim.world.table(m, sim.request.candidate_name) is None for m in sim.world.members)
    sim.check_invariants()


def test_replicas_are_awaited_at_once_and_the_loading_replica_is_digested_while_the_others_still_fetch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The other replicas' SYNC REPLICA waits are in flight together, and answer only once the replica that took the
    load has been digested: a schedule that waits for one replica after another, or for every replica before
    digesting any, breaks the barrier or times out here and fails the run."""
    sim = internal(3)
    sim.settings = ProtocolSettings(dispatch_quiet_ms=120_000, member_parallelism=3)
    loader = min(member.member_id for member in sim.world.members)
    others_waiting = threading.Barrier(2, timeout=10)
    loader_digested = threading.Event()
    sync, observe = FakeMemberSession.sync_replica, FakeMemberSession.observe_table

    def slow_sync(self: FakeMemberSession, *args: Any, **kwargs: Any) -> bool:
        if self.member.member_id != loader:
            others_waiting.wait()
            if not loader_digested.wait(10):
                raise TimeoutError("the loading replica was not digested while the others waited")
        return sync(self, *args, **kwargs)

    def watched_observe(self: FakeMemberSession, read: TableRead) -> TableObservation:
        observed = observe(self, read)
        if self.member.member_id == loader and read.table == sim.request.candidate_name and read.with_content:
            loader_digested.set()
        return observed

    monkeypatch.setattr(FakeMemberSession, "sync_replica", slow_sync)
    monkeypatch.setattr(FakeMemberSession, "observe_table", watched_observe)
    assert sim.run_dag(tries=1) == "completed"
    sim.check_converged()
    assert all(member.row_count == len(NEW_ROWS) for member in record_of(sim).members)
