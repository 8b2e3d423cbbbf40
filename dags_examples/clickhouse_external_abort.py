"""Maintenance: abort the operation of one ``clickhouse_external_full_refresh`` run before publication.

    abort

Trigger it with the run to abort, e.g. ``airflow dags trigger clickhouse_external_abort --conf
'{"run_id": "manual__2026-04-01T00:00:00+00:00"}'`` (optionally ``"operation_id"``, the 64-hex id that run logged,
as a guard). The task drops exactly the candidates that operation owns on every member and writes ABORTED (seed 000
§6.7: LOCKED, STAGING or STAGED only; a published operation cannot be aborted, it completes by cleanup). The next
full-refresh run then takes the target. Use it when a run stopped before publication and will not be retried, e.g.
after its manifest or source changed; see the runbook's "Abort an operation".
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_dpone.operators import DponeAbortOperator

DAG_ID = "clickhouse_external_abort"
FULL_REFRESH_DAG_ID = "clickhouse_external_full_refresh"
MANIFEST = Path(__file__).resolve().parent / "manifests" / "clickhouse_external_full_refresh.yaml"
"""The full-refresh DAG's own manifest: the operation id is derived from it."""

manifest = MANIFEST

with DAG(
    dag_id=DAG_ID,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    params={
        "dag_id": Param(FULL_REFRESH_DAG_ID, type="string", description="DAG id of the run to abort"),
        "run_id": Param("", type="string", minLength=1, description="run id of the run to abort"),
        "operation_id": Param(
            None,
            type=["null", "string"],
            description="optional guard: the run's 64-hex operation id (the fence task's log and XCom); empty for none",
        ),
    },
    tags=["dpone", "clickhouse", "external-replication", "maintenance"],
    doc_md=__doc__,
) as dag:
    abort = DponeAbortOperator(
        task_id="abort",
        manifest=manifest,
        target_dag_id="{{ params.dag_id }}",
        target_run_id="{{ params.run_id }}",
        operation_id="{{ params.operation_id or '' }}",
    )

__all__ = ["DAG_ID", "MANIFEST", "dag", "manifest"]
