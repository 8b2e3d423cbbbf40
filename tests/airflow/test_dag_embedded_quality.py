"""The durable quality-replay example DAG under real Airflow on a 3-replica embedded cluster (internal replication).

The operators build the real adapters; the authority is the real KeeperMap table; the candidate and target are
``ReplicatedMergeTree`` tables replicated by the embedded cluster. Verdicts are read from every replica directly and
from the authority record: the capsule must be COMPLETE in a ``.v2`` record, with a target count equal to the source
on one replica, and a failing ``min_rows`` gate must block publication with ``..._FAILED``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from dpone_embedded import EmbeddedCluster

from airflow_provider_dpone.cluster.values.authority.internal import INTERNAL_SCHEMA_V2, InternalAuthorityRecordV2
from tests.support.airflow.dag_runner import (
    RunOutcome,
    assert_redacted,
    configure,
    export_connection,
    load_example,
    run_example,
)
from tests.support.airflow.embedded_example import embedded_manifest
from tests.support.cluster.replica_checks import authority_record, replica_contents, source_content, table_facts

PASSWORD = "pw-Quality-Redact-7e2a"
REPLICAS = 3
SOURCE_ROWS = 30
EXAMPLE_FILE = "clickhouse_internal_quality_replay.py"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.embedded_cluster(members=REPLICAS, internal_replication=True, password=PASSWORD),
]


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder, EXAMPLE_FILE)


@pytest.fixture
def manifest(
    example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    export_connection(monkeypatch, embedded_cluster)
    content = embedded_manifest(example, embedded_cluster, fresh_database, rows=SOURCE_ROWS)
    assert content["sink"]["options"] == {"durable_quality_replay": True}
    yield content
    configure(example, None)


def assert_complete_capsule(cluster: Any, database: str, outcome: RunOutcome, log: str, *, password: str) -> None:
    """A durable run's verdicts, read from every replica and the authority (also on the compose cluster,
    ``test_dag_real.py``): exactly the source everywhere, a COMPLETE capsule in a v2 record, the receipt and the log
    saying so and carrying nothing secret."""
    source = source_content(cluster, database)
    assert replica_contents(cluster, database) == [source] * len(cluster.members)
    record = authority_record(cluster, database)
    assert isinstance(record, InternalAuthorityRecordV2) and record.schema_ == INTERNAL_SCHEMA_V2
    assert record.phase.value == "COMPLETED"
    quality = record.quality
    assert quality is not None and quality.state == "COMPLETE" and quality.core.passed
    assert quality.core_digest == quality.core.digest()
    assert quality.target is not None and quality.target.row_count == source.rows == SOURCE_ROWS
    assert quality.target.member_id == min(record.member_ids())  # one admitted replica, never a sum
    expected = quality.core.expected
    assert expected is not None and quality.core.target_plan is not None
    assert [column.name for column in quality.target.columns] == [name for name, _ in quality.core.target_plan.columns]
    assert quality.target.columns == expected.columns  # null and distinct counts, read by the bounded worker
    assert all(column.distinct_count and column.distinct_count <= SOURCE_ROWS for column in quality.target.columns)
    assert all(column.null_count is not None for column in quality.target.columns)
    assert [count for _, count in quality.core.staged_rows] == [SOURCE_ROWS] * len(cluster.members)
    receipt = outcome.xcom["cleanup"]
    assert receipt["schema"] == "dpone.clickhouse.cluster-full-refresh-receipt.v2"
    assert receipt["quality"]["state"] == "COMPLETE" and receipt["quality"]["target_row_count"] == SOURCE_ROWS
    assert receipt["quality"]["target_columns"] == [column.model_dump() for column in quality.target.columns]
    assert outcome.xcom["stage"]["quality"]["state"] == "PREPARED"
    assert "quality capsule PREPARED" in log and "quality capsule COMPLETE" in log
    assert_redacted("\n".join([log, repr(outcome.xcom)]), cluster, password)


def assert_min_rows_gate_blocked(cluster: Any, database: str, outcome: RunOutcome, log: str) -> None:
    """A failing ``min_rows`` gate: the stage fails with the code, the record keeps the FAILED capsule, and no replica
    holds a target."""
    assert outcome.states["stage"] == "failed" and outcome.states["publish"] != "success"
    assert "DPONE_REPLAY_QUALITY_EVIDENCE_FAILED" in log
    record = authority_record(cluster, database)
    assert isinstance(record, InternalAuthorityRecordV2) and record.phase.value == "STAGED"
    assert record.quality is not None and record.quality.state == "FAILED" and record.quality.failure == "min_rows"
    assert replica_contents(cluster, database) == [None] * len(cluster.members)  # nothing was published
    names = [[name for name, _, _ in tables] for tables in table_facts(cluster, database)]
    assert all("target_table" not in tables for tables in names)


def test_a_durable_run_ends_with_a_complete_capsule_in_a_v2_record(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    manifest: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
) -> None:
    configure(example, None, manifest=manifest, poll_interval=0.2)
    capfd.readouterr()
    outcome = run_example(example, logical_date=datetime(2026, 6, 1, tzinfo=UTC))
    log = capfd.readouterr().out
    assert outcome.succeeded, (outcome.states, [line for line in log.splitlines() if "DPONE_" in line])
    assert_complete_capsule(embedded_cluster, fresh_database, outcome, log, password=PASSWORD)


def test_a_failing_min_rows_gate_blocks_publication(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    manifest: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
) -> None:
    manifest = {**manifest, "quality": {"min_rows": SOURCE_ROWS + 1, "target_metrics": ["row_count"]}}
    configure(example, None, manifest=manifest, poll_interval=0.2, retries=1)
    capfd.readouterr()
    outcome = run_example(example, logical_date=datetime(2026, 6, 2, tzinfo=UTC))
    log = capfd.readouterr().out
    assert_min_rows_gate_blocked(embedded_cluster, fresh_database, outcome, log)


def test_lost_responses_of_both_completion_writes_resume_on_publish_retries(
    example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str, manifest: dict[str, Any]
) -> None:
    """The KeeperMap compare-and-set that records TARGET_PENDING, then the one that records COMPLETE, each take
    effect and lose their response: each publish try stops (outcome unknown), the next re-reads the authority and
    resumes from the durable state: observe again after TARGET_PENDING, validate without observing after COMPLETE."""
    faults = embedded_cluster.faults
    faults.lose_response("coordinator", match='^ALTER TABLE .*"state":"TARGET_PENDING"')
    faults.lose_response("coordinator", match='^ALTER TABLE .*"state":"COMPLETE"')
    configure(example, None, manifest=manifest, poll_interval=0.2, retries=3)
    outcome = run_example(example, logical_date=datetime(2026, 6, 3, tzinfo=UTC))
    assert outcome.succeeded, outcome.states
    assert not faults.armed(), "both completion writes lost their response"
    assert outcome.tries["publish"] == 3
    record = authority_record(embedded_cluster, fresh_database)
    assert isinstance(record, InternalAuthorityRecordV2) and record.phase.value == "COMPLETED"
    quality = record.quality
    assert quality is not None and quality.state == "COMPLETE" and quality.target is not None
    assert quality.target.row_count == SOURCE_ROWS
    assert quality.pending_version is not None and quality.completion_version == quality.pending_version + 1
    source = source_content(embedded_cluster, fresh_database)
    assert replica_contents(embedded_cluster, fresh_database) == [source] * REPLICAS


READS: list[tuple[str, bool, int]] = []


def counting_reader(connections: Any) -> Any:
    """A ``target_acceptance_reader`` factory: the default worker-process reader over the admitted sink connection,
    recording which table each read observed and how much budget it was given."""
    from airflow_provider_dpone.cluster.clickhouse.acceptance_reader import SubprocessAcceptanceReader

    inner = SubprocessAcceptanceReader(connections)

    class Counting:
        def observe(self, members: Any, plan: Any, *, budget_ms: int) -> Any:
            READS.append((plan.table, plan.scan is not None, budget_ms))
            return inner.observe(members, plan, budget_ms=budget_ms)

    return Counting()


def test_target_acceptance_reader_of_the_operators_builds_the_reader_from_the_sink_connection(
    example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str, manifest: dict[str, Any]
) -> None:
    configure(example, None, manifest=manifest, poll_interval=0.2)
    READS.clear()
    try:
        for task in example.dag.tasks:
            task.target_acceptance_reader = counting_reader
        outcome = run_example(example, logical_date=datetime(2026, 6, 4, tzinfo=UTC))
    finally:
        for task in example.dag.tasks:
            task.target_acceptance_reader = None
    assert outcome.succeeded, outcome.states
    record = authority_record(embedded_cluster, fresh_database)
    assert isinstance(record, InternalAuthorityRecordV2) and record.quality is not None
    assert record.quality.state == "COMPLETE"
    scans = [table for table, scan, _ in READS if scan]
    assert scans == [record.candidate_name, "target_table"]  # the staged observation, then the target's; no rescan
    assert ("target_table", False) in [(table, scan) for table, scan, _ in READS]  # the guard before TARGET_PENDING
    assert all(0 < budget <= 60_000 for _, _, budget in READS)


def test_a_target_read_that_fails_is_incomplete_and_airflow_retries_it_from_the_retained_state(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    manifest: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The target's aggregate read fails inside the scanned replica's engine: the bounded worker answers "could not
    ask", the publish try fails with the retryable ``..._INCOMPLETE`` and leaves the capsule TARGET_PENDING, and
    Airflow's retry of the same run observes again and completes it."""
    for member in embedded_cluster.members:  # the scanned replica is the first sealed one; arm every replica
        embedded_cluster.faults.fail_next_statement(member, 241, match="uniqExact.*`target_table`")
    configure(example, None, manifest=manifest, poll_interval=0.2, retries=2)
    capfd.readouterr()
    outcome = run_example(example, logical_date=datetime(2026, 6, 5, tzinfo=UTC))
    log = capfd.readouterr().out
    assert outcome.succeeded, outcome.states
    assert outcome.tries["publish"] == 2 and "DPONE_REPLAY_QUALITY_EVIDENCE_INCOMPLETE" in log
    assert len(embedded_cluster.faults.armed()) == REPLICAS - 1  # exactly one replica was scanned
    record = authority_record(embedded_cluster, fresh_database)
    assert isinstance(record, InternalAuthorityRecordV2) and record.quality is not None
    assert record.quality.state == "COMPLETE" and record.quality.target is not None
    assert record.quality.target.row_count == SOURCE_ROWS


