"""Target acceptance of durable quality replay (seed 002) on the fake world: null and distinct counts bound from the
staged candidate, the bounded reader's budget and failures, and the content-comparing generation guard.

Each test drives the tasks like Airflow does and asserts the capsule read back from the authority and the reads the
fake reader answered; the reader is the same fake that passes ``tests/cluster/test_acceptance_reader.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from airflow_provider_dpone.cluster.ports import ReplicaStatus
from airflow_provider_dpone.cluster.protocol.results import Committed, Completed
from airflow_provider_dpone.cluster.protocol.service import PublicationService
from airflow_provider_dpone.cluster.values.authority.internal import InternalAuthorityRecordV2
from airflow_provider_dpone.cluster.values.inventory import AdmittedMember
from airflow_provider_dpone.cluster.values.quality_capsule import QualityBinding
from airflow_provider_dpone.cluster.values.quality_read import ColumnCounts, Observation, TargetReadPlan
from airflow_provider_dpone.core.manifest.cluster import QualityPolicy
from tests.support.cluster.sim import Sim, error_code
from tests.support.fakes.acceptance import FakeAcceptanceReader
from tests.support.fakes.faults import FaultKind
from tests.support.fakes.ports import FakeMemberSession

pytestmark = pytest.mark.protocol

FAILED = "DPONE_REPLAY_QUALITY_EVIDENCE_FAILED"
INCOMPLETE = "DPONE_REPLAY_QUALITY_EVIDENCE_INCOMPLETE"
MISMATCH = "DPONE_REPLAY_QUALITY_EVIDENCE_MISMATCH"
UNSUPPORTED = "DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED"
ROWS = ((10, "a"), (11, "a"), (12, "b"), (13, "a"))
ALL = QualityPolicy(min_rows=1, target_metrics=("row_count", "null_count", "distinct_count"))


def durable(policy: QualityPolicy = ALL, members: int = 3) -> Sim:
    sim = Sim.build(members=members, mode="internal", rows=ROWS)
    sim.request = sim.request.model_copy(update={"quality": policy})
    return sim


def capsule(sim: Sim) -> QualityBinding:
    record = sim.record()
    assert isinstance(record, InternalAuthorityRecordV2) and record.quality is not None
    return record.quality


def staged(sim: Sim) -> None:
    assert sim.service().fence(sim.source.columns) and sim.service().stage(sim.source)


def first_replica(sim: Sim) -> str:
    return min(member.member_id for member in sim.world.members)


def test_null_and_distinct_counts_of_the_target_equal_the_staged_ones_on_one_replica() -> None:
    sim = durable()
    assert sim.run_dag() == "completed"
    quality = capsule(sim)
    core = quality.core
    assert quality.state == "COMPLETE" and core.target_plan is not None
    assert core.target_plan.selected == ("id", "name") and core.requested == ALL.target_metrics
    expected = (
        ColumnCounts(name="id", null_count=0, distinct_count=4),
        ColumnCounts(name="name", null_count=0, distinct_count=2),
    )
    assert core.expected is not None and core.expected.columns == expected and core.expected.row_count == 4
    assert quality.target is not None and quality.target.columns == expected and quality.target.row_count == 4
    reads = sim.world.acceptance.reads
    assert reads == {(first_replica(sim), sim.request.candidate_name): 1, (first_replica(sim), "target_table"): 1}


def test_target_columns_select_what_is_counted() -> None:
    sim = durable(ALL.model_copy(update={"target_columns": ("name",)}))
    assert sim.run_dag() == "completed"
    target = capsule(sim).target
    assert target is not None and [column.name for column in target.columns] == ["name"]


def nothing_written(sim: Sim) -> bool:
    """No authority write, no DDL, no member mutation, no artifact opened: the world is as the fixture left it."""
    calls = sim.world.calls
    touched = ("authority.create", "authority.cas", "ddl.dispatch", "member.create", "member.load", "member.drop")
    return sim.request.target_key not in sim.world.keeper and not any(calls[name] for name in touched)


@pytest.mark.parametrize(
    "policy",
    [
        ALL.model_copy(update={"target_columns": ("nope",)}),
        ALL.model_copy(update={"target_columns": ("name", "nope")}),
    ],
)
def test_an_unknown_target_column_is_refused_by_the_fence_before_anything_is_written(policy: QualityPolicy) -> None:
    sim = durable(policy)
    assert sim.run_dag(tries=1) == f"stopped at fence: {UNSUPPORTED}"
    assert nothing_written(sim)
    assert error_code(lambda: sim.service().stage(sim.source)) == UNSUPPORTED  # the stage refuses it first, too
    assert nothing_written(sim) and sim.source.seals == 0


def test_target_counts_that_differ_from_the_staged_ones_are_failed_durably(monkeypatch: pytest.MonkeyPatch) -> None:
    original = FakeAcceptanceReader.observe

    def lying(
        self: FakeAcceptanceReader, members: tuple[AdmittedMember, ...], plan: TargetReadPlan, *, budget_ms: int
    ) -> Observation:
        observation = original(self, members, plan, budget_ms=budget_ms)
        counts = observation.counts
        if plan.table != "target_table" or counts is None:
            return observation
        changed = counts.columns[1].model_copy(update={"distinct_count": 3})
        lie = counts.model_copy(update={"columns": (counts.columns[0], changed)})
        return observation.model_copy(update={"counts": lie})

    sim = durable()
    staged(sim)
    monkeypatch.setattr(FakeAcceptanceReader, "observe", lying)
    assert error_code(lambda: sim.service().publish()) == FAILED
    failed = capsule(sim)
    assert failed.state == "FAILED" and failed.failure == "target_acceptance"
    monkeypatch.undo()
    assert error_code(lambda: sim.service().publish()) == FAILED  # never relabelled from current counts
    assert error_code(lambda: sim.service().cleanup()) == FAILED
    assert capsule(sim) == failed


def test_a_read_past_the_shared_budget_is_incomplete_and_the_retry_observes_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim = durable()
    staged(sim)
    sim.world.acceptance.slow_ms[first_replica(sim)] = 61_000
    assert error_code(lambda: sim.service().publish()) == INCOMPLETE
    assert capsule(sim).state == "TARGET_PENDING" and capsule(sim).target is None
    original = FakeMemberSession.replica_status

    def slow_status(self: FakeMemberSession, database: str, table: str) -> ReplicaStatus | None:
        self.world.clock.advance(1_000)  # each guard read takes a second
        return original(self, database, table)

    monkeypatch.setattr(FakeMemberSession, "replica_status", slow_status)
    sim.world.acceptance.slow_ms[first_replica(sim)] = 58_000  # within 60 s alone, not with the guard reads
    assert error_code(lambda: sim.service().publish()) == INCOMPLETE
    assert capsule(sim).state == "TARGET_PENDING"
    sim.world.acceptance.slow_ms.clear()
    assert isinstance(sim.service().publish(), Committed)
    quality = capsule(sim)
    assert quality.state == "COMPLETE" and quality.target is not None and quality.target.elapsed_ms < 60_000


@pytest.mark.parametrize("kind", [FaultKind.LOSE_RESPONSE, FaultKind.CRASH_AFTER])
def test_an_unanswered_or_crashed_target_read_never_completes(kind: FaultKind) -> None:
    sim = durable()
    staged(sim)
    reads = sim.world.faults.trace.count("member.acceptance")

    sim.world.faults.at_next("member.acceptance", kind)
    outcome: Callable[[], object] = lambda: sim.service().publish()  # noqa: E731
    if kind is FaultKind.LOSE_RESPONSE:
        assert error_code(outcome) == INCOMPLETE
    else:
        with pytest.raises(BaseException, match="simulated crash"):
            outcome()
    assert sim.world.faults.trace.count("member.acceptance") == reads + 1
    assert capsule(sim).state == "TARGET_PENDING" and sim.world.faults.fired[0][1] == "member.acceptance"
    assert isinstance(sim.service().publish(), Committed) and capsule(sim).state == "COMPLETE"


def test_a_partial_answer_is_incomplete(monkeypatch: pytest.MonkeyPatch) -> None:
    original = FakeAcceptanceReader.observe

    def partial(
        self: FakeAcceptanceReader, members: tuple[AdmittedMember, ...], plan: TargetReadPlan, *, budget_ms: int
    ) -> Observation:
        observation = original(self, members, plan, budget_ms=budget_ms)
        if plan.table != "target_table" or observation.counts is None:
            return observation
        counts = observation.counts.model_copy(update={"columns": observation.counts.columns[:1]})
        return observation.model_copy(update={"counts": counts})

    sim = durable()
    staged(sim)
    monkeypatch.setattr(FakeAcceptanceReader, "observe", partial)
    assert error_code(lambda: sim.service().publish()) == INCOMPLETE
    assert capsule(sim).state == "TARGET_PENDING"


def test_without_a_reader_target_obligations_are_refused_before_the_fence_and_source_staged_only_needs_none() -> None:
    sim = durable()
    ports = replace(sim.world.ports(), acceptance=None)
    assert error_code(lambda: PublicationService(ports, sim.request, sim.settings).fence()) == UNSUPPORTED
    assert nothing_written(sim)
    assert error_code(lambda: PublicationService(ports, sim.request, sim.settings).stage(sim.source)) == UNSUPPORTED
    assert nothing_written(sim)
    plain = durable(QualityPolicy(min_rows=1, target_metrics=()))
    ports = replace(plain.world.ports(), acceptance=None)
    for step in ("fence", "stage", "publish", "cleanup"):
        service = PublicationService(ports, plain.request, plain.settings)
        result = service.stage(plain.source) if step == "stage" else getattr(service, step)()
        assert result is not None
    assert capsule(plain).state == "COMPLETE" and capsule(plain).core.schema_ == "dpone.quality.replay.v1"


def test_a_merge_after_complete_is_re_digested_by_the_guard_and_never_rescanned() -> None:
    """A background merge rewrites parts (the verified parts digest no longer matches) but not rows: the guard
    digests that replica's content again and accepts it; no target read happens after COMPLETE."""
    sim = durable()
    assert sim.run_dag() == "completed"
    reads = sum(sim.world.acceptance.reads.values())
    merged = sim.world.table(sim.world.members[2], "target_table")
    assert merged is not None
    merged.merges += 1
    observes = sim.world.calls["member.observe"]
    assert isinstance(sim.service().cleanup(), Completed)
    assert sim.world.calls["member.observe"] > observes and sum(sim.world.acceptance.reads.values()) == reads
    merged.rows.append((99, "unmanaged"))
    assert error_code(lambda: sim.service().cleanup()) == MISMATCH


