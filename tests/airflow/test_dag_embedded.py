"""The example DAG under real Airflow on the embedded ClickHouse cluster (real engines, real clickhouse-connect).

Nothing is faked here: the operators build the real adapters through the hook from the ``dpone_clickhouse_default``
connection (``AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT``), the trigger polls the real (emulated) distributed DDL queue
with the async client, and faults are armed in the embedded cluster's processes. Each test publishes into a fresh
database; assertions read every member directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from dpone_embedded import EmbeddedCluster

from airflow_provider_dpone.cluster.ports import QueueEntry
from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook
from tests.support.airflow.dag_runner import (
    INTERNAL_EXAMPLE_FILE,
    RunOutcome,
    assert_mode_mismatch_before_source_io,
    assert_redacted,
    configure,
    export_connection,
    load_example,
    run_example,
)
from tests.support.airflow.embedded_example import (
    embedded_manifest,
    existing_target,
    member_rows,
    member_tables,
    member_uuids,
)
from tests.support.cluster.after_commit_write import run_with_a_write_before_committed

PASSWORD = "pw-Redact-Me-7f3e9a"
pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2, password=PASSWORD)]

SOURCE_ROWS = 40


def resume_when_pending(monkeypatch: pytest.MonkeyPatch, cluster: EmbeddedCluster, member: str) -> list[str]:
    """The trigger's hook reads the real queue; after a poll that shows the entry unfinished, ``member`` is resumed
    (an operator fixing the member while the task waits in the triggerer). Returns the members still to resume."""
    paused = [member]
    read = DponeClickHouseHook.aqueue_entries

    async def resuming(
        hook: DponeClickHouseHook, cluster_name: str, correlation_token: str, entry: str | None = None
    ) -> tuple[QueueEntry, ...]:
        entries = await read(hook, cluster_name, correlation_token, entry)
        if entries and entries[0].finished < len(entries[0].hosts) and paused:
            cluster.faults.resume(paused.pop())
        return entries

    monkeypatch.setattr(DponeClickHouseHook, "aqueue_entries", resuming)
    return paused


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder)


@pytest.fixture
def published(
    example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """A fresh database with the demo objects, the connection exported, and the DAG pointed at that database."""
    export_connection(monkeypatch, embedded_cluster)
    content = embedded_manifest(example, embedded_cluster, fresh_database, rows=SOURCE_ROWS)
    configure(example, None, manifest=content, poll_interval=0.2)
    yield {"database": fresh_database, "manifest": content}
    configure(example, None)


def _run(example: ModuleType, day: int) -> RunOutcome:
    return run_example(example, logical_date=datetime(2026, 4, day, tzinfo=UTC))


def test_two_runs_complete_and_the_second_replaces_the_first(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    published: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
) -> None:
    database = published["database"]
    capfd.readouterr()
    first = _run(example, 1)
    assert first.succeeded, first.states
    receipt = first.xcom["cleanup"]
    assert (receipt["phase"], receipt["baseline"], receipt["publication_kind"]) == ("COMPLETED", "absent", "rename")
    assert member_rows(embedded_cluster, database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2

    client = embedded_cluster.client()
    try:
        client.command(
            f"INSERT INTO `{database}`.source_table (id, name, amount, updated_at) VALUES (9001, 'x', NULL, 0)"
        )
    finally:
        client.close()
    second = _run(example, 2)
    assert second.succeeded, second.states
    assert second.xcom["cleanup"]["baseline"] == "existing"
    assert second.xcom["cleanup"]["publication_kind"] == "exchange"
    assert second.xcom["cleanup"]["generation_id"] != receipt["generation_id"]
    assert member_rows(embedded_cluster, database) == [(SOURCE_ROWS + 1, SOURCE_ROWS + 1)] * 2
    authority = "__dpone_cluster_publication_authority"
    assert member_tables(embedded_cluster, database) == [[authority, "target_table"]] * 2, (
        "predecessor and candidates gone"
    )

    # redaction: nothing a human or a downstream task sees carries the password, a host, a port or a row value
    captured = capfd.readouterr()
    seen = "\n".join([captured.out, captured.err, repr(first.xcom), repr(second.xcom)])
    assert_redacted(seen, embedded_cluster, PASSWORD)


def test_faults_on_every_boundary_are_retried_or_resolved_without_duplicates(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    published: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """First run (absent target): lost load response on member 1, lost CREATE response on member 2, lost RENAME
    response. Second run (existing target): member 2's DDL worker paused during the EXCHANGE (the publish task
    defers; the trigger polls the real queue through the async client; the member resumes) and a lost cleanup
    response. Both converge with every row exactly once and nothing left behind."""
    database = published["database"]
    faults = embedded_cluster.faults
    faults.lose_response("member1", match="^INSERT INTO")
    faults.lose_response("member2", match="^CREATE TABLE .*__dpone_ext_")  # the candidate's, not the fence's probe
    faults.lose_response("coordinator", match="^RENAME TABLE")
    first = _run(example, 3)
    assert first.succeeded, first.states
    assert not faults.armed(), "every armed fault fired"
    assert member_rows(embedded_cluster, database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2

    client = embedded_cluster.client()
    try:
        client.command(f"INSERT INTO `{database}`.source_table (id, name, amount, updated_at) VALUES (9002, 'y', 1, 0)")
    finally:
        client.close()
    faults.lose_response("coordinator", match="^DROP TABLE")
    faults.pause("member2")
    paused = resume_when_pending(monkeypatch, embedded_cluster, "member2")
    configure(example, None, manifest=published["manifest"], poll_interval=0.2)
    capfd.readouterr()
    second = _run(example, 4)
    log = capfd.readouterr().out
    assert second.succeeded, second.states
    assert not paused, "the trigger saw the entry pending and resumed the member"
    assert not faults.armed(), "every armed fault fired"
    assert "woken by the queue trigger" in log, "publish waited in the trigger, not in a retry"
    assert second.tries["publish"] == 1
    assert (second.xcom["cleanup"]["baseline"], second.xcom["cleanup"]["publication_kind"]) == ("existing", "exchange")
    assert member_rows(embedded_cluster, database) == [(SOURCE_ROWS + 1, SOURCE_ROWS + 1)] * 2
    authority = "__dpone_cluster_publication_authority"
    assert member_tables(embedded_cluster, database) == [[authority, "target_table"]] * 2


def test_an_existing_equal_target_is_adopted_and_a_lost_exchange_response_is_not_resent(
    example: ModuleType, embedded_cluster: EmbeddedCluster, published: dict[str, Any]
) -> None:
    database = published["database"]
    existing_target(embedded_cluster, database)
    embedded_cluster.faults.lose_response("coordinator", match="^EXCHANGE TABLES")
    outcome = _run(example, 6)
    assert outcome.succeeded, outcome.states
    assert not embedded_cluster.faults.armed()
    assert outcome.xcom["cleanup"]["dispatch_epoch"] == 1, "one publication permit: the exchange was sent once"
    assert (outcome.xcom["cleanup"]["baseline"], outcome.xcom["cleanup"]["publication_kind"]) == (
        "existing",
        "exchange",
    )
    assert member_rows(embedded_cluster, database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2


def test_a_target_created_on_cluster_shares_one_uuid_and_is_adopted_then_replaced(
    example: ModuleType, embedded_cluster: EmbeddedCluster, published: dict[str, Any]
) -> None:
    """``CREATE TABLE ... ON CLUSTER`` in an Atomic database gives every member the same UUID: adopted as the
    baseline, exchanged on every member, and exactly that predecessor dropped everywhere."""
    database = published["database"]
    tables_before = member_uuids(embedded_cluster, database)
    existing_target(embedded_cluster, database, on_cluster=True)
    created = [uuids - old for uuids, old in zip(member_uuids(embedded_cluster, database), tables_before, strict=True)]
    assert len(created[0]) == 1 and created[0] == created[1], f"one UUID on every member: {created}"
    assert member_rows(embedded_cluster, database) == [(2, 2)] * 2
    outcome = _run(example, 7)
    assert outcome.succeeded, outcome.states
    assert (outcome.xcom["cleanup"]["baseline"], outcome.xcom["cleanup"]["publication_kind"]) == (
        "existing",
        "exchange",
    )
    assert member_rows(embedded_cluster, database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2
    authority = "__dpone_cluster_publication_authority"
    assert member_tables(embedded_cluster, database) == [[authority, "target_table"]] * 2, "predecessor dropped"
    targets = [uuids - old for uuids, old in zip(member_uuids(embedded_cluster, database), tables_before, strict=True)]
    assert all(len(uuids) == 1 for uuids in targets) and targets[0] != targets[1], "each member its own candidate"
    assert not (targets[0] | targets[1]) & created[0], "the shared predecessor is gone from every member"


def test_a_racing_run_is_fenced_and_empty_input_publishes_an_empty_generation(
    example: ModuleType, embedded_cluster: EmbeddedCluster, published: dict[str, Any]
) -> None:
    database = published["database"]
    client = embedded_cluster.client()
    try:
        client.command(f"TRUNCATE TABLE `{database}`.source_table")
    finally:
        client.close()
    # the candidate's CREATE (the fence's exchange probe creates scratch tables first)
    embedded_cluster.faults.fail_next_statement("member1", 241, match="^CREATE TABLE .*__dpone_ext_", count=100)
    configure(example, None, manifest=published["manifest"], poll_interval=0.2, retries=0)
    unresolved = _run(example, 7)
    assert unresolved.states["stage"] == "failed"
    embedded_cluster.faults.reset()
    configure(example, None, manifest=published["manifest"], poll_interval=0.2, retries=2)
    fenced = _run(example, 8)
    assert fenced.states["fence"] == "failed" and fenced.tries["fence"] == 1
    assert member_rows(embedded_cluster, database) == [None, None], "nothing was published"

    resumed = _run(example, 7)  # the whole first run cleared: the same operation resumes and completes
    assert resumed.succeeded, resumed.states
    assert resumed.xcom["cleanup"]["row_count"] == 0
    assert member_rows(embedded_cluster, database) == [(0, 0)] * 2


def test_an_internal_manifest_on_this_cluster_fails_before_any_source_io(
    dags_folder: Path,
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The internal example's manifest (``replication_mode: internal``, a ReplicatedMergeTree target) on this
    ``internal_replication=false`` cluster: the mode/flag code, before the source is touched."""
    internal = load_example(dags_folder, INTERNAL_EXAMPLE_FILE)
    export_connection(monkeypatch, embedded_cluster)
    content = embedded_manifest(internal, embedded_cluster, fresh_database, rows=SOURCE_ROWS)
    assert content["physical_design"]["storage"]["clickhouse"]["cluster"]["replication_mode"] == "internal"
    assert_mode_mismatch_before_source_io(
        internal, embedded_cluster, fresh_database, content, lambda: capfd.readouterr().out
    )


def test_a_target_written_before_the_committed_write_fails_publish_after_commit_and_is_accepted_by_the_runbook(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    published: dict[str, Any],
    alert_metrics: list[str],
    capfd: pytest.CaptureFixture[str],
) -> None:
    run_with_a_write_before_committed(
        example,
        embedded_cluster,
        published["database"],
        published["manifest"],
        datetime(2026, 4, 9, tzinfo=UTC),
        alert_metrics,
        lambda: capfd.readouterr().out,
    )
