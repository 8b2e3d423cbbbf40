"""The internal full refresh of ``analytics_quality.target_table`` with durable quality replay (seed 002) on.

    demo_setup >> fence >> stage >> publish (deferrable) >> cleanup (deferrable)

The same route as ``clickhouse_internal_full_refresh.py``; its manifest adds ``sink.options.durable_quality_replay:
true`` and a ``quality`` block (``min_rows: 1``, target metric ``row_count``). What changes:

* ``fence`` writes a ``dpone.clickhouse.cluster-full-refresh.v2`` authority record, after checking the authority
  table is exactly the admitted KeeperMap schema (anything else: ``DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED``);
* ``stage`` evaluates the gates (``row_count_reconciliation``, ``min_rows``, ``typed_hash_reconciliation``) over the
  sealed source and every staged replica and binds the quality capsule in the write that makes the record STAGED;
  a failed gate stops here with ``DPONE_REPLAY_QUALITY_EVIDENCE_FAILED`` and nothing is published (an empty source
  fails ``min_rows: 1``);
* ``publish`` commits, then moves the capsule PREPARED -> TARGET_PENDING -> COMPLETE: row count and typed hash of
  the published generation on one replica, between generation/schema/health checks of every replica;
* ``cleanup`` starts only once the capsule is COMPLETE; every retry validates it without counting again.

The task log and the receipts (``dpone.clickhouse.cluster-full-refresh-receipt.v2``) show the capsule's state. Run
standalone: ``python dags_examples/clickhouse_internal_quality_replay.py``.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG, task
from full_refresh_demo import ensure_demo_setup, prepare_demo, run_standalone

from airflow_provider_dpone.operators import (
    DponeCleanupOperator,
    DponeFenceOperator,
    DponePublishOperator,
    DponeStageOperator,
)

DAG_ID = "clickhouse_internal_quality_replay"
MANIFEST = Path(__file__).resolve().parent / "manifests" / "clickhouse_internal_quality_replay.yaml"

manifest = MANIFEST

with DAG(
    dag_id=DAG_ID,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    tags=["dpone", "clickhouse", "internal-replication", "quality-replay"],
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

__all__ = ["DAG_ID", "MANIFEST", "dag", "manifest", "prepare_demo"]

if __name__ == "__main__":
    sys.exit(run_standalone(dag))
