"""``dag.test()`` of the PostgreSQL example DAG against the embedded cluster over HTTP and a real PostgreSQL.

Nothing is swapped on the task: the operator resolves the source from ``dpone_clickhouse_default`` (an embedded-cluster
member, real clickhouse-connect HTTP client, password-authenticated) and the target from ``postgres_default`` through
:class:`DponeNativeTransferHook`, exactly as on a worker. The evidence XCom is checked field by field, and for every
secret and endpoint fact it must not carry. A second run whose first try fails after EOF is retried by Airflow and
completes from the stage without opening the source.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from airflow_provider_dpone.core.manifest import load_manifest
from airflow_provider_dpone.core.manifest.transfer import NativeTransferManifest
from airflow_provider_dpone.hooks.native_transfer import DponeNativeTransferHook
from airflow_provider_dpone.operators.native_transfer import DponeNativeTransferOperator
from tests.airflow.test_native_operator_dags import public_table, run_dag, target_rows
from tests.support.airflow.native_airflow import load_dag_module, native_dags_folder
from tests.support.airflow.native_operator_env import FlakyPublish, create_source, factory, redaction_problems
from tests.support.transfer.native_route_chdb import read_rows

__all__ = [
    "native_dags_folder",
    "public_table",
]  # fixtures used by this module (``airflow_db`` comes from the conftest)
PASSWORD = "dag-http-secret-7f3a"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.embedded_cluster(password=PASSWORD),
]
MEMBER = "member1"


@pytest.fixture
def admin(embedded_cluster, monkeypatch):
    """The examples' source table on one member, and ``dpone_clickhouse_default`` pointing at that member."""
    endpoint = embedded_cluster.endpoint(MEMBER)
    connection = embedded_cluster.connection_json()
    connection.update(host=endpoint.host, port=endpoint.port)
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(connection))
    client = embedded_cluster.client(MEMBER)
    create_source(client)
    yield client
    client.command("DROP DATABASE IF EXISTS events SYNC")
    client.close()


def test_postgres_example_dag_over_http_succeeds_and_its_retry_is_source_free(
    admin, embedded_cluster, native_dags_folder, public_table
) -> None:
    module = load_dag_module(native_dags_folder, "clickhouse_to_postgres_raw_snapshot.py")
    task = module.dag.get_task("transfer")
    assert isinstance(task, DponeNativeTransferOperator)
    task.connector_factory = None  # the hook: the Airflow connection, over HTTP
    task.target_factory = None
    task.retry_delay = dt.timedelta(0)

    state, tries, evidence = run_dag(module, 11)
    assert (state, tries) == ("success", 1)
    raw = read_rows(admin, "SELECT * FROM events.raw_events")
    assert target_rows(public_table) == raw and sum(raw.values()) == 7
    assert target_rows(public_table) != read_rows(admin, "SELECT * FROM events.raw_events FINAL")
    assert evidence["kind"] == "dpone.native-transfer-result.v1" and evidence["route"] == "native_transfer_postgres"
    assert (evidence["source_snapshot"], evidence["replica_scope"]) == ("exact_raw_rows", "single_server")
    assert evidence["rows"] == 7 and evidence["source_connections"] == 1 and evidence["resumed_from"] == "planned"
    assert evidence["endpoint_authority_agreement"] is True and evidence["stage_retired"] is True
    assert len(evidence["workload_digest"]) == 64 and evidence["publication_id"]
    endpoint = embedded_cluster.endpoint(MEMBER)
    assert redaction_problems(evidence, [PASSWORD, f"{endpoint.host}:{endpoint.port}", str(endpoint.port)]) == []

    manifest = load_manifest(task.manifest)
    assert isinstance(manifest, NativeTransferManifest)
    task.target_factory = factory(FlakyPublish(DponeNativeTransferHook(manifest).target()))  # type: ignore[assignment]
    admin.command("INSERT INTO events.raw_events VALUES (5, 1, 0, 'new', '2026-09-01 12:00:00', 5)")
    state, tries, evidence = run_dag(module, 12)
    assert (state, tries) == ("success", 2), "the first try failed after EOF and Airflow retried it"
    assert evidence["source_connections"] == 0 and evidence["resumed_from"] == "publishing"
    assert evidence["rows"] == 8
    assert target_rows(public_table) == read_rows(admin, "SELECT * FROM events.raw_events")
