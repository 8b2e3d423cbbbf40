"""Maintenance: void the unproven DDL permit of one ``clickhouse_external_full_refresh`` run, with recorded proof.

    void_permit

A run whose publish (or cleanup) stopped with ``DPONE_CLICKHOUSE_CLUSTER_DISPATCH_UNPROVEN`` holds its target: its one
``ON CLUSTER`` request never reached the queue, and a stalled coordinator may still hold it. Nothing re-dispatches on
its own. After the coordinator was restarted later than the permit time plus the dispatch deadline, the connection's
send timeout and ``[dpone] void_skew_margin_seconds``, trigger this DAG with the run's id, e.g. ``airflow dags trigger
clickhouse_external_void_permit --conf '{"run_id": "manual__2026-04-01T00:00:00+00:00"}'``. The task records the
proof (coordinator start time, permit, margins, no queue entry, every member's UUIDs) in the authority and returns
the operation to the phase its step is dispatched from; then clear the stopped task: it dispatches under a new
permit. Missing proof fails the task with a ``VOID_*`` code and changes nothing; see the runbook's "Void a permit".
A coordinator recreated with a new ``serverUUID()`` on the same host (its data directory lost) is named by the
``retired_server_uuid`` param (the pinned UUID); see the runbook's "A recreated coordinator".
"""

from __future__ import annotations

from pathlib import Path

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_dpone.operators import DponeVoidPermitOperator

DAG_ID = "clickhouse_external_void_permit"
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
    default_args={"retries": 0},
    params={
        "dag_id": Param(FULL_REFRESH_DAG_ID, type="string", description="DAG id of the stopped run"),
        "run_id": Param("", type="string", minLength=1, description="run id of the stopped run"),
        "operation_id": Param(
            None,
            type=["null", "string"],
            description="optional guard: the run's 64-hex operation id (the fence task's log and XCom); empty for none",
        ),
        "retired_server_uuid": Param(
            None,
            type=["null", "string"],
            description="only for a coordinator recreated with a new UUID on the same host: the pinned UUID it lost",
        ),
    },
    tags=["dpone", "clickhouse", "external-replication", "maintenance"],
    doc_md=__doc__,
) as dag:
    void_permit = DponeVoidPermitOperator(
        task_id="void_permit",
        manifest=manifest,
        target_dag_id="{{ params.dag_id }}",
        target_run_id="{{ params.run_id }}",
        operation_id="{{ params.operation_id or '' }}",
        retired_server_uuid="{{ params.retired_server_uuid or '' }}",
    )

__all__ = ["DAG_ID", "MANIFEST", "dag", "manifest"]