def unmanaged_row(sim: Sim) -> None:
    table = sim.world.table(sim.world.members[1], "target_table")
    assert table is not None
    table.rows.append((99, "unmanaged"))


def other_schema(sim: Sim) -> None:
    table = sim.world.table(sim.world.members[1], "target_table")
    assert table is not None
    table.columns = (("id", "UInt64"), ("name", "Nullable(String)"))


def read_only(sim: Sim) -> None:
    sim.world.members[2].replica_readonly = True


def dropped(sim: Sim) -> None:
    del sim.world.members[0].tables[(sim.world.database, "target_table")]


@pytest.mark.parametrize(
    ("change", "code"),
    [(unmanaged_row, MISMATCH), (other_schema, MISMATCH), (read_only, INCOMPLETE), (dropped, MISMATCH)],
)
def test_a_source_staged_only_capsule_replays_with_the_generation_schema_and_health_guard(
    change: Callable[[Sim], None], code: str
) -> None:
    """A v1 capsule (no target metrics, no reader) is checked on the target like a v2 one: every sealed replica
    holds the managed generation with the sealed schema and content, healthy; never through a reader."""
    sim = durable(QualityPolicy(min_rows=1, target_metrics=()))
    sim.world.acceptance = None  # type: ignore[assignment]
    assert sim.run_dag() == "completed"
    assert capsule(sim).core.schema_ == "dpone.quality.replay.v1" and capsule(sim).state == "COMPLETE"
    assert isinstance(sim.service().cleanup(), Completed)  # the replay of an intact target passes
    evidence = sim.world.keeper[sim.request.target_key]
    change(sim)
    assert error_code(lambda: sim.service().cleanup()) == code
    assert error_code(lambda: sim.service().publish()) == code
    assert sim.world.keeper[sim.request.target_key] == evidence  # a refused replay leaves the evidence as it was
