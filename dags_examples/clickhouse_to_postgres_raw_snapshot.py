"""Example: the exact raw-row snapshot of a ClickHouse ReplacingMergeTree into a PostgreSQL table (full refresh).

One task runs the whole native transfer route: runtime admission of the source, one SELECT without FINAL, bounded
typed chunks sealed into a durable stage, target-local verification in PostgreSQL, one atomic publication with its
receipt. An Airflow retry (or a clear of the run) is the same operation: after source EOF it completes from the
stage without reading ClickHouse again; a failure before EOF re-extracts as a new invocation.

Connections: ``dpone_clickhouse_default`` (the ClickHouse server, HTTP(S)) and ``postgres_default``. Stage and
journal: ``[dpone] native_transfer_base`` (``s3://...`` in production; default: a worker-local ``file://`` directory).

Run it once, standalone::

    python dags_examples/clickhouse_to_postgres_raw_snapshot.py
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from airflow.sdk import DAG

from airflow_provider_dpone.operators.native_transfer import DponeNativeTransferOperator

MANIFEST = Path(__file__).resolve().parent / "manifests" / "clickhouse_to_postgres_raw_snapshot.yaml"

with DAG(
    dag_id="clickhouse_to_postgres_raw_snapshot",
    schedule=None,
    start_date=dt.datetime(2026, 9, 1, tzinfo=dt.UTC),
    catchup=False,
    tags=["dpone", "native_transfer", "postgres"],
) as dag:
    transfer = DponeNativeTransferOperator(
        task_id="transfer",
        manifest=str(MANIFEST),
        retries=3,
        retry_delay=dt.timedelta(minutes=2),
    )

if __name__ == "__main__":
    dag.test()
