"""Example: one fixed UTC day of a ClickHouse ReplacingMergeTree into SQL Server, as exact raw rows.

``load.strategy: partition_replace`` replaces exactly the window ``[2026-09-01, 2026-09-02)`` of ``dbo.raw_events`` in
one transaction; rows outside the window are untouched. The source is read by one SELECT without FINAL, so every
query-visible row version, duplicate and delete marker arrives as it is. Chunks are imported with BCP (the default
``execution.import_backend``) and verified inside SQL Server before the publication commits.

    demo_setup >> transfer

``demo_setup`` creates the demo source ``events.raw_events`` on ``dpone_clickhouse_default`` when absent (demo
scaffolding; ``transfer_demo.py``). Stage and journal: ``[dpone] native_transfer_base``. Guide:
docs/clickhouse-to-mssql.md.

This example needs a SQL Server: none runs in the embedded demo. Point the Airflow connection ``mssql_default``
(Microsoft SQL Server provider) at yours, with an existing ``dbo.raw_events`` whose columns match the source (a window
replacement never creates its table; one ``full_refresh`` run of the same manifest does), e.g.
``export AIRFLOW_CONN_MSSQL_DEFAULT='mssql://USER:PASSWORD@HOST:1433/DATABASE'``. Without that connection the
transfer task fails at once with ``DPONE_CONNECTION_UNDEFINED`` (no retry), before it reads the source; without the
table, with ``native_transfer.target_relation_not_found``.

Run it once, standalone::

    python dags_examples/clickhouse_to_mssql_raw_snapshot.py
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from airflow.sdk import DAG, task
from transfer_demo import ensure_demo_source  # the transfer examples' demo scaffolding, next to this file

from airflow_provider_dpone.operators.native_transfer import DponeNativeTransferOperator

MANIFEST = Path(__file__).resolve().parent / "manifests" / "clickhouse_to_mssql_raw_snapshot.yaml"

with DAG(
    dag_id="clickhouse_to_mssql_raw_snapshot",
    schedule=None,
    start_date=dt.datetime(2026, 9, 1, tzinfo=dt.UTC),
    catchup=False,
    tags=["dpone", "native_transfer", "mssql"],
    doc_md=__doc__,
) as dag:

    @task(task_id="demo_setup")
    def demo_setup() -> int:
        return ensure_demo_source(MANIFEST)

    transfer = DponeNativeTransferOperator(
        task_id="transfer",
        manifest=str(MANIFEST),
        retries=3,
        retry_delay=dt.timedelta(minutes=2),
    )
    demo_setup() >> transfer

if __name__ == "__main__":
    dag.test()
