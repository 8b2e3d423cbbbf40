"""The external example under a real Airflow 3 deployment, driven only through the public REST API.

api-server, scheduler, dag-processor and triggerer run as separate processes with LocalExecutor on a temporary home
(``tests/support/airflow/airflow_deployment.py``); the DAGs folder holds a copy of the example, its shared demo module
and its manifests, and the connection ``dpone_clickhouse_default`` points at the module's embedded cluster. One test,
in order:

1. trigger a run; once ``demo_setup`` (the last ``ON CLUSTER`` DDL before publish) is done, pause member2's DDL
   worker: ``publish`` must reach state ``deferred`` with its trigger claimed by the triggerer; resume the member and
   the run must succeed, its publish woken by the trigger's event;
2. clear ``publish`` through the API: the re-run must succeed without a second Asset event;
3. every member, read directly, holds exactly the source rows (count and content digest).

Bounded by a hard alarm and one deadline shared by every wait; every process started is stopped in the fixture's
finalizer, and on failure the components' and tasks' log tails are printed.
"""

from __future__ import annotations

import json
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from dpone_embedded import EmbeddedCluster, Endpoint

from tests.support.airflow.airflow_deployment import AirflowDeployment, Deadline
from tests.support.airflow.airflow_env import EXAMPLES, schema_cache
from tests.support.airflow.embedded_example import member_tables, table_content

pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2)]

HARD_TIMEOUT_SECONDS = 300
"""The alarm: the test (fixtures included) is interrupted after this, whatever it waits for."""
BUDGET_SECONDS = 240
"""The deadline every wait of the test shares."""

DAG_ID = "clickhouse_external_full_refresh"
EXAMPLE_FILE = f"{DAG_ID}.py"
DATABASE = "analytics"
SOURCE_ROWS = 1000
"""``DEMO_ROWS`` of the example: what its ``demo_setup`` loads into the source."""
PAUSED = "member2"
TRIGGER_CLASS = "airflow_provider_dpone.triggers.ddl_queue.ClusterDDLQueueTrigger"


@pytest.fixture
def deadline() -> Iterator[Deadline]:
    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"the real-scheduler test exceeded its hard limit of {HARD_TIMEOUT_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(HARD_TIMEOUT_SECONDS)
    try:
        yield Deadline(BUDGET_SECONDS)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def airflow(
    tmp_path: Path, embedded_cluster: EmbeddedCluster, airflow_db: Path, deadline: Deadline
) -> Iterator[AirflowDeployment]:
    """The running deployment; stopped (every process group) whatever happens. ``airflow_db`` is requested only for
    the migrated schema it caches, which the deployment's own database starts from."""
    deployment = AirflowDeployment.prepare(
        tmp_path / "airflow",
        {"AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT": json.dumps(embedded_cluster.connection_json())},
    )
    shutil.copyfile(EXAMPLES / EXAMPLE_FILE, deployment.home / "dags" / EXAMPLE_FILE)
    shutil.copyfile(EXAMPLES / "full_refresh_demo.py", deployment.home / "dags" / "full_refresh_demo.py")
    shutil.copytree(EXAMPLES / "manifests", deployment.home / "dags" / "manifests")
    try:
        with deployment.explained():
            deployment.migrate(schema_cache())
            deployment.start(deadline)
        yield deployment
    finally:
        signal.alarm(0)  # the stop is bounded by itself, and an interrupted stop would leave processes behind
        deployment.stop()


