"""Run the example DAG with real Airflow (``dag.test()`` on SQLite) against a chosen ports factory.

The DAG module is imported from the session's DAGs folder (the copy ``dag.test()`` syncs); tests swap the operators'
``ports_factory`` and their retry policy on the in-memory task objects, which are the ones ``dag.test()`` runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from airflow_provider_dpone.core.manifest import ClusterPublicationManifest, load_manifest
from airflow_provider_dpone.hooks.publication import PortsFactory
from airflow_provider_dpone.operators.full_refresh import DponePublicationOperator
from airflow_provider_dpone.operators.publish_cleanup import _WaitingOperator
from tests.support.airflow.airflow_env import load_dag_file
from tests.support.cluster.replica_checks import authority_record, replica_contents

MODE_MISMATCH = "DPONE_CLICKHOUSE_CLUSTER_REPLICATION_MODE_MISMATCH"
EXAMPLE_FILE = "clickhouse_external_full_refresh.py"
INTERNAL_EXAMPLE_FILE = "clickhouse_internal_full_refresh.py"
TASKS = ("fence", "stage", "publish", "cleanup")


def load_example(dags_folder: Path, file_name: str = EXAMPLE_FILE) -> ModuleType:
    return load_dag_file(f"dpone_example_{Path(file_name).stem}", dags_folder / file_name)


def export_connection(monkeypatch: Any, cluster: Any, *, ddl_task_timeout_seconds: int = 2) -> None:
    """``dpone_clickhouse_default`` is the cluster's coordinator; publication DDL waits at most this many seconds."""
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(cluster.connection_json()))
    monkeypatch.setenv("AIRFLOW__DPONE__DDL_TASK_TIMEOUT_SECONDS", str(ddl_task_timeout_seconds))


def provision_example(
    example: ModuleType, cluster: Any, database: str, *, rows: int, replicated_target: str | None = None
) -> None:
    """The example's demo scaffolding in ``database`` (authority table, source with ``rows`` rows, and optionally
    an empty replicated target with these keys)."""
    client = cluster.client()
    try:
        example.prepare_demo(
            client, cluster=cluster.cluster_name, database=database, rows=rows, replicated_target=replicated_target
        )
    finally:
        client.close()


def assert_redacted(seen: str, cluster: Any, password: str) -> None:
    """Nothing a human or a downstream task sees carries the password, a host:port or a demo row value."""
    assert "dpone stage: operation" in seen and "DPONE_" not in seen
    forbidden = [*([password] if password else []), "item-17", "item-23"]  # an empty password is no secret
    forbidden += [f"{m.host}:{m.port}" for m in cluster.members]
    forbidden += [f"127.0.0.1:{cluster.coordinator.port}"]
    for value in forbidden:
        assert value not in seen, f"{value!r} leaked"


def retargeted_manifest(example: ModuleType, *, cluster: str, database: str) -> dict[str, Any]:
    """The example's manifest pointed at ``cluster`` and ``database`` (target, staging and the source query)."""
    manifest = load_manifest(example.MANIFEST)
    assert isinstance(manifest, ClusterPublicationManifest)
    content = manifest.model_dump(mode="json", exclude_none=True)
    content["physical_design"]["storage"]["clickhouse"]["cluster"]["name"] = cluster
    content["sink"]["database"] = content["sink"]["staging_database"] = database
    content["source"]["query"] = f"SELECT id, name, amount, updated_at FROM {database}.source_table"
    return content


@dataclass
class RunOutcome:
    run: Any
    states: dict[str, str]
    tries: dict[str, int]
    xcom: dict[str, Any]

    @property
    def succeeded(self) -> bool:
        return all(self.states.get(task) == "success" for task in TASKS)


def configure(
    module: ModuleType,
    factory: PortsFactory | None,
    *,
    retries: int = 3,
    deferrable: bool = True,
    poll_interval: float = 0.0,
    manifest: Any = None,
) -> None:
    """Set every task's retry policy and ports factory, and the publication tasks' manifest (default: the DAG's own)."""
    for task in module.dag.tasks:
        task.retries = retries
        task.retry_delay = timedelta(0)
        if isinstance(task, DponePublicationOperator):
            task.ports_factory = factory
            task.manifest = module.manifest if manifest is None else manifest
        if isinstance(task, _WaitingOperator):
            task.deferrable = deferrable
            task.poll_interval = poll_interval


def run_example(
    module: ModuleType,
    *,
    logical_date: datetime | None = None,
    skip_demo_setup: bool = True,
    mark_success: tuple[str, ...] = (),
) -> RunOutcome:
    """``dag.test()`` of the example; ``mark_success`` names tasks marked successful without running."""
    # run_after fixes the run id ("manual__<run_after>"): running the same logical date again replaces the run under
    # the same run id, which is what a clear of the whole run is to the protocol (a same-operation retry)
    skipped = (*(("demo_setup",) if skip_demo_setup else ()), *mark_success)
    run = module.dag.test(
        logical_date=logical_date,
        run_after=logical_date,
        mark_success_pattern="|".join(f"^{task}$" for task in skipped) or None,
    )
    states: dict[str, str] = {}
    tries: dict[str, int] = {}
    xcom: dict[str, Any] = {}
    for task_id in TASKS:
        instance = run.get_task_instance(task_id)
        if instance is None:
            continue
        states[task_id] = str(instance.state)
        tries[task_id] = instance.try_number
        xcom[task_id] = instance.xcom_pull(task_ids=task_id)
    return RunOutcome(run, states, tries, xcom)


def asset_events(run: Any, uri: str) -> list[dict[str, Any]]:
    """The Asset events of ``uri`` that this DAG run emitted (their ``extra``), from the metadata database."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(AssetEvent.extra, AssetEvent.source_task_id)
            .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
            .where(
                AssetModel.uri == uri, AssetEvent.source_run_id == run.run_id, AssetEvent.source_dag_id == run.dag_id
            )
        ).all()
    return [{"task": task_id, **(extra or {})} for extra, task_id in rows]


def assert_mode_mismatch_before_source_io(
    example: ModuleType,
    cluster: Any,
    database: str,
    manifest: dict[str, Any],
    output: Callable[[], str],
) -> None:
    """The fence fails (terminal) with the mode/flag code; so does the stage task run on its own; no statement that
    names the source table reaches the coordinator, no authority record is written, and nothing is published.
    ``output`` returns what the runs logged since the last call."""
    source_guard = "source_table"
    cluster.faults.fail_next_statement("coordinator", 60, match=source_guard, count=1000)
    configure(example, None, manifest=manifest, retries=2)
    output()
    try:
        outcome = run_example(example, logical_date=datetime(2026, 5, 20, tzinfo=UTC))
        assert (outcome.states["fence"], outcome.tries["fence"]) == ("failed", 1), "terminal: no retry"
        assert outcome.states["stage"] == "upstream_failed"
        alone = run_example(example, logical_date=datetime(2026, 5, 21, tzinfo=UTC), mark_success=("fence",))
        assert (alone.states["stage"], alone.tries["stage"]) == ("failed", 1)
        logged = output()
        for task in ("fence", "stage"):
            assert f"dpone {task}: {MODE_MISMATCH}: " in logged, f"{task} refused with the mode/flag code"
    finally:
        configure(example, None)
    remaining = [f["remaining"] for f in cluster.faults.armed() if f["pattern"] == source_guard]
    assert remaining == [1000], "no statement naming the source table was sent"
    assert authority_record(cluster, database) is None
    assert replica_contents(cluster, database) == [None] * len(cluster.members)
