"""Full refresh of ``analytics.target_table`` on every member of ``dpone_cluster`` (external replication).

    demo_setup >> fence >> stage >> publish (deferrable) >> cleanup (deferrable)

* ``demo_setup`` creates, when absent, the demo database and KeeperMap authority table on every member and the
  source table with its rows (demo scaffolding, not part of the protocol; a real deployment has them already);
* ``fence`` takes the target's Keeper authority for this DAG run before any source I/O;
* ``stage`` seals one artifact from the manifest's query and stages it into a candidate on every member;
* ``publish`` swaps every member to the new generation with one fenced ``ON CLUSTER`` DDL and, on COMMITTED only,
  emits the Asset event ``clickhouse-cluster://dpone_cluster/analytics/target_table``;
* ``cleanup`` drops exactly the previous generation.

``publish`` and ``cleanup`` are deferrable (passed explicitly): while a member has not finished their DDL they wait
in the triggerer (a triggerer must run), not in a worker slot.

Connection: ``dpone_clickhouse_default`` (e.g. ``AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT``). Every run publishes a new
generation that replaces the previous one; any task may be retried or the whole run cleared: it resumes, it never
duplicates. Run standalone (it calls ``dag.test()`` and prints the receipt)::

    python dags_examples/clickhouse_external_full_refresh.py
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG, task
from full_refresh_demo import (  # the examples' shared demo scaffolding, next to this file
    CONN_ID,
    ensure_demo_setup,
    prepare_demo,
    receipt_of,
    run_standalone,
)

from airflow_provider_dpone.operators import (
    DponeCleanupOperator,
    DponeFenceOperator,
    DponePublishOperator,
    DponeStageOperator,
)

DAG_ID = "clickhouse_external_full_refresh"
MANIFEST = Path(__file__).resolve().parent / "manifests" / "clickhouse_external_full_refresh.yaml"

manifest = MANIFEST

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
        return ensure_demo_setup(manifest)

    fence = DponeFenceOperator(task_id="fence", manifest=manifest)
    stage = DponeStageOperator(task_id="stage", manifest=manifest)
    # deferrable=True explicitly: Airflow's default for every operator is [operators] default_deferrable (False in a
    # fresh airflow.cfg); these tasks wait for the cluster DDL in the triggerer instead of holding a worker slot
    publish = DponePublishOperator(task_id="publish", manifest=manifest, deferrable=True, poll_interval=1.0)
    cleanup = DponeCleanupOperator(task_id="cleanup", manifest=manifest, deferrable=True, poll_interval=1.0)

    demo_setup() >> fence >> stage >> publish >> cleanup

__all__ = ["CONN_ID", "MANIFEST", "dag", "manifest", "prepare_demo", "receipt_of"]

if __name__ == "__main__":
    sys.exit(run_standalone(dag))