def test_publish_defers_to_the_triggerer_and_a_cleared_publish_emits_no_second_asset_event(
    airflow: AirflowDeployment, embedded_cluster: EmbeddedCluster, deadline: Deadline
) -> None:
    with airflow.explained():
        deadline.wait_for("the example DAG to be parsed", lambda: _dag_parsed(airflow), within=120)
        run_id = airflow.api("POST", f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None})["dag_run_id"]

        # 1. publish waits for the paused member in the triggerer, and is woken by the trigger's event
        deadline.wait_for(
            "demo_setup to succeed", lambda: _task_state(airflow, run_id, "demo_setup", "success"), within=120
        )
        embedded_cluster.faults.pause(PAUSED)
        states = {task: _task(airflow, run_id, task)["state"] for task in ("fence", "stage", "publish")}
        assert states["publish"] is None, f"the member was paused too late to hold publish: {states}"
        deferred = deadline.wait_for(
            "publish to defer to a running triggerer", lambda: _deferred_in_triggerer(airflow, run_id), within=120
        )
        assert deferred["trigger"]["classpath"] == TRIGGER_CLASS
        assert deferred["try_number"] == 1
        # Airflow 3.3.2 fails a resumed task whose trigger fired before the scheduler drained the executor event of
        # the deferring process (the TI is QUEUED again by then: apache/airflow#67287); resume the member only once
        # the scheduler has seen that process end with the TI still deferred
        deadline.wait_for(
            "the scheduler to settle the deferring process",
            lambda: airflow.log_line("scheduler", "TaskInstance Finished:", "task_id=publish", "state=deferred"),
            within=60,
        )
        embedded_cluster.faults.resume(PAUSED)
        deadline.wait_for("the run to succeed", lambda: _run_succeeded(airflow, run_id), within=120)

        publish = _task(airflow, run_id, "publish")
        assert publish["try_number"] == 1, "publish succeeded in its first try, across the deferral"
        log = _task_log(airflow, run_id, "publish", 1)
        assert "deferring to the DDL queue trigger" in log
        assert "woken by the queue trigger: finished" in log, log[-3000:]
        committed = _receipt(airflow, run_id, "publish")
        assert committed["phase"] == "COMMITTED"
        first_events = _asset_events(airflow)
        assert [event["extra"]["generation_id"] for event in first_events] == [committed["generation_id"]]
        assert (first_events[0]["source_run_id"], first_events[0]["source_task_id"]) == (run_id, "publish")

        # 2. a cleared publish resumes the completed operation and emits no second Asset event
        airflow.api(
            "POST",
            f"/dags/{DAG_ID}/clearTaskInstances",
            json={
                "dry_run": False,
                "dag_run_id": run_id,
                "task_ids": ["publish"],
                "only_failed": False,
                "reset_dag_runs": True,
                "include_upstream": False,
                "include_downstream": False,
            },
        )
        deadline.wait_for(
            "the cleared publish to succeed again",
            lambda: _task_state(airflow, run_id, "publish", "success", try_number=2),
            within=120,
        )
        deadline.wait_for("the cleared run to succeed", lambda: _run_succeeded(airflow, run_id), within=60)
        again = _receipt(airflow, run_id, "publish")
        assert (again["phase"], again["generation_id"]) == ("COMPLETED", committed["generation_id"])
        assert "resumed in phase COMPLETED" in _task_log(airflow, run_id, "publish", 2)
        assert _asset_events(airflow) == first_events, "a cleared publish must not announce its generation again"

    # 3. every member equals the source, read directly (no operator report is trusted)
    source = _content(embedded_cluster, embedded_cluster.coordinator, "source_table")
    assert source[0] == SOURCE_ROWS
    assert [_content(embedded_cluster, member, "target_table") for member in embedded_cluster.members] == [source] * 2
    authority = "__dpone_cluster_publication_authority"
    assert member_tables(embedded_cluster, DATABASE) == [[authority, "target_table"]] * 2, "no candidate left behind"


# --- REST API reads ---------------------------------------------------------------------------------------------


def _dag_parsed(airflow: AirflowDeployment) -> dict[str, Any] | None:
    errors = airflow.api("GET", "/importErrors")
    if errors["total_entries"]:
        raise AssertionError(f"the DAGs folder has import errors: {errors['import_errors']}")
    dags = airflow.api("GET", "/dags", params={"dag_id_pattern": DAG_ID})["dags"]
    return dags[0] if dags else None


def _task(airflow: AirflowDeployment, run_id: str, task_id: str) -> dict[str, Any]:
    instance: dict[str, Any] = airflow.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}")
    return instance


def _task_state(
    airflow: AirflowDeployment, run_id: str, task_id: str, state: str, *, try_number: int | None = None
) -> dict[str, Any] | None:
    """The task instance once it is in ``state`` (and try ``try_number``); fails at once if the run failed."""
    _fail_if_run_failed(airflow, run_id)
    instance = _task(airflow, run_id, task_id)
    if instance["state"] == state and (try_number is None or instance["try_number"] == try_number):
        return instance
    return None


def _deferred_in_triggerer(airflow: AirflowDeployment, run_id: str) -> dict[str, Any] | None:
    """``publish`` once it is deferred and a triggerer has claimed its trigger."""
    instance = _task_state(airflow, run_id, "publish", "deferred")
    if instance is None or not instance.get("trigger") or not instance.get("triggerer_job"):
        return None
    return instance


def _run_succeeded(airflow: AirflowDeployment, run_id: str) -> bool:
    _fail_if_run_failed(airflow, run_id)
    return bool(airflow.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}")["state"] == "success")


def _fail_if_run_failed(airflow: AirflowDeployment, run_id: str) -> None:
    instances = airflow.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances")["task_instances"]
    states = {instance["task_id"]: instance["state"] for instance in instances}
    if {"failed", "up_for_retry", "upstream_failed"} & set(states.values()):
        raise AssertionError(f"the run failed: {states}")


def _task_log(airflow: AirflowDeployment, run_id: str, task_id: str, try_number: int) -> str:
    path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}"
    content = airflow.api("GET", path, params={"full_content": True}, headers={"Accept": "application/json"})
    return "\n".join(json.dumps(line) if isinstance(line, dict) else str(line) for line in content["content"])


def _receipt(airflow: AirflowDeployment, run_id: str, task_id: str) -> dict[str, Any]:
    path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value"
    value: dict[str, Any] = airflow.api("GET", path, params={"deserialize": True})["value"]
    return value


def _asset_events(airflow: AirflowDeployment) -> list[dict[str, Any]]:
    """Every event of the example's target asset (the one Asset the DAG declares)."""
    assets = airflow.api("GET", "/assets", params={"uri_pattern": f"/{DATABASE}/target_table"})["assets"]
    assert len(assets) == 1, assets
    events: list[dict[str, Any]] = airflow.api("GET", "/assets/events", params={"asset_id": assets[0]["id"]})[
        "asset_events"
    ]
    return events


def _content(cluster: EmbeddedCluster, process: Endpoint, table: str) -> tuple[int, str]:
    return table_content(cluster, process, DATABASE, table)
