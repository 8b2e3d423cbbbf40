"""The internal-mode example DAG under real Airflow on a 3-replica embedded cluster with ``internal_replication=true``.

Nothing is faked but the faults: the operators build the real adapters through the hook from the
``dpone_clickhouse_default`` connection, the replicated candidate and target are ``ReplicatedMergeTree`` tables whose
rows the embedded cluster replicates between the member engines, the trigger polls the real (emulated) DDL queue,
and faults are armed in the cluster's processes. Each test publishes into a fresh database. Every verdict is read
directly from every replica (rows, distinct ids and a multiset digest per replica, compared with the source, never
summed) and from the authority record itself.

How a lagging replica is waited out: through retries of the stage task. The convergence wait is a bounded
``SYSTEM SYNC REPLICA`` inside staging (``ProtocolSettings.replica_sync_timeout_seconds``); a replica still behind
fails the try with the retryable ``REPLICA_NOT_CONVERGED`` and the retry waits again, without mutating anything. The
deferral trigger polls only the DDL queue of publication and cleanup, which no replica lag delays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from dpone_embedded import EmbeddedCluster

from airflow_provider_dpone.cluster.protocol.authority_io import read_current
from airflow_provider_dpone.cluster.protocol.context import ProtocolSettings
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.internal import INTERNAL_SCHEMA_V1
from airflow_provider_dpone.cluster.values.authority.row import AuthorityRow
from airflow_provider_dpone.cluster.values.identities import INTERNAL_CANDIDATE_INFIX
from airflow_provider_dpone.core.manifest import ClusterPublicationManifest as Manifest
from airflow_provider_dpone.hooks.clickhouse import hook_environment
from airflow_provider_dpone.hooks.publication import PublicationEnvironment
from tests.support.airflow.dag_runner import (
    INTERNAL_EXAMPLE_FILE,
    RunOutcome,
    assert_mode_mismatch_before_source_io,
    assert_redacted,
    configure,
    export_connection,
    load_example,
    provision_example,
    run_example,
)
from tests.support.airflow.embedded_example import add_source_row, embedded_manifest
from tests.support.airflow.workers import kill_mid_stage_then_retry_elsewhere
from tests.support.cluster.after_commit_write import run_with_a_write_before_committed
from tests.support.cluster.replica_checks import (
    authority_record,
    follower_process,
    loader_process,
    queue_entries,
    replica_contents,
    replica_paths,
    source_content,
    table_facts,
)

PASSWORD = "pw-Internal-Redact-4c1d"
REPLICAS = 3
pytestmark = [
    pytest.mark.integration,
    pytest.mark.embedded_cluster(members=REPLICAS, internal_replication=True, password=PASSWORD),
]

SOURCE_ROWS = 30
AUTHORITY = "__dpone_cluster_publication_authority"


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder, INTERNAL_EXAMPLE_FILE)


@dataclasses.dataclass(frozen=True)
class Published:
    database: str
    manifest: dict[str, Any]


TARGET_KEYS = "PARTITION BY toYYYYMM(updated_at) ORDER BY id"
"""The keys of the replicated target some tests create first (the manifest's own)."""


@pytest.fixture
def published(
    example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Published]:
    """A fresh database with the demo's authority table and source (no target yet), the connection exported, and the
    DAG pointed at that database."""
    export_connection(monkeypatch, embedded_cluster)
    content = embedded_manifest(example, embedded_cluster, fresh_database, rows=SOURCE_ROWS)
    configure(example, None, manifest=content, poll_interval=0.2)
    yield Published(fresh_database, content)
    configure(example, None)


def _run(example: ModuleType, day: int, **options: Any) -> RunOutcome:
    return run_example(example, logical_date=datetime(2026, 5, day, tzinfo=UTC), **options)


def assert_published_exactly(cluster: EmbeddedCluster, database: str, outcome: RunOutcome) -> dict[str, Any]:
    """Every replica holds exactly the source rows (no duplicate), the authority is COMPLETED (v1), the receipt
    agrees with both, and nothing but the authority and the target is left on any replica."""
    assert outcome.succeeded, outcome.states
    source = source_content(cluster, database)
    assert source.rows == source.ids, "the source itself has no duplicate ids"
    assert replica_contents(cluster, database) == [source] * REPLICAS
    record = authority_record(cluster, database)
    assert record is not None and record.phase.value == "COMPLETED" and record.schema_ == INTERNAL_SCHEMA_V1
    receipt = outcome.xcom["cleanup"]
    assert receipt["schema"] == "dpone.clickhouse.cluster-full-refresh-receipt.v1"
    assert (receipt["phase"], receipt["replication_mode"], receipt["row_count"]) == (
        "COMPLETED",
        "internal",
        source.rows,
    )
    assert receipt["operation_id"] == record.operation_id and receipt["generation_id"] == record.generation_id
    assert [m["row_count"] for m in receipt["members"]] == [source.rows] * REPLICAS
    names = [[name for name, _, _ in tables] for tables in table_facts(cluster, database)]
    assert names == [[AUTHORITY, "target_table"]] * REPLICAS, "no candidate or predecessor is left"
    assert len(replica_paths(cluster, database)) == 1, "the target is one replicated table"
    value: dict[str, Any] = receipt
    return value


# --- runs without faults -----------------------------------------------------------------------------------------


def test_two_runs_in_a_row_the_second_replaces_the_first_and_cleanup_drops_it(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    published: Published,
    capfd: pytest.CaptureFixture[str],
) -> None:
    database = published.database
    capfd.readouterr()
    first = _run(example, 1)
    receipt = assert_published_exactly(embedded_cluster, database, first)
    assert (receipt["baseline"], receipt["publication_kind"], receipt["rebuilds"]) == ("absent", "rename", 0)
    assert first.xcom["fence"]["replication_mode"] == "internal"
    assert first.xcom["stage"]["schema"] == INTERNAL_SCHEMA_V1
    assert first.xcom["stage"]["load_member_id"] == receipt["load_member_id"]
    facts = table_facts(embedded_cluster, database)
    assert all(("target_table", "ReplicatedMergeTree", "toYYYYMM(updated_at)") in tables for tables in facts)

    add_source_row(embedded_cluster, database, 9001)
    second = _run(example, 2)
    again = assert_published_exactly(embedded_cluster, database, second)
    assert (again["baseline"], again["publication_kind"]) == ("existing", "exchange")
    assert again["generation_id"] != receipt["generation_id"] and again["row_count"] == SOURCE_ROWS + 1
    assert all(member["predecessor_absent"] for member in again["members"])

    # redaction: nothing a human or a downstream task sees carries the password, a host, a port or a row value
    captured = capfd.readouterr()
    seen = "\n".join([captured.out, captured.err, repr(first.xcom), repr(second.xcom)])
    assert_redacted(seen, embedded_cluster, PASSWORD)


def test_an_external_manifest_on_this_cluster_fails_before_any_source_io(
    dags_folder: Path,
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    external = load_example(dags_folder)
    export_connection(monkeypatch, embedded_cluster)
    content = embedded_manifest(external, embedded_cluster, fresh_database, rows=SOURCE_ROWS)
    assert content["physical_design"]["storage"]["clickhouse"]["cluster"]["replication_mode"] == "external"
    assert_mode_mismatch_before_source_io(
        external, embedded_cluster, fresh_database, content, lambda: capfd.readouterr().out
    )


# --- faults ------------------------------------------------------------------------------------------------------


def test_a_lost_load_response_is_resolved_by_observation_and_a_failed_load_by_a_rebuild(
    example: ModuleType, embedded_cluster: EmbeddedCluster, published: Published
) -> None:
    """The load's response is lost after the rows landed: convergence proves every replica exact, nothing is sent
    again. Then a load the loader refuses (no effect): the empty candidate is rebuilt and loaded once more."""
    database, faults = published.database, embedded_cluster.faults
    loader = loader_process(embedded_cluster)
    faults.lose_response(loader, match="^INSERT INTO")
    first = _run(example, 3)
    receipt = assert_published_exactly(embedded_cluster, database, first)
    assert not faults.armed(), "the load's response was lost"
    assert (first.tries["stage"], receipt["rebuilds"]) == (1, 0), "resolved by observation, not by a resend"

    add_source_row(embedded_cluster, database, 9002)
    faults.fail_next_statement(loader, 241, match="^INSERT INTO")
    second = _run(example, 4)
    again = assert_published_exactly(embedded_cluster, database, second)
    assert not faults.armed(), "the load was refused"
    assert again["rebuilds"] == 1, "the candidate was rebuilt, never appended to"


def test_a_lost_exchange_response_is_not_resent(
    example: ModuleType, embedded_cluster: EmbeddedCluster, published: Published
) -> None:
    database = published.database
    # an empty replicated target first: EXCHANGE, not RENAME
    provision_example(example, embedded_cluster, database, rows=SOURCE_ROWS, replicated_target=TARGET_KEYS)
    embedded_cluster.faults.lose_response("coordinator", match="^EXCHANGE TABLES")
    outcome = _run(example, 5)
    receipt = assert_published_exactly(embedded_cluster, database, outcome)
    assert not embedded_cluster.faults.armed(), "the EXCHANGE's response was lost"
    assert (receipt["baseline"], receipt["publication_kind"]) == ("existing", "exchange")
    assert queue_entries(embedded_cluster, database, "EXCHANGE TABLES") == 1, "dispatched exactly once"
    assert receipt["dispatch_epoch"] == 2, "two permits: the candidate CREATE and the one EXCHANGE"


def short_sync_environment(
    manifest: Manifest, conn_id: str, *, ddl_task_timeout_seconds: int | None = None
) -> PublicationEnvironment:
    """The real environment with a 1 s convergence bound, so a lagging replica outlasts one stage try."""
    environment = hook_environment(manifest, conn_id, ddl_task_timeout_seconds=ddl_task_timeout_seconds)
    return dataclasses.replace(environment, settings=ProtocolSettings(replica_sync_timeout_seconds=1))


def test_a_lagging_replica_is_waited_out_through_stage_retries(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    published: Published,
    capfd: pytest.CaptureFixture[str],
) -> None:
    database = published.database
    lagging = follower_process(embedded_cluster)
    embedded_cluster.faults.lag_replication(lagging, 4.0)
    configure(example, short_sync_environment, manifest=published.manifest, poll_interval=0.2, retries=10)
    capfd.readouterr()
    outcome = _run(example, 6)
    log = capfd.readouterr().out
    receipt = assert_published_exactly(embedded_cluster, database, outcome)
    assert outcome.tries["stage"] > 1, "the first stage try could not see the lagging replica converge"
    assert "DPONE_CLICKHOUSE_CLUSTER_REPLICA_NOT_CONVERGED" in log
    assert receipt["rebuilds"] == 0, "waiting never rebuilt or reloaded the candidate"
    assert queue_entries(embedded_cluster, database, "CREATE TABLE", INTERNAL_CANDIDATE_INFIX) == 1, "one candidate"


def test_a_racing_run_is_fenced_while_the_first_waits_for_a_replica_then_the_first_completes(
    example: ModuleType, embedded_cluster: EmbeddedCluster, published: Published
) -> None:
    database = published.database
    lagging = follower_process(embedded_cluster)
    embedded_cluster.faults.pause_replication(lagging)
    configure(example, short_sync_environment, manifest=published.manifest, poll_interval=0.2, retries=0)
    unresolved = _run(example, 7)
    assert unresolved.states["stage"] == "failed" and not unresolved.xcom.get("cleanup")
    record = authority_record(embedded_cluster, database)
    assert record is not None and record.phase.value == "STAGING"

    configure(example, None, manifest=published.manifest, poll_interval=0.2, retries=2)
    fenced = _run(example, 8)
    assert (fenced.states["fence"], fenced.tries["fence"]) == ("failed", 1), "fenced: terminal, no retry"
    assert replica_contents(embedded_cluster, database) == [None] * REPLICAS, "nothing was published"
    still = authority_record(embedded_cluster, database)
    assert still is not None and still.operation_id == record.operation_id

    embedded_cluster.faults.resume_replication(lagging)
    resumed = _run(example, 7)  # the whole first run cleared: the same operation resumes and completes
    receipt = assert_published_exactly(embedded_cluster, database, resumed)
    assert receipt["operation_id"] == record.operation_id and receipt["rebuilds"] == 0


class WorkerDiedError(Exception):
    """The worker process dies at this point (Airflow sees the try fail and retries it)."""


CRASHES: list[AuthorityRecord] = []
"""The record as it was durably left when the simulated worker died (read from the real authority)."""
CRASH_BEFORE: dict[str, str] = {}
"""``{"phase": P}``: the worker dies right before its first write of phase P."""


class DyingAuthority:
    """The real authority store, except that the process dies right before the first write of one phase."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def compare_and_set(self, row: AuthorityRow, expected_version: int) -> None:
        if CRASH_BEFORE and row.phase == CRASH_BEFORE["phase"]:
            del CRASH_BEFORE["phase"]
            current = read_current(self._store, row.target_key)
            assert current is not None
            CRASHES.append(current.record)
            raise WorkerDiedError(f"worker died before writing {row.phase}")
        self._store.compare_and_set(row, expected_version)


def dying_environment(
    manifest: Manifest, conn_id: str, *, ddl_task_timeout_seconds: int | None = None
) -> PublicationEnvironment:
    environment = hook_environment(manifest, conn_id, ddl_task_timeout_seconds=ddl_task_timeout_seconds)
    ports = dataclasses.replace(environment.ports, authority=DyingAuthority(environment.ports.authority))
    return dataclasses.replace(environment, ports=ports)


@pytest.mark.parametrize(
    ("phase", "left", "task"),
    [("STAGED", "STAGING", "stage"), ("COMMITTED", "PUBLICATION_DISPATCHING", "publish")],
)
def test_an_internal_record_left_mid_flight_is_recovered_by_a_retry(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    published: Published,
    phase: str,
    left: str,
    task: str,
) -> None:
    """The worker dies after every replica converged (before STAGED) or after the EXCHANGE/RENAME took effect on
    every replica (before COMMITTED): the v1 record is left mid-flight, and the retry resumes it by observation."""
    CRASHES.clear()
    CRASH_BEFORE["phase"] = phase
    configure(example, dying_environment, manifest=published.manifest, poll_interval=0.2, retries=2)
    outcome = _run(example, 9)
    assert not CRASH_BEFORE, "the worker died"
    assert [(r.phase.value, r.schema_) for r in CRASHES] == [(left, INTERNAL_SCHEMA_V1)], "left mid-flight"
    receipt = assert_published_exactly(embedded_cluster, published.database, outcome)
    assert outcome.tries[task] == 2, "one retry resumed the record"
    assert receipt["rebuilds"] == 0 and receipt["dispatch_epoch"] == 2, "nothing loaded or dispatched again"
    assert queue_entries(embedded_cluster, published.database, "RENAME TABLE") == 1


def test_a_task_killed_mid_stage_is_retried_on_another_worker_and_completes(
    tmp_path: Path, embedded_cluster: EmbeddedCluster, published: Published
) -> None:
    """The worker process dies as its load into the writing replica is about to be sent; the retry on another worker
    (one shared artifact store) resumes from the authority and publishes exactly the source on every replica. The
    same helper runs on the compose cluster (``test_internal_route_real.py``, ``test_dag_real.py``)."""
    kill_mid_stage_then_retry_elsewhere(tmp_path, embedded_cluster, published.manifest)
    source = source_content(embedded_cluster, published.database)
    assert replica_contents(embedded_cluster, published.database) == [source] * REPLICAS
    record = authority_record(embedded_cluster, published.database)
    assert record is not None and record.phase.value == "COMMITTED" and record.schema_ == INTERNAL_SCHEMA_V1


def test_a_target_written_before_the_committed_write_fails_publish_after_commit_and_is_accepted_by_the_runbook(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    published: Published,
    alert_metrics: list[str],
    capfd: pytest.CaptureFixture[str],
) -> None:
    run_with_a_write_before_committed(
        example,
        embedded_cluster,
        published.database,
        published.manifest,
        datetime(2026, 5, 9, tzinfo=UTC),
        alert_metrics,
        lambda: capfd.readouterr().out,
    )
