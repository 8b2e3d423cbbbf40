"""Full refresh of ``analytics.target_table`` on every member of ``analytics_cluster`` (external replication).

    demo_setup >> fence >> stage >> publish (deferrable) >> cleanup (deferrable)

* ``demo_setup`` creates, when absent, the demo database and KeeperMap authority table on every member and the
  source table with its rows (demo scaffolding, not part of the protocol; a real deployment has them already);
* ``fence`` takes the target's Keeper authority for this DAG run before any source I/O;
* ``stage`` seals one artifact from the manifest's query and stages it into a candidate on every member;
* ``publish`` swaps every member to the new generation with one fenced ``ON CLUSTER`` DDL and, on COMMITTED only,
  emits the Asset event ``clickhouse-cluster://analytics_cluster/analytics/target_table``;
* ``cleanup`` drops exactly the previous generation.

``publish`` and ``cleanup`` are deferrable (passed explicitly): while a member has not finished their DDL they wait
in the triggerer (a triggerer must run), not in a worker slot.

Connection: ``dpone_clickhouse_default`` (e.g. ``AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT``). Every run publishes a new
generation that replaces the previous one; any task may be retried or the whole run cleared: it resumes, it never
duplicates. Run standalone (it calls ``dag.test()`` and prints the receipt)::

    python dags_examples/clickhouse_external_full_refresh.py
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG, BaseHook, task

from airflow_provider_dpone.operators import (
    DponeCleanupOperator,
    DponeFenceOperator,
    DponePublishOperator,
    DponeStageOperator,
)

DAG_ID = "clickhouse_external_full_refresh"
CONN_ID = "dpone_clickhouse_default"
MANIFEST = Path(__file__).resolve().parent / "manifests" / "clickhouse_external_full_refresh.yaml"
DATABASE = "analytics"

CLUSTER_OVERRIDE = "DPONE_EXAMPLE_CLUSTER"
"""Environment variable that renames the manifest's cluster (the embedded demo cluster is named ``dpone_cluster``)."""

DEMO_ROWS = 1000
"""Rows the demo source gets when it is absent (ids 1..DEMO_ROWS, a few NULL amounts)."""


def example_manifest() -> Path | dict[str, Any]:
    """The manifest file, or its content with the cluster renamed when ``DPONE_EXAMPLE_CLUSTER`` is set."""
    cluster = os.environ.get(CLUSTER_OVERRIDE)
    if not cluster:
        return MANIFEST
    from airflow_provider_dpone.operators.publication_inputs import read_manifest

    content = read_manifest(MANIFEST).model_dump(mode="json", exclude_none=True)
    content["physical_design"]["storage"]["clickhouse"]["cluster"]["name"] = cluster
    return content


def prepare_demo(client: Any, *, cluster: str, database: str = DATABASE, rows: int = DEMO_ROWS) -> int:
    """Create what the demo needs when absent, idempotently; return the source row count.

    On every member (``ON CLUSTER``) and on the coordinator: the Atomic database and the KeeperMap authority table
    the protocol fences with (one shared Keeper path). On the coordinator: the source table, filled once. Demo
    scaffolding only: the publication protocol never creates its own source or authority.
    """
    from airflow_provider_dpone.contracts.authority_row import AUTHORITY_COLUMNS, AUTHORITY_TABLE

    authority_columns = ", ".join(f"`{name}` {type_}" for name, type_ in AUTHORITY_COLUMNS)
    authority = (
        f"CREATE TABLE IF NOT EXISTS `{database}`.`{AUTHORITY_TABLE}` ({authority_columns}) "
        f"ENGINE = KeeperMap('/dpone/authority/{database}') PRIMARY KEY target_key"
    )
    for on_cluster in (f" ON CLUSTER `{cluster}`", ""):
        client.command(f"CREATE DATABASE IF NOT EXISTS `{database}`{on_cluster} ENGINE = Atomic")
        client.command(authority.replace(" (", f"{on_cluster} (", 1))
    client.command(
        f"CREATE TABLE IF NOT EXISTS `{database}`.source_table "
        "(id UInt64, name String, amount Nullable(Decimal(18, 4)), updated_at DateTime64(3, 'UTC')) "
        "ENGINE = MergeTree ORDER BY id"
    )
    count = int(client.command(f"SELECT count() FROM `{database}`.source_table"))
    if count == 0:
        client.command(
            f"INSERT INTO `{database}`.source_table SELECT number + 1, concat('item-', toString(number + 1)), "
            "if(number % 10 = 0, NULL, toDecimal64(number, 4) / 100), "
            "toDateTime64('2026-01-01 00:00:00', 3, 'UTC') + toIntervalSecond(number) "
            f"FROM numbers({int(rows)})"
        )
        count = int(client.command(f"SELECT count() FROM `{database}`.source_table"))
    return count


def ensure_demo_setup(conn_id: str = CONN_ID, *, cluster: str) -> int:
    """``prepare_demo`` through the Airflow connection ``conn_id`` (its coordinator)."""
    import clickhouse_connect

    connection = BaseHook.get_connection(conn_id)
    client = clickhouse_connect.get_client(
        host=connection.host,
        port=connection.port,
        username=connection.login or "default",
        password=connection.password or "",
        query_retries=0,
        autogenerate_session_id=False,
    )
    try:
        return prepare_demo(client, cluster=cluster)
    finally:
        client.close()


manifest = example_manifest()

with DAG(
    dag_id=DAG_ID,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    tags=["dpone", "clickhouse", "external-replication"],
    doc_md=__doc__,
) as dag:

    @task(task_id="demo_setup")
    def demo_setup() -> int:
        from airflow_provider_dpone.operators.publication_inputs import cluster_name, read_manifest

        return ensure_demo_setup(cluster=cluster_name(read_manifest(manifest)))

    fence = DponeFenceOperator(task_id="fence", manifest=manifest)
    stage = DponeStageOperator(task_id="stage", manifest=manifest)
    # deferrable=True explicitly: Airflow's default for every operator is [operators] default_deferrable (False in a
    # fresh airflow.cfg); these tasks wait for the cluster DDL in the triggerer instead of holding a worker slot
    publish = DponePublishOperator(task_id="publish", manifest=manifest, deferrable=True, poll_interval=1.0)
    cleanup = DponeCleanupOperator(task_id="cleanup", manifest=manifest, deferrable=True, poll_interval=1.0)

    demo_setup() >> fence >> stage >> publish >> cleanup


def receipt_of(run: Any, task_id: str = "cleanup") -> dict[str, Any] | None:
    """The redacted receipt a finished run pushed to XCom (``None`` when the task did not succeed)."""
    instance = run.get_task_instance(task_id)
    if instance is None:
        return None
    value: dict[str, Any] | None = instance.xcom_pull(task_ids=task_id)
    return value


def main() -> int:
    run = dag.test()
    receipt = receipt_of(run)
    print(json.dumps({"dag_run": run.run_id, "state": str(run.state), "receipt": receipt}, indent=2, sort_keys=True))
    return 0 if receipt is not None and receipt.get("phase") == "COMPLETED" else 1


if __name__ == "__main__":
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    sys.exit(main())