def test_a_replayed_run_validates_under_the_reader_fence_and_releases_it_for_the_next_run(
    example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str, manifest: dict[str, Any]
) -> None:
    """A clear of a completed run replays every task: publish and cleanup validate the COMPLETE capsule under the
    durable reader fence in the real KeeperMap record. The first fence write loses its response (it took effect):
    that try is INCOMPLETE, the retry takes the orphaned fence over and releases it, and the next DAG run takes the
    target at once."""
    configure(example, None, manifest=manifest, poll_interval=0.2, retries=2)
    first = datetime(2026, 6, 6, tzinfo=UTC)
    assert run_example(example, logical_date=first).succeeded
    completed = authority_record(embedded_cluster, fresh_database)
    embedded_cluster.faults.lose_response("coordinator", match='^ALTER TABLE .*"reader":')
    replay = run_example(example, logical_date=first)  # the same run id: a same-operation replay
    assert replay.succeeded, replay.states
    assert not embedded_cluster.faults.armed() and replay.tries["publish"] == 2
    record = authority_record(embedded_cluster, fresh_database)
    assert isinstance(record, InternalAuthorityRecordV2) and record.operation_id == completed.operation_id
    assert record.phase.value == "COMPLETED" and record.reader is None and record.quality == completed.quality
    successor = run_example(example, logical_date=datetime(2026, 6, 7, tzinfo=UTC))
    assert successor.succeeded, successor.states
    assert authority_record(embedded_cluster, fresh_database).operation_id != completed.operation_id


