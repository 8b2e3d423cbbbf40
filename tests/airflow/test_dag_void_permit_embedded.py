"""The stalled coordinator under real Airflow on the embedded cluster, and the void-permit maintenance DAG.

The coordinator stalls holding the full refresh's one ``EXCHANGE TABLES ... ON CLUSTER`` (the embedded fault
``hold_ddl``: it keeps the request and queues nothing, as a coordinator stopped by SIGSTOP would). The publish task's
client times out, the task polls out the quiet period and fails closed with ``DISPATCH_UNPROVEN``. Then either:

* the coordinator wakes up (``release_ddl``): its late EXCHANGE runs exactly once, the authority was never COMMITTED
  before it, and a clear of the run commits that one EXCHANGE; or
* the void DAG is refused while the coordinator has not restarted (nothing changes); after a restart later than the
  permit plus every margin (``emulate_restart``: the held request dies unqueued; emulated, because a real restart of
  the embedded coordinator loses its in-process keeper and with it the authority), the void DAG records the proof,
  and a clear of the run publishes under a new permit, exactly once.

Assertions read every member, the DDL queue and the authority directly.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from dpone_embedded import EmbeddedCluster

from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.core.manifest import ClusterPublicationManifest
from airflow_provider_dpone.hooks.clickhouse import hook_environment
from airflow_provider_dpone.hooks.publication import PublicationEnvironment
from tests.support.airflow.airflow_env import load_dag_file
from tests.support.airflow.dag_runner import configure, load_example, run_example
from tests.support.airflow.embedded_example import embedded_manifest, existing_target, member_rows
from tests.support.cluster.replica_checks import authority_record

pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2)]

SOURCE_ROWS = 30
UNPROVEN = "DPONE_CLICKHOUSE_CLUSTER_DISPATCH_UNPROVEN"
CONNECT_S, SEND_S = 1, 3
QUIET_MS, DEADLINE_MS, SKEW_MS = 6_000, 1_000, 1_000
MARGINS_MS = DEADLINE_MS + (CONNECT_S + SEND_S) * 1000 + SKEW_MS
WHEN = datetime(2026, 6, 1, tzinfo=UTC)


def short_margins(
    manifest: ClusterPublicationManifest, conn_id: str, *, ddl_task_timeout_seconds: int | None = None
) -> PublicationEnvironment:
    """The real environment with a short quiet period, dispatch deadline and skew margin (seconds, not minutes)."""
    environment = hook_environment(manifest, conn_id, ddl_task_timeout_seconds=ddl_task_timeout_seconds)
    settings = dataclasses.replace(
        environment.settings, dispatch_quiet_ms=QUIET_MS, dispatch_deadline_ms=DEADLINE_MS, void_skew_margin_ms=SKEW_MS
    )
    return dataclasses.replace(environment, settings=settings)


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder)


@pytest.fixture(scope="module")
def maintenance(dags_folder: Path) -> ModuleType:
    path = dags_folder / "clickhouse_external_void_permit.py"
    return load_dag_file("dpone_example_clickhouse_external_void_permit", path)


@pytest.fixture
def stalled(
    example: ModuleType,
    maintenance: ModuleType,
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[dict[str, Any]]:
    """A full-refresh run over an existing target whose publish stopped with DISPATCH_UNPROVEN, the EXCHANGE held."""
    connection = embedded_cluster.connection_json()
    connection["extra"] = {
        **connection["extra"],
        "connect_timeout_seconds": CONNECT_S,
        "send_receive_timeout_seconds": SEND_S,
    }
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(connection))
    monkeypatch.setenv("AIRFLOW__DPONE__DDL_TASK_TIMEOUT_SECONDS", "2")
    content = embedded_manifest(example, embedded_cluster, fresh_database, rows=SOURCE_ROWS)
    existing_target(embedded_cluster, fresh_database)
    configure(example, short_margins, manifest=content, poll_interval=0.2, retries=0, deferrable=False)
    (task,) = maintenance.dag.tasks
    task.manifest, task.ports_factory, task.retries = content, short_margins, 0
    embedded_cluster.faults.hold_ddl("coordinator", match=f"^EXCHANGE TABLES `?{fresh_database}")
    try:
        stopped = run_example(example, logical_date=WHEN)
        assert (stopped.states["stage"], stopped.states["publish"]) == ("success", "failed"), stopped.states
        record = authority_record(embedded_cluster, fresh_database)
        assert record is not None and record.phase is Phase.PUBLICATION_DISPATCHING
        assert record.last_error is not None and record.last_error.code == UNPROVEN
        assert exchanges(embedded_cluster, fresh_database) == 0
        assert member_rows(embedded_cluster, fresh_database) == [(2, 2)] * 2  # the baseline, untouched
        yield {"database": fresh_database, "run": stopped.run, "record": record}
    finally:
        embedded_cluster.faults.reset()
        configure(example, None)
        task.manifest, task.ports_factory = maintenance.manifest, None


def exchanges(cluster: EmbeddedCluster, database: str) -> int:
    """EXCHANGE entries of ``database`` in the distributed DDL queue (each ran on every member)."""
    client = cluster.client()
    try:
        return int(
            client.command(
                "SELECT uniqExact(entry) FROM system.distributed_ddl_queue"
                f" WHERE position(query, 'EXCHANGE TABLES') = 1 AND position(query, '{database}') > 0"
            )
        )
    finally:
        client.close()


def _void(maintenance: ModuleType, run_id: str, **conf: str) -> tuple[str, Any]:
    run = maintenance.dag.test(run_conf={"run_id": run_id, **conf})
    instance = run.get_task_instance("void_permit")
    return str(instance.state), instance.xcom_pull(task_ids="void_permit")


def test_the_woken_coordinator_runs_its_exchange_exactly_once_and_a_clear_commits_it(
    example: ModuleType, embedded_cluster: EmbeddedCluster, stalled: dict[str, Any]
) -> None:
    database = stalled["database"]
    embedded_cluster.faults.release_ddl("coordinator")  # SIGCONT: the held request is queued now
    deadline = time.monotonic() + 30
    while member_rows(embedded_cluster, database) != [(SOURCE_ROWS, SOURCE_ROWS)] * 2:
        assert time.monotonic() < deadline, "the late EXCHANGE never ran"
        time.sleep(0.1)
    assert exchanges(embedded_cluster, database) == 1
    record = authority_record(embedded_cluster, database)
    assert record is not None and record.phase is Phase.PUBLICATION_DISPATCHING  # never COMMITTED before it ran

    cleared = run_example(example, logical_date=WHEN)  # the same run again: a same-operation retry
    assert cleared.succeeded, cleared.states
    assert exchanges(embedded_cluster, database) == 1
    assert member_rows(embedded_cluster, database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2
    done = authority_record(embedded_cluster, database)
    assert done is not None and done.phase is Phase.COMPLETED and not done.voided


def test_void_is_refused_without_a_late_restart_then_recorded_with_one_and_the_clear_publishes_once(
    example: ModuleType,
    maintenance: ModuleType,
    embedded_cluster: EmbeddedCluster,
    stalled: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
) -> None:
    database, run, record = stalled["database"], stalled["run"], stalled["record"]
    first = record.publication
    assert first is not None

    capfd.readouterr()
    state, _ = _void(maintenance, run.run_id)  # the coordinator has not restarted: no proof
    assert state == "failed"
    assert "DPONE_CLICKHOUSE_CLUSTER_VOID_RESTART_UNPROVEN" in capfd.readouterr().out
    assert authority_record(embedded_cluster, database) == record  # nothing changed

    # restart once the permit plus every margin has passed (start times are read to whole seconds: one more)
    wait_s = (first.permitted_at_ms + MARGINS_MS + 1_000) / 1000 - time.time()
    time.sleep(max(0.0, wait_s) + 0.2)
    embedded_cluster.faults.emulate_restart("coordinator")
    state, pushed = _void(maintenance, run.run_id)
    assert state == "success", pushed
    assert (pushed["phase"], pushed["step"], pushed["epoch"]) == ("STAGED", "publication", first.epoch)
    assert pushed["correlation_token"] == first.correlation_token
    voided = authority_record(embedded_cluster, database)
    assert voided is not None and voided.phase is Phase.STAGED and voided.publication is None
    (proof,) = voided.voided
    assert proof.permit == first and proof.server_started_at_ms > first.permitted_at_ms + MARGINS_MS
    assert proof.send_timeout_ms == (CONNECT_S + SEND_S) * 1000 and proof.skew_margin_ms == SKEW_MS
    assert [m.member_id for m in proof.members] == list(voided.member_ids())

    cleared = run_example(example, logical_date=WHEN)
    assert cleared.succeeded, cleared.states
    done = authority_record(embedded_cluster, database)
    assert done is not None and done.phase is Phase.COMPLETED and len(done.voided) == 1
    assert done.publication is not None and done.publication.correlation_token != first.correlation_token
    assert exchanges(embedded_cluster, database) == 1  # the held one died with the old server
    assert member_rows(embedded_cluster, database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2


def test_a_coordinator_recreated_with_a_new_uuid_is_voided_once_the_pinned_uuid_is_declared_retired(
    example: ModuleType,
    maintenance: ModuleType,
    embedded_cluster: EmbeddedCluster,
    stalled: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The coordinator lost its data directory and came back with a new serverUUID() on the same host: the plain
    void stops with VOID_SERVER_DIFFERS for ever; with the pinned UUID as retired_server_uuid it records the proof
    (server_replaced), and the clear publishes under a new permit, exactly once."""
    database, run, record = stalled["database"], stalled["run"], stalled["record"]
    first = record.publication
    assert first is not None and first.server is not None
    pinned = first.server.server_uuid
    wait_s = (first.permitted_at_ms + MARGINS_MS + 1_000) / 1000 - time.time()
    time.sleep(max(0.0, wait_s) + 0.2)
    recreated = str(uuid.uuid4())
    embedded_cluster.faults.emulate_restart("coordinator", new_server_uuid=recreated)

    capfd.readouterr()
    state, _ = _void(maintenance, run.run_id)
    assert state == "failed"
    assert "DPONE_CLICKHOUSE_CLUSTER_VOID_SERVER_DIFFERS" in capfd.readouterr().out
    assert authority_record(embedded_cluster, database) == record  # nothing changed

    state, pushed = _void(maintenance, run.run_id, retired_server_uuid=pinned)
    assert state == "success", pushed
    assert (pushed["phase"], pushed["server_uuid"]) == ("STAGED", recreated)
    voided = authority_record(embedded_cluster, database)
    assert voided is not None
    (proof,) = voided.voided
    assert proof.server_replaced and proof.permit == first
    assert proof.server is not None and proof.server.server_uuid == recreated
    assert proof.server.host_digest == first.server.host_digest

    cleared = run_example(example, logical_date=WHEN)
    assert cleared.succeeded, cleared.states
    done = authority_record(embedded_cluster, database)
    assert done is not None and done.phase is Phase.COMPLETED and len(done.voided) == 1
    assert done.publication is not None and done.publication.server is not None
    assert done.publication.server.server_uuid == recreated  # the new permit is pinned to the recreated server
    assert exchanges(embedded_cluster, database) == 1
    assert member_rows(embedded_cluster, database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2


SLOW_DEADLINE_MS = 3_000
PERMIT_WRITE = r"^ALTER TABLE .* UPDATE .*'PUBLICATION_DISPATCHING'"
"""The publication's permit CAS (the first authority write into PUBLICATION_DISPATCHING)."""


def slow_keeper_deadline(
    manifest: ClusterPublicationManifest, conn_id: str, *, ddl_task_timeout_seconds: int | None = None
) -> PublicationEnvironment:
    environment = short_margins(manifest, conn_id, ddl_task_timeout_seconds=ddl_task_timeout_seconds)
    settings = dataclasses.replace(environment.settings, dispatch_deadline_ms=SLOW_DEADLINE_MS)
    return dataclasses.replace(environment, settings=settings)


def test_a_permit_write_answered_after_the_dispatch_deadline_publishes_without_a_restart(
    example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coordinator answers the publication's permit CAS only after longer than the dispatch deadline (the write
    takes effect, its response waits). The deadline runs from the dispatch record that follows, so the same task
    sends the EXCHANGE once and the run completes: no DISPATCH_UNPROVEN, no restart, no void."""
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(embedded_cluster.connection_json()))
    content = embedded_manifest(example, embedded_cluster, fresh_database, rows=SOURCE_ROWS)
    existing_target(embedded_cluster, fresh_database)
    configure(example, slow_keeper_deadline, manifest=content, poll_interval=0.2, retries=1, deferrable=False)
    embedded_cluster.faults.delay_response("coordinator", SLOW_DEADLINE_MS / 1000 + 1, match=PERMIT_WRITE)
    try:
        run = run_example(example, logical_date=WHEN)
        assert run.succeeded, run.states
    finally:
        embedded_cluster.faults.reset()
        configure(example, None)
    done = authority_record(embedded_cluster, fresh_database)
    assert done is not None and done.phase is Phase.COMPLETED and done.voided == ()
    permit = done.publication
    assert permit is not None and permit.dispatching_at_ms is not None
    assert permit.dispatching_at_ms - permit.permitted_at_ms > SLOW_DEADLINE_MS  # the slow answer did happen
    assert exchanges(embedded_cluster, fresh_database) == 1
    assert member_rows(embedded_cluster, fresh_database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2
