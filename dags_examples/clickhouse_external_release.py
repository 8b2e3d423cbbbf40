"""Maintenance: release one ``clickhouse_external_full_refresh`` run whose publication stopped after its swap.

    release

A run whose publish failed with ``DPONE_CLICKHOUSE_CLUSTER_PUBLISHED_CONTENT_DIVERGENT`` (or ``..._PUBLICATION_FOREIGN_UUID``
or ``..._PUBLICATION_MIXED``) after its ``EXCHANGE``/``RENAME`` ran holds its target: it is never COMMITTED and cannot
be aborted. Follow the runbook first: inspect every member, then either swap back on every member (``restored``) or
make every member serve the same content you accept (``accepted``, with the row count you counted). Then trigger this
DAG, e.g. ``airflow dags trigger clickhouse_external_release --conf '{"run_id": "manual__2026-04-01T00:00:00+00:00",
"decision": "restored"}'``. The task checks every member against the decision, records it in the authority
(RELEASED, with what it observed on each member) and so frees the target for a new run. A mismatch fails the task
with a ``RELEASE_*`` code and changes nothing; see the runbook's "A publication stopped after its swap".
"""

from __future__ import annotations

from pathlib import Path

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_dpone.operators import DponeReleaseOperator

DAG_ID = "clickhouse_external_release"
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
        "decision": Param("", type="string", enum=["restored", "accepted"], description="what you did on every member"),
        "accepted_row_count": Param(
            None,
            type=["null", "string"],
            description="accepted only: the row count every member's target holds; empty for restored",
        ),
    },
    tags=["dpone", "clickhouse", "external-replication", "maintenance"],
    doc_md=__doc__,
) as dag:
    release = DponeReleaseOperator(
        task_id="release",
        manifest=manifest,
        target_dag_id="{{ params.dag_id }}",
        target_run_id="{{ params.run_id }}",
        operation_id="{{ params.operation_id or '' }}",
        decision="{{ params.decision }}",
        accepted_row_count="{{ params.accepted_row_count or '' }}",
    )

__all__ = ["DAG_ID", "MANIFEST", "dag", "manifest"]