def test_an_unknown_target_column_fails_the_fence_before_anything_is_written(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    manifest: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The fence describes the source (metadata only) and refuses the selection: no authority row and no table exist
    afterwards, so nothing has to be aborted before a corrected manifest runs."""
    policy = {"target_metrics": ["row_count", "null_count"], "target_columns": ["id", "not_a_column"]}
    configure(example, None, manifest={**manifest, "quality": policy}, poll_interval=0.2, retries=1)
    before = table_facts(embedded_cluster, fresh_database)
    capfd.readouterr()
    outcome = run_example(example, logical_date=datetime(2026, 6, 4, tzinfo=UTC))
    log = capfd.readouterr().out
    assert outcome.states["fence"] == "failed" and outcome.tries["fence"] == 1  # terminal: not retried
    assert all(outcome.states[task] != "success" for task in ("stage", "publish", "cleanup"))
    assert "DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED" in log
    assert authority_record(embedded_cluster, fresh_database) is None
    assert table_facts(embedded_cluster, fresh_database) == before


def test_source_staged_only_evidence_completes_after_the_generation_guard_on_every_replica(
    example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str, manifest: dict[str, Any]
) -> None:
    """A v1 capsule starts no reader; its completion and every replay still guard the target on each replica's own
    session (generation, sealed schema, health), here on real engines."""
    configure(example, None, manifest={**manifest, "quality": {"target_metrics": []}}, poll_interval=0.2)
    outcome = run_example(example, logical_date=datetime(2026, 6, 5, tzinfo=UTC))
    assert outcome.succeeded, outcome.states
    record = authority_record(embedded_cluster, fresh_database)
    assert isinstance(record, InternalAuthorityRecordV2) and record.phase.value == "COMPLETED"
    quality = record.quality
    assert quality is not None and quality.state == "COMPLETE" and quality.core.schema_ == "dpone.quality.replay.v1"
    source = source_content(embedded_cluster, fresh_database)
    assert replica_contents(embedded_cluster, fresh_database) == [source] * REPLICAS
