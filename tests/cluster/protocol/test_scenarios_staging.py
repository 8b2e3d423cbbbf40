"""Named staging scenarios of seed 000 (fence, seal, per-member staging), asserted on the fake world's physical state."""

from __future__ import annotations

import dataclasses
import re
import threading
from collections import Counter
from typing import Any

import pytest

from airflow_provider_dpone.cluster.protocol.context import ProtocolSettings
from airflow_provider_dpone.cluster.protocol.service import PublicationService
from airflow_provider_dpone.cluster.values.authority.external import MAX_REBUILDS_PER_MEMBER
from airflow_provider_dpone.cluster.values.authority.phases import MemberStage, Phase
from airflow_provider_dpone.cluster.values.progress import (
    CandidateRebuilt,
    MemberLoadAnswered,
    MemberLoadStarted,
    MemberLoadUnanswered,
)
from airflow_provider_dpone.core.errors import ArtifactInvalidError, DponeError
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from airflow_provider_dpone.core.progress import ProgressFact
from tests.support.cluster.sim import (
    BASELINE_ROWS,
    COLUMNS,
    CREATE_WINDOW_MS,
    NEW_ROWS,
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
from tests.support.fakes.publication import content_digest

pytestmark = pytest.mark.protocol


def test_lost_load_response_on_member_1_is_resolved_by_observation_without_a_second_insert() -> None:
    sim = Sim.build()
    sim.world.faults.schedule([(point_of(sim, "member.load"), FaultKind.LOSE_RESPONSE)])
    assert sim.run_dag(tries=1) == "completed"
    assert sim.world.calls["member.load"] == 2  # one load per member, none repeated
    assert all(member.rebuilds == 0 for member in sim.record().members)
    sim.check_converged()


def test_naive_retry_of_a_lost_load_would_duplicaterows_of() -> None:
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
    assert rows_of(sim, 0, sim.request.candidate_name) == Counter(NEW_ROWS * 2)


def test_crash_after_create_before_candidate_cas_adopts_only_the_intended_uuid() -> None:
    sim = Sim.build()
    sim.world.faults.schedule([(point_of(sim, "member.create"), FaultKind.CRASH_AFTER)])
    assert sim.run_dag(tries=2) == "completed"
    record = sim.record()
    first = record.members[0]
    assert first.owned_candidate_uuids == (first.candidate_uuid,)  # the table created before the crash was bound
    assert candidate_calls(sim, "member.create") == 2 and first.rebuilds == 0
    sim.check_converged()


def test_partial_load_triggers_exact_drop_and_rebuild_never_append() -> None:
    sim = Sim.build(members=3)
    sim.world.faults.schedule([(point_of(sim, "member.load", 1), FaultKind.PARTIAL)])
    assert sim.run_dag(tries=1) == "completed"
    record = sim.record()
    second = record.members[1]
    assert second.rebuilds == 1 and len(second.owned_candidate_uuids) == 2
    drops = [e for e in staged_effects(sim) if e.op == "drop" and e.via == "member"]
    assert [d.uuid for d in drops] == [second.owned_candidate_uuids[0]]
    sim.check_converged()


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


def test_existing_targets_sharing_one_uuid_are_adopted_and_replaced_on_every_member() -> None:
    """``CREATE TABLE ... ON CLUSTER`` in an Atomic database: every member's independent table has one UUID."""
    sim = Sim.build(members=3)
    shared = sim.world.table(sim.world.members[0], "target_table").uuid  # type: ignore[union-attr]
    for member in sim.world.members:
        sim.world.table(member, "target_table").uuid = shared  # type: ignore[union-attr]
        member.used_uuids.add(shared)
    sim.snapshot()
    assert sim.run_dag() == "completed"
    record = sim.record()
    assert [m.target_uuid for m in record.members] == [shared] * 3
    assert len({m.published_uuid for m in record.members}) == 3
    dropped = [e for e in staged_effects(sim) if e.op == "drop"]
    assert dropped and {e.uuid for e in dropped} == {shared}
    assert not any(sim.world.table(m, sim.request.candidate_name) for m in sim.world.members)
    sim.check_converged()


def test_divergent_existing_targets_block_before_any_mutation() -> None:
    sim = Sim.build()
    sim.world.table(sim.world.members[1], "target_table").rows.append((3, "drift"))  # type: ignore[union-attr]
    sim.service().fence()
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT"
    assert sim.source.seals == 0, "blocked before the source is extracted"
    assert staged_effects(sim) == [] and sim.record().phase is Phase.LOCKED


def test_target_present_on_some_members_only_blocks() -> None:
    sim = Sim.build(baseline=None)
    sim.world.put_table(sim.world.members[0], "target_table", COLUMNS, BASELINE_ROWS)
    sim.service().fence()
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT"


def test_replicated_existing_target_is_refused_in_external_mode() -> None:
    sim = Sim.build()
    for member in sim.world.members:
        sim.world.table(member, "target_table").engine = "ReplicatedMergeTree"  # type: ignore[union-attr]
    sim.service().fence()
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED"
    assert sim.source.seals == 0 and staged_effects(sim) == [], "blocked before the source is extracted"


@pytest.mark.parametrize("mode", ["external", "internal"])
@pytest.mark.parametrize("nested", ["Array(UInt64)", "Map(String, UInt64)", "JSON", "Nullable(Variant(String, UInt8))"])
def test_a_nested_or_dynamic_column_aborts_before_extraction_and_mutation(mode: ReplicationMode, nested: str) -> None:
    sim = Sim.build(mode=mode)
    sim.source = sim.world.source((*COLUMNS[:-1], ("payload", nested)), sim.rows)  # the source's typed columns
    sim.service().fence()
    code = error_code(lambda: sim.service().stage(sim.source))
    assert code == "DPONE_CLICKHOUSE_CLUSTER_COLUMN_TYPE_UNSUPPORTED"
    record = sim.record()
    assert record.phase is Phase.ABORTED and record.last_error is not None and record.last_error.code == code
    assert sim.source.seals == 0 and staged_effects(sim) == []
    later = Sim.successor(sim, run_id="scheduled__supported", rows=sim.rows)
    assert later.run_dag(tries=1) == "completed", "ABORTED is reusable: a supported run of the same target completes"


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
    assert error_code(lambda: sim.service().stage(source)) == "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_UNSUPPORTED"
    record = sim.record()
    assert record.phase is Phase.ABORTED and record.last_error is not None
    assert staged_effects(sim) == []
    oversized = sim.request.model_copy(update={"run_id": "r2", "max_source_bytes": 10})
    sim.service(oversized).fence()
    assert (
        error_code(lambda: sim.service(oversized).stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_UNSUPPORTED"
    )


def test_an_artifact_over_the_admitted_row_budget_aborts_before_any_candidate() -> None:
    """The budget is the request's (the manifest's ``load.max_source_rows``, part of the plan digest): every task of
    the operation carries the same one; an artifact with more rows never reaches a member."""
    sim = Sim.build()
    sim.request = sim.request.model_copy(update={"max_source_rows": len(NEW_ROWS) - 1})
    sim.service().fence()
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_UNSUPPORTED"
    record = sim.record()
    assert record.phase is Phase.ABORTED and record.last_error is not None
    assert staged_effects(sim) == [] and candidate_calls(sim, "member.create") == 0
    exact = Sim.build()
    exact.request = exact.request.model_copy(update={"max_source_rows": len(NEW_ROWS)})
    assert exact.run_dag(tries=1) == "completed"


def test_foreign_table_under_the_candidate_name_is_never_adopted_or_dropped() -> None:
    sim = Sim.build()
    foreign = sim.world.put_table(sim.world.members[1], sim.request.candidate_name, COLUMNS, NEW_ROWS)
    assert sim.run_dag(tries=1).endswith("DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_FOREIGN")
    assert sim.world.table(sim.world.members[1], sim.request.candidate_name) is foreign
    assert sim.record().last_error is not None
    assert sim.record().last_error.code == "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_FOREIGN"  # type: ignore[union-attr]
    assert not any(e.uuid == foreign.uuid for e in sim.world.effects)


def test_source_is_never_reread_once_an_artifact_is_bound() -> None:
    sim = Sim.build()
    sim.world.faults.schedule([(point_of(sim, "member.load", 1), FaultKind.CRASH_BEFORE)])
    assert sim.run_dag(tries=3) == "completed"
    assert sim.source.seals == 1


def test_tampered_artifact_stops_staging() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.world.faults.schedule([(point_of(sim, "member.load"), FaultKind.CRASH_BEFORE)])
    with pytest.raises(BaseException, match="simulated crash"):
        sim.service().stage(sim.source)
    artifact = next(iter(sim.world.artifacts.values()))
    artifact.data = artifact.data + b" "
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_INVALID"


def test_member_loads_run_concurrently_and_converge(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each load waits until all three are in flight: a serial schedule would break the barrier and fail the run."""
    sim = Sim.build(members=3)
    sim.settings = ProtocolSettings(dispatch_quiet_ms=120_000, member_parallelism=3)
    all_in_flight = threading.Barrier(3, timeout=10)
    threads: set[str] = set()
    original = FakeMemberSession.load

    def overlapping_load(self: FakeMemberSession, *args: Any, **kwargs: Any) -> None:
        threads.add(threading.current_thread().name)
        all_in_flight.wait()
        original(self, *args, **kwargs)

    monkeypatch.setattr(FakeMemberSession, "load", overlapping_load)
    assert sim.run_dag(tries=1) == "completed"
    assert sim.world.calls["member.load"] == 3 and len(threads) == 3
    assert all(member.rebuilds == 0 for member in sim.record().members)
    sim.check_converged()


def test_an_artifact_that_fails_verification_while_loading_stops_staging_and_never_readies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The artifact's bytes are verified while they stream into a member: a failure there stops the attempt with
    ARTIFACT_INVALID (not a rebuild loop), the part that landed never makes the member READY, and once the store
    holds the right bytes again a retry rebuilds the candidate and completes."""
    sim = Sim.build()
    original = FakeMemberSession.load

    def failing(self: FakeMemberSession, database: str, table: str, *args: Any, **kwargs: Any) -> None:
        self.member.tables[(database, table)].rows.extend(sim.rows[:1])  # blocks sent before the hash failed
        raise ArtifactInvalidError("bytes changed while streamed")

    monkeypatch.setattr(FakeMemberSession, "load", failing)
    sim.service().fence()
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_INVALID"
    assert sim.record().phase is Phase.STAGING
    assert all(member.stage is not MemberStage.READY for member in sim.record().members)  # type: ignore[attr-defined]
    monkeypatch.setattr(FakeMemberSession, "load", original)
    assert sim.run_dag() == "completed"
    sim.check_invariants()


DIVERGENT = "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_DIVERGENT"


def loaded_then_crashed() -> Sim:
    """Both candidates bound (CREATED); member 0's load applied, then the worker died before observing it."""
    sim = Sim.build()
    sim.service().fence()
    sim.world.faults.schedule([(point_of(sim, "member.load"), FaultKind.CRASH_AFTER)])
    with pytest.raises(BaseException, match="simulated crash"):
        sim.service().stage(sim.source)
    assert all(member.stage is MemberStage.CREATED for member in sim.record().members)
    return sim


def duplicated(table: Any) -> None:
    parts.append(table, table.rows[:1])  # one more INSERT of a row the candidate already holds


def divergent(table: Any) -> None:
    table.rows[0] = (table.rows[0][0], "changed")  # the artifact's row count, other content
    table.merges += 1


@pytest.mark.parametrize(
    ("change", "reason"),
    [(duplicated, "duplicated rows"), (divergent, "divergent content"), (None, "vanished after it was bound")],
)
def test_a_candidate_no_load_explains_stops_the_operation_and_is_retained(change: Any, reason: str) -> None:
    """Only an incomplete candidate (fewer rows after the ambiguous load) is rebuilt; a duplicated, divergent or
    vanished one stops staging with the objects as they are, and every retry stops the same way."""
    sim = loaded_then_crashed()
    member = sim.world.members[0]
    if change is None:
        del member.tables[(sim.world.database, sim.request.candidate_name)]
    else:
        change(sim.world.table(member, sim.request.candidate_name))
    before = sim.world.table(member, sim.request.candidate_name)
    kept = None if before is None else (before.uuid, list(before.rows))
    drops = candidate_calls(sim, "member.drop")
    for _ in range(2):
        with pytest.raises(DponeError) as stopped:
            sim.service().stage(sim.source)
        assert stopped.value.code == DIVERGENT and reason in stopped.value.detail
    after = sim.world.table(member, sim.request.candidate_name)
    assert (None if after is None else (after.uuid, after.rows)) == kept
    assert candidate_calls(sim, "member.drop") == drops
    record = sim.record()
    assert record.phase is Phase.STAGING and all(m.rebuilds == 0 for m in record.members)
    assert record.last_error is not None and record.last_error.code == DIVERGENT
    sim.world.clock.advance(CREATE_WINDOW_MS)  # no candidate CREATE of a stage try can still arrive
    assert sim.service().abort().phase == "ABORTED"  # the operator's way out drops only the owned candidates


def test_an_incomplete_candidate_is_rebuilt_at_most_max_rebuilds_times() -> None:
    """Every load applies half its rows and loses the response: each step rebuilds from the same artifact until the
    bound, then staging stops with the last candidate retained and nothing more is sent."""
    sim = Sim.build()
    sim.service().fence()
    for nth in range(1, 4 * MAX_REBUILDS_PER_MEMBER):
        sim.world.faults.at_next("member.load", FaultKind.PARTIAL, nth)
    outcomes: Counter[str] = Counter()
    for _ in range(3 * MAX_REBUILDS_PER_MEMBER):
        with pytest.raises(DponeError) as failed:
            sim.service().stage(sim.source)
        outcomes[failed.value.code] += 1
        if failed.value.code == "DPONE_CLICKHOUSE_CLUSTER_STAGING_REBUILD_LIMIT":
            break
    assert outcomes["DPONE_CLICKHOUSE_CLUSTER_STAGING_REBUILD_LIMIT"] == 1
    record = sim.record()
    assert record.phase is Phase.STAGING
    assert max(member.rebuilds for member in record.members) == MAX_REBUILDS_PER_MEMBER
    loads = sim.world.calls["member.load"]
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_STAGING_REBUILD_LIMIT"
    assert sim.world.calls["member.load"] == loads and sim.source.seals == 1
    assert sum(1 for table in (sim.world.table(m, sim.request.candidate_name) for m in sim.world.members) if table)


def test_the_stage_reports_each_load_and_a_rebuild_with_what_the_candidate_held() -> None:
    """The progress facts a stage reports (what its task log shows): each load as it starts and as it is answered or
    not, and the rebuild of a partially loaded candidate with its row counts; members by their one label."""
    sim = Sim.build(members=3)
    sim.world.faults.schedule([(point_of(sim, "member.load", 1), FaultKind.PARTIAL)])
    sim.service().fence()
    facts: list[ProgressFact] = []
    ports = dataclasses.replace(sim.world.ports(), progress=facts.append)
    PublicationService(ports, sim.request, sim.settings).stage(sim.source)
    record = sim.record()
    labels = {member.member_id: member.label for member in sim.service()._begin()[0].inventory.members}
    rebuilt = labels[record.members[1].member_id]
    assert all(re.fullmatch(r"m[0-9a-f]{16} \(shard \d+, replica \d+\)", label) for label in labels.values())
    started = [fact.member for fact in facts if isinstance(fact, MemberLoadStarted)]
    assert sorted(started) == sorted([*labels.values(), rebuilt]), "one load per member, and the rebuilt one again"
    assert all(
        (fact.artifact_sha256, fact.rows) == (record.artifact.sha256, len(NEW_ROWS))  # type: ignore[union-attr]
        for fact in facts
        if isinstance(fact, MemberLoadStarted)
    )
    assert [fact.member for fact in facts if isinstance(fact, MemberLoadUnanswered)] == [rebuilt]
    (rebuild,) = [fact for fact in facts if isinstance(fact, CandidateRebuilt)]
    assert (rebuild.member, rebuild.rebuild, rebuild.limit) == (rebuilt, 1, MAX_REBUILDS_PER_MEMBER)
    assert rebuild.held_rows is not None and 0 < rebuild.held_rows < len(NEW_ROWS) == rebuild.artifact_rows
    answered = [fact.member for fact in facts if isinstance(fact, MemberLoadAnswered)]
    assert sorted(answered) == sorted(labels.values())
    assert facts.index(rebuild) < max(i for i, fact in enumerate(facts) if isinstance(fact, MemberLoadStarted))
