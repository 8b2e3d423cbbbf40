"""Every example DAG, unedited, in one Airflow against one embedded cluster and one connection.

This is what docs/getting-started.md tells a new user to do: one ``embedded up`` (both topologies in
``system.clusters``: ``dpone_cluster`` and ``dpone_cluster_replicated``), the one connection
``dpone_clickhouse_default``, a PostgreSQL behind ``postgres_default``, and every example DAG as shipped. Nothing on
the DAGs is swapped or retargeted: each runs with ``dag.test()`` including its ``demo_setup``, in the session's one
Airflow home. The external, internal and quality full refreshes complete; the abort DAG aborts a run stopped after
its fence and the next run completes; the void-permit DAG refuses the aborted operation (coded, nothing changed); the PostgreSQL transfer publishes the demo source; the SQL Server transfer, with no SQL Server, fails at once
with one coded line and no retry. Assertions read the members, the authority and PostgreSQL directly.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import pytest
from dpone_embedded import EmbeddedCluster

from airflow_provider_dpone.cluster.values.authority.phases import Phase
from tests.airflow.test_native_operator_dags import public_table
from tests.support.airflow.airflow_env import EXAMPLES, load_dag_file
from tests.support.airflow.dag_runner import asset_events
from tests.support.airflow.embedded_example import member_rows
from tests.support.cluster.replica_checks import authority_record

__all__ = ["public_table"]  # fixture used by this module

pytestmark = [
    pytest.mark.integration,
    pytest.mark.embedded_cluster(members=2),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

DEMO_ROWS = 1000
EXAMPLE_DAGS = sorted(path.name for path in EXAMPLES.glob("clickhouse_*.py"))


@pytest.fixture
def one_airflow(
    dags_folder: Path, embedded_cluster: EmbeddedCluster, public_table: str, monkeypatch: pytest.MonkeyPatch
) -> dict[str, ModuleType]:
    """The connections a user defines once (``postgres_default`` and the stage base come with ``public_table``), and
    every example DAG module by file name."""
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(embedded_cluster.connection_json()))
    return {name: load_dag_file(f"dpone_every_example_{name[:-3]}", dags_folder / name) for name in EXAMPLE_DAGS}


def _run(module: ModuleType, **kwargs: Any) -> tuple[Any, dict[str, tuple[str, int]]]:
    run = module.dag.test(**kwargs)
    outcome = {}
    for task in module.dag.tasks:
        instance = run.get_task_instance(task.task_id)
        outcome[task.task_id] = (str(instance.state), instance.try_number)
    return run, outcome


def _succeeded(outcome: dict[str, tuple[str, int]]) -> bool:
    return all(state == "success" for state, _ in outcome.values())


def test_every_example_dag_runs_unedited_against_one_embedded_cluster_and_one_connection(
    one_airflow: dict[str, ModuleType],
    embedded_cluster: EmbeddedCluster,
    public_table: str,
    capfd: pytest.CaptureFixture[str],
) -> None:
    dags = one_airflow
    assert set(dags) == {
        "clickhouse_external_abort.py",
        "clickhouse_external_full_refresh.py",
        "clickhouse_external_release.py",
        "clickhouse_external_void_permit.py",
        "clickhouse_internal_full_refresh.py",
        "clickhouse_internal_quality_replay.py",
        "clickhouse_to_mssql_raw_snapshot.py",
        "clickhouse_to_postgres_raw_snapshot.py",
    }, "a new example DAG must join this test"

    # the three full refreshes, each on its own topology and database of the one cluster
    published = {}
    for name, cluster, database in (
        ("clickhouse_external_full_refresh.py", "dpone_cluster", "analytics"),
        ("clickhouse_internal_full_refresh.py", "dpone_cluster_replicated", "analytics_replicated"),
        ("clickhouse_internal_quality_replay.py", "dpone_cluster_replicated", "analytics_quality"),
    ):
        run, outcome = _run(dags[name])
        assert _succeeded(outcome), (name, outcome)
        receipt = run.get_task_instance("cleanup").xcom_pull(task_ids="cleanup")
        assert receipt["phase"] == "COMPLETED" and receipt["row_count"] == DEMO_ROWS, name
        assert member_rows(embedded_cluster, database) == [(DEMO_ROWS, DEMO_ROWS)] * 2, name
        uri = f"clickhouse-cluster://{cluster}/{database}/target_table"
        assert [event["generation_id"] for event in asset_events(run, uri)] == [receipt["generation_id"]], name
        published[name] = receipt
    internal = published["clickhouse_internal_full_refresh.py"]
    assert internal["replication_mode"] == "internal"
    assert published["clickhouse_external_full_refresh.py"]["replication_mode"] == "external"

    # abort: a run of the external example stopped after its fence (the rest marked done by hand) holds the target;
    # the abort DAG, given that run's id, releases it, and the next run completes
    full_refresh = dags["clickhouse_external_full_refresh.py"]
    stopped, outcome = _run(full_refresh, mark_success_pattern="^(stage|publish|cleanup)$")
    assert outcome["fence"] == ("success", 1)
    held = authority_record(embedded_cluster, "analytics")
    assert held is not None and held.phase is Phase.LOCKED
    _, outcome = _run(dags["clickhouse_external_abort.py"], run_conf={"run_id": stopped.run_id})
    assert outcome == {"abort": ("success", 1)}
    aborted = authority_record(embedded_cluster, "analytics")
    assert aborted is not None and (aborted.phase, aborted.operation_id) == (Phase.ABORTED, held.operation_id)

    # void-permit: the aborted operation has no permit to void; it is refused with its code and nothing changes
    capfd.readouterr()
    _, outcome = _run(dags["clickhouse_external_void_permit.py"], run_conf={"run_id": stopped.run_id})
    assert outcome == {"void_permit": ("failed", 1)}
    assert "dpone void_permit: DPONE_CLICKHOUSE_CLUSTER_OPERATION_ABORTED: " in capfd.readouterr().out
    assert authority_record(embedded_cluster, "analytics") == aborted

    # release: the aborted operation did not stop after a swap; it is refused with its code and nothing changes
    _, outcome = _run(
        dags["clickhouse_external_release.py"], run_conf={"run_id": stopped.run_id, "decision": "restored"}
    )
    assert outcome == {"release": ("failed", 1)}
    assert "dpone release: DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOT_STOPPED: " in capfd.readouterr().out
    assert authority_record(embedded_cluster, "analytics") == aborted

    later, outcome = _run(full_refresh)
    assert _succeeded(outcome), outcome
    assert later.get_task_instance("cleanup").xcom_pull(task_ids="cleanup")["phase"] == "COMPLETED"
    assert member_rows(embedded_cluster, "analytics") == [(DEMO_ROWS, DEMO_ROWS)] * 2

    # the PostgreSQL transfer: its demo_setup creates the source on the same connection, the run publishes it
    run, outcome = _run(dags["clickhouse_to_postgres_raw_snapshot.py"])
    assert outcome == {"demo_setup": ("success", 1), "transfer": ("success", 1)}
    evidence = run.get_task_instance("transfer").xcom_pull(task_ids="transfer")
    assert evidence["rows"] == 7 and evidence["route"] == "native_transfer_postgres"
    with psycopg.connect(public_table, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM public.raw_events").fetchone() == (7,)

    # the SQL Server transfer needs a server: without its connection, one coded line at once, no retry
    capfd.readouterr()
    _, outcome = _run(dags["clickhouse_to_mssql_raw_snapshot.py"])
    assert outcome == {"demo_setup": ("success", 1), "transfer": ("failed", 1)}
    logged = capfd.readouterr().out
    assert "dpone transfer: DPONE_CONNECTION_UNDEFINED: " in logged and "connection mssql_default" in logged
    assert "(terminal: no retry)" in logged


def test_the_first_errors_a_user_meets_are_the_providers_coded_lines_and_not_retried(
    one_airflow: dict[str, ModuleType],
    embedded_cluster: EmbeddedCluster,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    # a missing transfer source: its own terminal code with the right next action, on try 1 of a DAG with retries
    postgres = one_airflow["clickhouse_to_postgres_raw_snapshot.py"]
    client = embedded_cluster.client()
    try:
        client.command("DROP TABLE IF EXISTS events.raw_events SYNC")
    finally:
        client.close()
    capfd.readouterr()
    _, outcome = _run(postgres, mark_success_pattern="^demo_setup$")
    assert outcome["transfer"] == ("failed", 1), "terminal: the DAG's retries=3 are not spent"
    logged = capfd.readouterr().out
    assert "dpone transfer: native_transfer.source_relation_not_found: " in logged
    assert "Next: create the source table or correct source.database and source.table" in logged

    # a wrong password: demo_setup, the first task a user sees fail, gives the provider's line once (retries=2)
    wrong = {**embedded_cluster.connection_json(), "password": "not-the-password"}
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(wrong))
    capfd.readouterr()
    _, outcome = _run(one_airflow["clickhouse_external_full_refresh.py"])
    assert outcome["demo_setup"] == ("failed", 1) and outcome["fence"][0] == "upstream_failed", outcome
    logged = capfd.readouterr().out
    assert "dpone demo_setup: DPONE_CLICKHOUSE_AUTHENTICATION_FAILED: " in logged
    assert "(terminal: no retry)" in logged
    assert "DB::Exception" not in logged and "clickhouse_connect" not in logged, "no driver text or traceback"
