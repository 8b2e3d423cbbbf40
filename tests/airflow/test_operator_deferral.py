"""Where publish and cleanup wait for their ``ON CLUSTER`` DDL, timed on the embedded cluster with a paused member.

The operators run directly (``execute`` / ``execute_complete``, as a worker calls them) with the real adapters built
through the hook; the trigger they defer to is rebuilt from its serialized kwargs, as the triggerer does, and polls
the real (emulated) ``system.distributed_ddl_queue`` through the async client. ``[dpone] ddl_task_timeout_seconds``
is left at its 120 s default: a deferrable task must defer long before that, without waiting in the worker.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import TaskDeferred
from dpone_embedded import EmbeddedCluster

from airflow_provider_dpone.cluster.clickhouse.sql_cluster_ddl import DEFAULT_TASK_TIMEOUT_SECONDS
from airflow_provider_dpone.operators import (
    DponeCleanupOperator,
    DponeFenceOperator,
    DponePublishOperator,
    DponeStageOperator,
)
from airflow_provider_dpone.operators.reporting import DponeRetryableError
from airflow_provider_dpone.triggers.ddl_queue import ClusterDDLQueueTrigger
from tests.support.airflow.dag_runner import load_example
from tests.support.airflow.embedded_example import embedded_manifest, existing_target, member_rows, member_tables

pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2)]

SOURCE_ROWS = 30
AUTHORITY = "__dpone_cluster_publication_authority"
PROMPT_SECONDS = 15.0
"""A deferrable task must defer well under the 120 s a non-deferrable initiator waits (it takes ~2 s here)."""


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder)


@pytest.fixture
def manifest(
    example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """The example manifest on a fresh database whose members already hold an equal target (publish exchanges,
    cleanup drops the predecessor: both dispatch one ``ON CLUSTER`` DDL); fence and stage have run."""
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(embedded_cluster.connection_json()))
    monkeypatch.delenv("AIRFLOW__DPONE__DDL_TASK_TIMEOUT_SECONDS", raising=False)
    content = embedded_manifest(example, embedded_cluster, fresh_database, rows=SOURCE_ROWS)
    existing_target(embedded_cluster, fresh_database)
    DponeFenceOperator(task_id="fence", manifest=content).execute(context())
    DponeStageOperator(task_id="stage", manifest=content).execute(context())
    return content


def context() -> Any:
    """What the operators read from the task context: the DAG run's ids (they derive the operation from them)."""
    return {"dag_run": SimpleNamespace(dag_id="deferral_it", run_id="manual__deferral")}


async def _events(trigger: ClusterDDLQueueTrigger) -> list[dict[str, Any]]:
    return [event.payload async for event in trigger.run()]


def _triggered(deferred: TaskDeferred, **overrides: Any) -> list[dict[str, Any]]:
    """Run the deferral's trigger as the triggerer does: rebuilt from its serialized kwargs."""
    classpath, kwargs = deferred.trigger.serialize()
    assert classpath == "airflow_provider_dpone.triggers.ddl_queue.ClusterDDLQueueTrigger"
    return asyncio.run(_events(ClusterDDLQueueTrigger(**{**kwargs, **overrides})))


