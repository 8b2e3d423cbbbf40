"""Example: one fixed UTC day of a ClickHouse ReplacingMergeTree into SQL Server, as exact raw rows.

``load.strategy: partition_replace`` replaces exactly the window ``[2026-09-01, 2026-09-02)`` of ``dbo.raw_events`` in
one transaction; rows outside the window are untouched. The source is read by one SELECT without FINAL, so every
query-visible row version, duplicate and delete marker arrives as it is. Chunks are imported with BCP (the default
``execution.import_backend``) and verified inside SQL Server before the publication commits.

Connections: ``dpone_clickhouse_default`` and ``mssql_default`` (Microsoft SQL Server provider). Stage and journal:
``[dpone] native_transfer_base``. Guide: docs/clickhouse-to-mssql.md.

Run it once, standalone::

    python dags_examples/clickhouse_to_mssql_raw_snapshot.py
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from airflow.sdk import DAG

from airflow_provider_dpone.operators.native_transfer import DponeNativeTransferOperator

MANIFEST = Path(__file__).resolve().parent / "manifests" / "clickhouse_to_mssql_raw_snapshot.yaml"

with DAG(
    dag_id="clickhouse_to_mssql_raw_snapshot",
    schedule=None,
    start_date=dt.datetime(2026, 9, 1, tzinfo=dt.UTC),
    catchup=False,
    tags=["dpone", "native_transfer", "mssql"],
) as dag:
    transfer = DponeNativeTransferOperator(
        task_id="transfer",
        manifest=str(MANIFEST),
        retries=3,
        retry_delay=dt.timedelta(minutes=2),
    )

if __name__ == "__main__":
    dag.test()
