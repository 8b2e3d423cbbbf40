"""Full refresh of ``analytics_replicated.target_table``, a ``ReplicatedMergeTree`` (internal replication).

    demo_setup >> fence >> stage >> publish (deferrable) >> cleanup (deferrable)

The cluster ``dpone_cluster_replicated`` (the internal topology that every ``embedded up`` lists beside
``dpone_cluster``) reports ``internal_replication=true`` and the target is one replicated table: ClickHouse itself
copies rows between the replicas. The manifest may omit ``replication_mode``: omission means internal.

* ``demo_setup`` creates, when absent, the demo database and KeeperMap authority table on every replica, the empty
  replicated target ``ON CLUSTER``, and the source table with its rows (demo scaffolding, not part of the protocol;
  a real deployment has them already);
* ``fence`` takes the target's Keeper authority for this DAG run before any source I/O; a cluster whose
  ``internal_replication`` flag is false fails here (``REPLICATION_MODE_MISMATCH``), nothing falls back;
* ``stage`` seals one artifact from the manifest's query, creates one replicated candidate ``ON CLUSTER`` with a
  UUID persisted in the authority first, loads the artifact once through one replica, waits (bounded) until every
  replica has replicated it and checks the content digest of every replica; a replica still behind after the bound
  fails the try retryably and the retry waits again;
* ``publish`` swaps every replica to the new generation with one fenced ``EXCHANGE``/``RENAME ... ON CLUSTER`` and,
  on COMMITTED only, emits the Asset event ``clickhouse-cluster://dpone_cluster_replicated/analytics_replicated/target_table``;
* ``cleanup`` drops exactly the previous generation (one fenced ``DROP ... ON CLUSTER``).

Connection: ``dpone_clickhouse_default`` (e.g. ``AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT``). Every run publishes a new
generation that replaces the previous one; any task may be retried or the whole run cleared: it resumes, it never
duplicates. The authority record is ``dpone.clickhouse.cluster-full-refresh.v1``. Run standalone (it calls
``dag.test()`` and prints the receipt)::

    python dags_examples/clickhouse_internal_full_refresh.py
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

DAG_ID = "clickhouse_internal_full_refresh"
MANIFEST = Path(__file__).resolve().parent / "manifests" / "clickhouse_internal_full_refresh.yaml"

manifest = MANIFEST

with DAG(
    dag_id=DAG_ID,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    tags=["dpone", "clickhouse", "internal-replication"],
    doc_md=__doc__,
) as dag:

    @task(task_id="demo_setup")
    def demo_setup() -> int:
        return ensure_demo_setup(manifest)

    fence = DponeFenceOperator(task_id="fence", manifest=manifest)
    stage = DponeStageOperator(task_id="stage", manifest=manifest)
    publish = DponePublishOperator(task_id="publish", manifest=manifest, deferrable=True, poll_interval=1.0)
    cleanup = DponeCleanupOperator(task_id="cleanup", manifest=manifest, deferrable=True, poll_interval=1.0)

    demo_setup() >> fence >> stage >> publish >> cleanup

__all__ = ["CONN_ID", "MANIFEST", "dag", "manifest", "prepare_demo", "receipt_of"]

if __name__ == "__main__":
    sys.exit(run_standalone(dag))
