"""The native transfer example DAGs under real Airflow.

PostgreSQL variant: ``dag.test()`` on a migrated SQLite metadata database, reading the example's own manifest, with
the target resolved from the ``postgres_default`` connection through the hook (the real PostgreSQL server) and the
stage base from ``[dpone] native_transfer_base``. Only the source connector is swapped on the task object: the
in-process engine has no network endpoint. A second run fails its first try after EOF and is retried by Airflow: the
retry completes from the stage without opening the source.

SQL Server variant: the DAG file is parsed and its task's route runs against the recording SQL Server stand-in
(no SQL Server can run here): a full refresh creates the table, then the example's window replacement runs.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_provider_dpone.core.manifest import load_manifest
from airflow_provider_dpone.core.manifest.transfer import NativeTransferManifest
from airflow_provider_dpone.hooks.native_transfer import DponeNativeTransferHook
from airflow_provider_dpone.operators.native_transfer import DponeNativeTransferOperator
from airflow_provider_dpone.transfer.targets.mssql.target import MsSqlTransferTarget
from airflow_provider_dpone.transfer.values.target import TargetTable
from tests.support.airflow.native_airflow import load_dag_module, native_dags_folder
from tests.support.airflow.native_operator_env import (
    FailingCleanup,
    FlakyPublish,
    SourceSeam,
    context,
    create_source,
    factory,
)
from tests.support.fakes.mssql_server import EmulatedServer
from tests.support.fakes.transfer_target import FaultPlan
from tests.support.fixtures.object_store import StoreBackend
from tests.support.transfer import native_chdb
from tests.support.transfer.native_route_chdb import multiset, read_rows

__all__ = ["native_dags_folder"]  # fixture used by this module (``airflow_db`` comes from the conftest)
pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture
def admin():
    client = native_chdb.client()
    create_source(client)
    # the reference read is the raw rows as the transfer copied them: a background merge of the ReplacingMergeTree
    # between the run and the read would collapse old versions in the source only
    client.command("SYSTEM STOP MERGES events.raw_events")
    yield client
    client.close()


@pytest.fixture
def public_table(postgres_server, monkeypatch, tmp_path) -> str:
    """``public.raw_events`` absent, the ``postgres_default`` connection and the stage base exported."""
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS public.raw_events, public.__dpone_publication_receipts")
    connection = {
        "conn_type": "postgres",
        "host": postgres_server.host,
        "port": postgres_server.port,
        "login": postgres_server.user,
        "password": postgres_server.password,
        "schema": postgres_server.dbname,
    }
    monkeypatch.setenv("AIRFLOW_CONN_POSTGRES_DEFAULT", json.dumps(connection))
    monkeypatch.setenv("AIRFLOW__DPONE__NATIVE_TRANSFER_BASE", f"file://{tmp_path}/stage")
    return postgres_server.dsn


def target_rows(dsn: str) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return multiset(conn.execute("SELECT * FROM public.raw_events").fetchall())


def run_dag(module: Any, day: int) -> tuple[str, int, Any]:
    """``dag.test()`` of a transfer example with its ``demo_setup`` marked done (the tests create the source)."""
    when = dt.datetime(2026, 9, day, tzinfo=dt.UTC)
    run = module.dag.test(logical_date=when, run_after=when, mark_success_pattern="^demo_setup$")
    instance = run.get_task_instance("transfer")
    return str(instance.state), instance.try_number, instance.xcom_pull(task_ids="transfer")


def test_postgres_example_dag_runs_and_an_airflow_retry_is_source_free(
    admin, native_dags_folder, public_table, s3_store: StoreBackend, monkeypatch
):
    """On S3 (moto's server, ``[dpone] native_transfer_base = s3://<conn_id>@bucket/...``): the journal and the stage
    the retry recovers from are read back from that store (the other runs of this module use ``file://``)."""
    store_backend = s3_store
    monkeypatch.setenv("AIRFLOW__DPONE__NATIVE_TRANSFER_BASE", store_backend.url)
    module = load_dag_module(native_dags_folder, "clickhouse_to_postgres_raw_snapshot.py")
    task = module.dag.get_task("transfer")
    assert isinstance(task, DponeNativeTransferOperator)
    seam = SourceSeam()
    task.connector_factory = seam
    task.target_factory = None
    task.retry_delay = dt.timedelta(0)
    state, tries, evidence = run_dag(module, 1)
    assert (state, tries) == ("success", 1)
    assert evidence["rows"] == 7 and evidence["source_connections"] == 1
    assert target_rows(public_table) == read_rows(admin, "SELECT * FROM events.raw_events")

    manifest = load_manifest(task.manifest)
    assert isinstance(manifest, NativeTransferManifest)
    flaky = FlakyPublish(DponeNativeTransferHook(manifest).target())
    task.target_factory = factory(flaky)  # type: ignore[assignment]
    admin.command("INSERT INTO events.raw_events VALUES (5, 1, 0, 'new', '2026-09-01 12:00:00', 5)")
    state, tries, evidence = run_dag(module, 2)
    assert (state, tries) == ("success", 2), "the first try failed after EOF and Airflow retried it"
    assert evidence["source_connections"] == 0 and seam.connector.connections == 2
    assert evidence["resumed_from"] == "publishing" and evidence["rows"] == 8
    assert target_rows(public_table) == read_rows(admin, "SELECT * FROM events.raw_events")
    journal = [key for key in store_backend.objects(evidence["operation_id"]) if "/journal/" in key]
    assert journal and all(key.endswith(".json") for key in journal), "the journal lives in the configured store"


def test_a_transfer_alert_reaches_airflow_metrics_once_and_a_clean_run_raises_none(
    admin, native_dags_folder, public_table, alert_metrics, capfd
):
    counted = alert_metrics
    module = load_dag_module(native_dags_folder, "clickhouse_to_postgres_raw_snapshot.py")
    task = module.dag.get_task("transfer")
    assert isinstance(task, DponeNativeTransferOperator)
    task.connector_factory = SourceSeam()
    task.target_factory = None
    capfd.readouterr()
    assert run_dag(module, 3)[:2] == ("success", 1)
    assert counted == [], "a clean run raises no alert"
    log = capfd.readouterr().out
    for line in (  # the route's progress facts, one line each, in the order the route passed them
        "dpone transfer: phase plan",
        "dpone transfer: route checkpoint admitted",
        "dpone transfer: chunk 0 sealed: ",
        "dpone transfer: route checkpoint eof",
        "dpone transfer: phase stage_complete",
        "dpone transfer: chunk 0 loaded into target staging: ",
        "dpone transfer: chunk 0 verified by the target: ",
        "dpone transfer: phase publish_intent",
        "dpone transfer: phase succeeded",
    ):
        assert line in log, line
        log = log[log.index(line) :]

    manifest = load_manifest(task.manifest)
    assert isinstance(manifest, NativeTransferManifest)
    task.target_factory = factory(FailingCleanup(DponeNativeTransferHook(manifest).target()))  # type: ignore[assignment]
    admin.command("INSERT INTO events.raw_events VALUES (6, 1, 0, 'late', '2026-09-01 13:00:00', 6)")
    state, tries, evidence = run_dag(module, 4)
    assert (state, tries) == ("success", 1) and evidence["stage_retired"] is False, "the published snapshot stands"
    assert target_rows(public_table) == read_rows(admin, "SELECT * FROM events.raw_events")
    assert counted == ["dpone.alert.transfer.cleanup_failed"]


def test_mssql_example_dag_parses_and_its_route_runs_on_the_stand_in(admin, native_dags_folder, tmp_path):
    module = load_dag_module(native_dags_folder, "clickhouse_to_mssql_raw_snapshot.py")
    task = module.dag.get_task("transfer")
    assert isinstance(task, DponeNativeTransferOperator) and task.retries == 3
    manifest = load_manifest(Path(task.manifest))
    assert isinstance(manifest, NativeTransferManifest) and manifest.sink.type == "mssql"
    assert manifest.load.window is not None
    server = EmulatedServer(FaultPlan())
    target = MsSqlTransferTarget(
        server.connect,
        TargetTable(target_schema=manifest.sink.target_schema, table=manifest.sink.table),
        import_backend=manifest.source.options.native_transfer.execution.import_backend,
    )
    raw = manifest.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw["load"] = {"strategy": "full_refresh"}
    full = DponeNativeTransferOperator(
        task_id="seed",
        manifest=raw,
        stage_base=f"file://{tmp_path}",
        connector_factory=SourceSeam(),
        target_factory=factory(target),
    )
    assert full.execute(context(run_id="seed"))["rows"] == 7
    admin.command("INSERT INTO events.raw_events VALUES (6, 1, 0, 'in', '2026-09-01 13:00:00', 6)")
    admin.command("INSERT INTO events.raw_events VALUES (7, 1, 0, 'out', '2026-09-03 13:00:00', 7)")
    task.stage_base = f"file://{tmp_path}"
    task.connector_factory = SourceSeam()
    task.target_factory = factory(target)
    evidence = task.execute(context(dag_id=module.dag.dag_id, run_id="manual__2026-09-01"))
    inside = read_rows(
        admin, "SELECT * FROM events.raw_events WHERE event_time >= '2026-09-01' AND event_time < '2026-09-02'"
    )
    assert evidence["rows"] == sum(inside.values()) == 6 and evidence["route"] == "native_transfer_mssql"
    table = server.tables["[dbo].[raw_events]"]
    assert len(table.rows) == 8, "7 rows of the full refresh, the window replaced by 6 rows, the new row outside absent"
    assert {call.kind for call in server.calls} >= {"bulk_copy"}
