"""Example: the exact raw-row snapshot of a ClickHouse ReplacingMergeTree into a PostgreSQL table (full refresh).

One task runs the whole native transfer route: runtime admission of the source, one SELECT without FINAL, bounded
typed chunks sealed into a durable stage, target-local verification in PostgreSQL, one atomic publication with its
receipt. An Airflow retry (or a clear of the run) is the same operation: after source EOF it completes from the
stage without reading ClickHouse again; a failure before EOF re-extracts as a new invocation.

    demo_setup >> transfer

``demo_setup`` creates the demo source ``events.raw_events`` on ``dpone_clickhouse_default`` when absent (demo
scaffolding; ``transfer_demo.py``). Stage and journal: ``[dpone] native_transfer_base`` (``s3://...`` in production;
default: a worker-local ``file://`` directory).

The target is the PostgreSQL of the Airflow connection ``postgres_default``; this is the one thing to point at your
PostgreSQL (the ``postgres`` extra installs the driver: ``pip install ./packages/dpone-embedded ".[embedded,postgres]"``)::

    export AIRFLOW_CONN_POSTGRES_DEFAULT='postgresql://USER:PASSWORD@HOST:5432/DATABASE'

The table ``public.raw_events`` is created (replaced whole) by the run. Without that connection the transfer task fails
at once with ``DPONE_CONNECTION_UNDEFINED`` (no retry), before it reads the source.

Run it once, standalone::

    python dags_examples/clickhouse_to_postgres_raw_snapshot.py
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from airflow.sdk import DAG, task
from transfer_demo import ensure_demo_source  # the transfer examples' demo scaffolding, next to this file

from airflow_provider_dpone.operators.native_transfer import DponeNativeTransferOperator

MANIFEST = Path(__file__).resolve().parent / "manifests" / "clickhouse_to_postgres_raw_snapshot.yaml"

with DAG(
    dag_id="clickhouse_to_postgres_raw_snapshot",
    schedule=None,
    start_date=dt.datetime(2026, 9, 1, tzinfo=dt.UTC),
    catchup=False,
    tags=["dpone", "native_transfer", "postgres"],
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