def test_deferrable_publish_and_cleanup_defer_at_once_and_the_trigger_wakes_them_after_resume(
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    manifest: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
) -> None:
    assert DEFAULT_TASK_TIMEOUT_SECONDS == 120
    faults = embedded_cluster.faults
    publish = DponePublishOperator(task_id="publish", manifest=manifest, deferrable=True, poll_interval=0.1)
    cleanup = DponeCleanupOperator(task_id="cleanup", manifest=manifest, deferrable=True, poll_interval=0.1)
    capfd.readouterr()
    for operator, phase in ((publish, "COMMITTED"), (cleanup, "COMPLETED")):
        faults.pause("member2")
        started = time.monotonic()
        with pytest.raises(TaskDeferred) as caught:
            operator.execute(context())
        elapsed = time.monotonic() - started
        assert elapsed < PROMPT_SECONDS, f"{operator.task_id} blocked {elapsed:.1f} s in the worker before deferring"
        deferred = caught.value
        assert deferred.method_name == "execute_complete"

        # the entry is queued, member1 finished it, member2 (paused) not: bounded polls end in a timeout
        (pending,) = _triggered(deferred, max_attempts=3)
        assert (pending["status"], pending["finished"], pending["hosts"]) == ("timeout", 1, 2)

        faults.resume("member2")
        (event,) = _triggered(deferred)
        assert (event["status"], event["finished"], event["failed"]) == ("finished", 2, 0)
        receipt = operator.execute_complete(context(), event)
        assert (receipt["phase"], receipt["publication_kind"], receipt["dispatch_epoch"]) == (phase, "exchange", 1)

    assert member_rows(embedded_cluster, fresh_database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2
    assert member_tables(embedded_cluster, fresh_database) == [[AUTHORITY, "target_table"]] * 2

    log = capfd.readouterr().out
    for task_id in ("publish", "cleanup"):
        assert log.count(f"dpone {task_id}: deferrable=True:") == 1, "one line at the start of each task"
        assert f"dpone {task_id}: woken by the queue trigger: finished" in log


def test_the_trigger_never_holds_the_triggerers_event_loop(
    embedded_cluster: EmbeddedCluster, manifest: dict[str, Any]
) -> None:
    """The publish task's trigger, rebuilt from its serialized kwargs in a fresh interpreter and run in asyncio's debug
    mode as the triggerer runs it (four polls of an entry a paused member holds open), holds its loop for no callback
    over the triggerer's 0.2 s warning threshold, imports nothing but the trigger's own modules there and makes no
    blocking network call on it."""
    publish = DponePublishOperator(task_id="publish", manifest=manifest, deferrable=True, poll_interval=0.1)
    embedded_cluster.faults.pause("member2")
    with pytest.raises(TaskDeferred) as caught:
        publish.execute(context())
    classpath, kwargs = caught.value.trigger.serialize()
    probe = subprocess.run(
        [sys.executable, "-m", "tests.support.airflow.trigger_loop_probe"],
        input=json.dumps({"classpath": classpath, "kwargs": {**kwargs, "max_attempts": 4}}),
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    report = json.loads(probe.stdout.splitlines()[-1])
    embedded_cluster.faults.resume("member2")
    assert [(event["status"], event["finished"], event["hosts"]) for event in report["events"]] == [("timeout", 1, 2)]
    assert report["blocking"] == [], report["blocking"]
    assert report["slow"] == [], report
    # Airflow's own async connection lookup imports its modules lazily on the loop in any triggerer (its cost is
    # bounded by the check above); the provider's hook, the ClickHouse client and aiohttp are imported off the loop
    foreign = [
        name
        for name in report["imports"]
        if name.split(".")[0] not in {"airflow", "asgiref"} and not name.startswith("airflow_provider_dpone.triggers")
    ]
    assert foreign == [], foreign


def test_a_non_deferrable_publish_waits_in_the_worker_bounded_and_a_retry_resumes_the_same_entry(
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    manifest: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AIRFLOW__DPONE__DDL_TASK_TIMEOUT_SECONDS", "2")
    publish = DponePublishOperator(
        task_id="publish", manifest=manifest, deferrable=False, poll_interval=0.2, timeout_seconds=1.0
    )
    embedded_cluster.faults.pause("member2")
    capfd.readouterr()
    started = time.monotonic()
    with pytest.raises(
        DponeRetryableError, match=r"(?s)DPONE_CLICKHOUSE_CLUSTER_DDL_WAIT_EXHAUSTED.*still in progress after 1 s"
    ):
        publish.execute(context())
    elapsed = time.monotonic() - started
    assert elapsed >= 2 + 1, "the initiator waited [dpone] ddl_task_timeout_seconds, then the worker polled"
    assert elapsed < PROMPT_SECONDS
    log = capfd.readouterr().out
    assert log.count("dpone publish: deferrable=False:") == 1
    # about five reconciles in the worker, and the unchanged waiting line is not repeated for each of them
    waiting = [line for line in log.splitlines() if "dpone publish: publication epoch 1 in progress" in line]
    assert 1 <= len(waiting) <= 2, waiting

    embedded_cluster.faults.resume("member2")
    _wait_until_finished(embedded_cluster)
    receipt = publish.execute(context())  # the retry: reconciles the bound entry, dispatches nothing new
    assert (receipt["phase"], receipt["dispatch_epoch"]) == ("COMMITTED", 1)
    assert member_rows(embedded_cluster, fresh_database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2


def _wait_until_finished(cluster: EmbeddedCluster, seconds: float = 30.0) -> None:
    """Until no queue entry has an unfinished host (the retry must not race the resumed member's worker)."""
    client = cluster.client()
    try:
        deadline = time.monotonic() + seconds
        while int(client.command("SELECT countIf(status != 'Finished') FROM system.distributed_ddl_queue")):
            assert time.monotonic() < deadline, "the resumed member did not finish its entries"
            time.sleep(0.05)
    finally:
        client.close()
