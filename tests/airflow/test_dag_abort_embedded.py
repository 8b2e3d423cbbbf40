"""The maintenance DAG's ``DponeAbortOperator`` under real Airflow on the embedded cluster.

A full-refresh run stops during STAGING (the second member refuses every load, and the stage task has no retry
left): the operation holds the target with its candidates. The abort DAG,
triggered with that run's id, drops exactly those candidates and writes ABORTED once no candidate CREATE of the
stopped run can still arrive (its last intent plus the dispatch deadline, the send timeout and the skew margin: short
here, seconds instead of minutes); a new full-refresh run then takes the target and completes. Assertions read every
member and the authority directly.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from dpone_embedded import EmbeddedCluster

from airflow_provider_dpone.cluster.values.authority.external import as_external
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.core.manifest import ClusterPublicationManifest
from airflow_provider_dpone.hooks.clickhouse import hook_environment
from airflow_provider_dpone.hooks.publication import PublicationEnvironment
from tests.support.airflow.airflow_env import load_dag_file
from tests.support.airflow.dag_runner import configure, load_example, run_example
from tests.support.airflow.embedded_example import embedded_manifest, member_rows, member_tables
from tests.support.cluster.replica_checks import authority_record

pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2)]

SOURCE_ROWS = 30
AUTHORITY = "__dpone_cluster_publication_authority"
CONNECT_S, SEND_S = 1, 3
DEADLINE_MS, SKEW_MS = 1_000, 1_000
CREATE_WINDOW_MS = DEADLINE_MS + (CONNECT_S + SEND_S) * 1000 + SKEW_MS


def short_window(
    manifest: ClusterPublicationManifest, conn_id: str, *, ddl_task_timeout_seconds: int | None = None
) -> PublicationEnvironment:
    """The real environment with a short dispatch deadline and skew margin (the connection's timeouts are short too)."""
    environment = hook_environment(manifest, conn_id, ddl_task_timeout_seconds=ddl_task_timeout_seconds)
    settings = dataclasses.replace(environment.settings, dispatch_deadline_ms=DEADLINE_MS, void_skew_margin_ms=SKEW_MS)
    return dataclasses.replace(environment, settings=settings)


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder)


@pytest.fixture(scope="module")
def maintenance(dags_folder: Path) -> ModuleType:
    return load_dag_file("dpone_example_clickhouse_external_abort", dags_folder / "clickhouse_external_abort.py")


@pytest.fixture
def published(
    example: ModuleType,
    maintenance: ModuleType,
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[dict[str, Any]]:
    connection = embedded_cluster.connection_json()
    connection["extra"] = {
        **connection["extra"],
        "connect_timeout_seconds": CONNECT_S,
        "send_receive_timeout_seconds": SEND_S,
    }
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(connection))
    monkeypatch.setenv("AIRFLOW__DPONE__DDL_TASK_TIMEOUT_SECONDS", "2")
    content = embedded_manifest(example, embedded_cluster, fresh_database, rows=SOURCE_ROWS)
    configure(example, short_window, manifest=content, poll_interval=0.2, retries=0)
    (abort,) = maintenance.dag.tasks
    abort.manifest, abort.retries, abort.ports_factory = content, 0, short_window
    yield {"database": fresh_database, "manifest": content}
    configure(example, None)
    abort.manifest, abort.ports_factory = maintenance.manifest, None


def _abort(maintenance: ModuleType, run_id: str, operation_id: str | None) -> tuple[str, Any]:
    run = maintenance.dag.test(run_conf={"run_id": run_id, "operation_id": operation_id})
    instance = run.get_task_instance("abort")
    return str(instance.state), instance.xcom_pull(task_ids="abort")


def test_a_run_stopped_during_staging_is_aborted_and_the_next_run_completes(
    example: ModuleType,
    maintenance: ModuleType,
    embedded_cluster: EmbeddedCluster,
    published: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
) -> None:
    database = published["database"]
    embedded_cluster.faults.fail_next_statement("member2", 243, match="^INSERT", count=100)  # NOT_ENOUGH_SPACE
    capfd.readouterr()
    stopped = run_example(example, logical_date=datetime(2026, 5, 1, tzinfo=UTC))
    fenced = capfd.readouterr().out
    assert (stopped.states["stage"], stopped.states.get("publish")) == ("failed", "upstream_failed"), stopped.states
    embedded_cluster.faults.reset()
    record = authority_record(embedded_cluster, database)
    assert record is not None and record.phase is Phase.STAGING
    assert f"held by operation {record.operation_id} " in fenced, "the fence line names the full id, the guard's value"
    candidate = record.candidate_name
    held = [candidate in names for names in member_tables(embedded_cluster, database)]
    assert any(held), "the stopped operation left its candidates behind"

    # the guard: another operation id aborts nothing
    capfd.readouterr()
    state, _ = _abort(maintenance, stopped.run.run_id, "0" * 64)
    assert (
        state == "failed" and "dpone abort: DPONE_CLICKHOUSE_CLUSTER_ABORT_OPERATION_MISMATCH" in capfd.readouterr().out
    )
    assert authority_record(embedded_cluster, database).phase is Phase.STAGING  # type: ignore[union-attr]
    assert [candidate in names for names in member_tables(embedded_cluster, database)] == held

    stamps = [m.intended_at_ms for m in as_external(record).members if m.intended_at_ms is not None]
    time.sleep(max(0.0, (max(stamps) + CREATE_WINDOW_MS + 1) / 1000 - time.time()) + 0.2)  # no CREATE can arrive
    state, pushed = _abort(maintenance, stopped.run.run_id, record.operation_id)
    assert state == "success"
    assert pushed == {"operation_id": record.operation_id, "target_key": record.target_key, "phase": "ABORTED"}
    aborted = authority_record(embedded_cluster, database)
    assert aborted is not None and aborted.phase is Phase.ABORTED and aborted.operation_id == record.operation_id
    assert member_tables(embedded_cluster, database) == [[AUTHORITY]] * 2, "exactly the owned candidates dropped"

    state, pushed = _abort(maintenance, stopped.run.run_id, None)  # the UI form with the guard emptied
    assert (state, pushed["phase"]) == ("success", "ABORTED"), "idempotent, and the guard is optional"

    configure(example, None, manifest=published["manifest"], poll_interval=0.2, retries=2)
    capfd.readouterr()
    later = run_example(example, logical_date=datetime(2026, 5, 2, tzinfo=UTC))
    assert later.succeeded, later.states
    committed = authority_record(embedded_cluster, database)
    assert committed is not None and committed.operation_id != record.operation_id
    assert f"members (operation {committed.operation_id}, authority version " in capfd.readouterr().out
    assert member_rows(embedded_cluster, database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2
    assert member_tables(embedded_cluster, database) == [[AUTHORITY, "target_table"]] * 2
