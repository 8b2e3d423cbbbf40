"""The runbook's way back from a publication stopped after its swap, step by step, on the embedded cluster (the
scenarios the external and the internal DAG tests run).

A first full-refresh run publishes. The second run stages, and its publish (a clear of the run) is made to stop with
``PUBLISHED_CONTENT_DIVERGENT``: the last member's DDL worker is paused, and once the ``EXCHANGE`` is queued a row is
written into that member's candidate, then the worker resumes and the ``EXCHANGE`` runs there. Then the operator
follows docs/runbook.md ("A publication stopped after its swap") exactly: inspect, restore or accept, run the release
DAG, drop what is left under the candidate name by its UUID, and a third run publishes. Every assertion reads the
engines and the authority directly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import pytest
from dpone_embedded import EmbeddedCluster

from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from tests.support.airflow.dag_runner import RunOutcome, configure, export_connection, run_example
from tests.support.airflow.embedded_example import embedded_manifest
from tests.support.cluster.replica_checks import authority_record, queue_entries, replica_contents, source_content

DIVERGENT = "DPONE_CLICKHOUSE_CLUSTER_PUBLISHED_CONTENT_DIVERGENT"
FENCED = "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED"
NOT_RESTORED = "DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOT_RESTORED"
NOT_ACCEPTED = "DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOT_ACCEPTED"
STOPPED_RUN_ID = "manual__2026-07-02T00:00:00+00:00"
SOURCE_ROWS = 30
AUTHORITY = "__dpone_cluster_publication_authority"
STRAY_ID = 1_000_001
STRAY_ROW = f"({STRAY_ID}, 'written-after-the-barrier', NULL, 0)"
TARGET = "target_table"


def _on(cluster: EmbeddedCluster, process: Any, statement: str) -> list[tuple[Any, ...]]:
    client = cluster.client(process)
    try:
        return [tuple(row) for row in client.query(statement).result_rows]
    finally:
        client.close()


def _command(cluster: EmbeddedCluster, process: Any, statement: str) -> None:
    client = cluster.client(process)
    try:
        client.command(statement)
    finally:
        client.close()


def uuids(cluster: EmbeddedCluster, database: str, names: tuple[str, ...]) -> list[dict[str, str]]:
    """The runbook's inspection: name -> UUID of ``names`` on every member (``system.tables``)."""
    listed = ", ".join(f"'{name}'" for name in names)
    return [
        {
            str(name): str(uuid)
            for name, uuid in _on(
                cluster,
                member,
                (
                    f"SELECT name, toString(uuid) FROM system.tables WHERE database = '{database}' AND name IN ({listed})"
                ),
            )
        }
        for member in cluster.members
    ]


def _write_into_the_candidate_once_the_exchange_is_queued(
    cluster: EmbeddedCluster, database: str, paused: Any, failures: list[BaseException]
) -> None:
    try:
        deadline = time.monotonic() + 60
        while queue_entries(cluster, database, "EXCHANGE TABLES") == 0:
            assert time.monotonic() < deadline, "the EXCHANGE was never queued"
            time.sleep(0.05)
        record = authority_record(cluster, database)
        assert record is not None and record.phase is Phase.PUBLICATION_DISPATCHING
        _command(cluster, paused, f"INSERT INTO `{database}`.`{record.candidate_name}` VALUES {STRAY_ROW}")
    except BaseException as error:  # noqa: BLE001 - handed to the test thread
        failures.append(error)
    finally:
        cluster.faults.resume(paused)


def publish_then_stop_after_the_swap(example: ModuleType, cluster: EmbeddedCluster, database: str) -> AuthorityRecord:
    """Run 1 publishes; run 2 stops with ``PUBLISHED_CONTENT_DIVERGENT`` after its EXCHANGE ran on every member."""
    first = run_example(example, logical_date=datetime(2026, 7, 1, tzinfo=UTC))
    assert first.succeeded, first.states
    second = datetime(2026, 7, 2, tzinfo=UTC)
    staged = run_example(example, logical_date=second, mark_success=("publish", "cleanup"))  # fence and stage only
    assert staged.states["stage"] == "success", staged.states
    paused = cluster.members[-1]  # after the candidates exist (internal mode creates them ON CLUSTER)
    cluster.faults.pause(paused)
    failures: list[BaseException] = []
    writer = threading.Thread(
        target=_write_into_the_candidate_once_the_exchange_is_queued, args=(cluster, database, paused, failures)
    )
    writer.start()
    try:
        stopped = run_example(example, logical_date=second, mark_success=("fence", "stage"))  # the same run, cleared
    finally:
        writer.join(timeout=90)
        cluster.faults.resume(paused)
    assert not failures, failures
    assert (stopped.states["publish"], stopped.states.get("cleanup")) == ("failed", "upstream_failed"), stopped.states
    record = authority_record(cluster, database)
    assert record is not None and record.phase is Phase.PUBLICATION_DISPATCHING
    assert record.last_error is not None and record.last_error.code == DIVERGENT
    # the runbook's inspection: the DDL ran on every member (each target is its candidate, the predecessor retained)
    seen = uuids(cluster, database, (TARGET, record.candidate_name))
    assert sorted((s[TARGET], s[record.candidate_name]) for s in seen) == sorted(
        (m.candidate_uuid, m.target_uuid) for m in record.members
    )
    return record


def new_run_is_fenced(example: ModuleType) -> RunOutcome:
    """What the release exists for: a new run cannot take the target while the stopped record holds it."""
    outcome = run_example(example, logical_date=datetime(2026, 7, 3, tzinfo=UTC))
    assert outcome.states["fence"] == "failed", outcome.states
    return outcome


def restore(cluster: EmbeddedCluster, database: str, record: AuthorityRecord) -> None:
    """The runbook's restore: one ``EXCHANGE ... ON CLUSTER`` back, then every member's UUIDs checked."""
    _command(
        cluster,
        "coordinator",
        f"EXCHANGE TABLES `{database}`.`{TARGET}` AND `{database}`.`{record.candidate_name}`"
        f" ON CLUSTER {cluster.cluster_name}",
    )
    seen = uuids(cluster, database, (TARGET, record.candidate_name))
    assert sorted((s[TARGET], s[record.candidate_name]) for s in seen) == sorted(
        (m.target_uuid, m.candidate_uuid) for m in record.members
    )


def make_every_member_hold_the_same_content(cluster: EmbeddedCluster, database: str, internal: bool) -> int:
    """The runbook's accept: every member's target holds the row written into one candidate (a replicated target
    receives it by replication: synced first), then counted; the row count every member holds."""
    for member in cluster.members:
        if internal:
            _command(cluster, member, f"SYSTEM SYNC REPLICA `{database}`.`{TARGET}`")
        else:
            (has,) = _on(cluster, member, f"SELECT count() FROM `{database}`.`{TARGET}` WHERE id = {STRAY_ID}")[0]
            if not int(has):
                _command(cluster, member, f"INSERT INTO `{database}`.`{TARGET}` VALUES {STRAY_ROW}")
    counts = {
        int(_on(cluster, member, f"SELECT count() FROM `{database}`.`{TARGET}`")[0][0]) for member in cluster.members
    }
    assert len(counts) == 1, counts
    return counts.pop()


def release(
    maintenance: ModuleType, example: ModuleType, run_id: str, operation_id: str, **conf: str
) -> tuple[str, Any]:
    """The runbook's release: the maintenance DAG triggered with the stopped run's DAG id, run id, operation id (the
    guard) and the decision; the task's state and its XCom."""
    run = maintenance.dag.test(
        run_conf={"dag_id": example.dag.dag_id, "run_id": run_id, "operation_id": operation_id, **conf}
    )
    instance = run.get_task_instance("release")
    return str(instance.state), instance.xcom_pull(task_ids="release")


def drop_what_is_left(cluster: EmbeddedCluster, database: str, record: AuthorityRecord) -> None:
    """The runbook's last step: on every member, the table left under the candidate name is the one the release
    recorded (its UUID), and is dropped there."""
    released = authority_record(cluster, database)
    assert released is not None and released.release is not None
    left = {member.candidate_uuid for member in released.release.members}
    for member, seen in zip(cluster.members, uuids(cluster, database, (record.candidate_name,)), strict=True):
        assert seen[record.candidate_name] in left
        _command(cluster, member, f"DROP TABLE `{database}`.`{record.candidate_name}` SYNC")


def publishes_again(example: ModuleType, cluster: EmbeddedCluster, database: str, previous: str) -> None:
    """A new DAG run takes the released target and publishes the source exactly; nothing else is left."""
    later = run_example(example, logical_date=datetime(2026, 7, 4, tzinfo=UTC))
    assert later.succeeded, later.states
    done = authority_record(cluster, database)
    assert done is not None and done.phase is Phase.COMPLETED and done.previous_operation_id == previous
    source = source_content(cluster, database)
    assert replica_contents(cluster, database) == [source] * len(cluster.members)
    for member in cluster.members:  # no candidate or predecessor left anywhere
        listed = _on(cluster, member, f"SELECT name FROM system.tables WHERE database = '{database}'")
        names = {str(name) for (name,) in listed}
        assert TARGET in names and names <= {AUTHORITY, "source_table", TARGET}, names


@contextmanager
def stopped_run(
    example: ModuleType,
    maintenance: ModuleType,
    cluster: EmbeddedCluster,
    database: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[AuthorityRecord]:
    """The example DAG and the release DAG on ``database`` of the cluster, with a run stopped after its swap."""
    export_connection(monkeypatch, cluster)
    content = embedded_manifest(example, cluster, database, rows=SOURCE_ROWS)
    configure(example, None, manifest=content, poll_interval=0.2, retries=0, deferrable=False)
    (task,) = maintenance.dag.tasks
    task.manifest, task.retries = content, 0
    try:
        yield publish_then_stop_after_the_swap(example, cluster, database)
    finally:
        cluster.faults.reset()
        configure(example, None)
        task.manifest = maintenance.manifest


def restored_then_released(
    example: ModuleType,
    maintenance: ModuleType,
    cluster: EmbeddedCluster,
    database: str,
    record: AuthorityRecord,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Released as restored: refused before the swap back, still fenced after it until released; then released,
    what is left dropped, and a new run publishes."""
    capfd.readouterr()
    state, _ = release(maintenance, example, STOPPED_RUN_ID, record.operation_id, decision="restored")
    assert state == "failed"  # nothing swapped back yet
    assert f"dpone release: {NOT_RESTORED}: " in capfd.readouterr().out
    assert authority_record(cluster, database) == record

    restore(cluster, database, record)
    new_run_is_fenced(example)  # restored, still held until released
    assert f"dpone fence: {FENCED}: " in capfd.readouterr().out
    state, pushed = release(maintenance, example, STOPPED_RUN_ID, record.operation_id, decision="restored")
    assert state == "success", pushed
    assert (pushed["phase"], pushed["decision"], pushed["stopped_by"]) == ("RELEASED", "restored", DIVERGENT)
    released = authority_record(cluster, database)
    assert released is not None and released.phase is Phase.RELEASED and released.release is not None
    assert {m.content_digest for m in released.release.members} == {m.target_content_digest for m in record.members}

    drop_what_is_left(cluster, database, record)
    publishes_again(example, cluster, database, record.operation_id)


def accepted_then_released(
    example: ModuleType,
    maintenance: ModuleType,
    cluster: EmbeddedCluster,
    database: str,
    record: AuthorityRecord,
    capfd: pytest.CaptureFixture[str],
    *,
    internal: bool,
) -> None:
    """Released as accepted: refused while the members differ (external: one member holds the written row) or the
    count is wrong (internal: the row replicated everywhere); then every member made to hold the same content,
    counted, released with that count, what is left dropped, and a new run publishes."""
    capfd.readouterr()
    refused = SOURCE_ROWS if internal else SOURCE_ROWS + 1
    state, _ = release(
        maintenance, example, STOPPED_RUN_ID, record.operation_id, decision="accepted", accepted_row_count=str(refused)
    )
    assert state == "failed"
    assert f"dpone release: {NOT_ACCEPTED}: " in capfd.readouterr().out
    assert authority_record(cluster, database) == record

    rows = make_every_member_hold_the_same_content(cluster, database, internal=internal)
    assert rows == SOURCE_ROWS + 1
    state, pushed = release(
        maintenance, example, STOPPED_RUN_ID, record.operation_id, decision="accepted", accepted_row_count=str(rows)
    )
    assert state == "success", pushed
    assert (pushed["phase"], pushed["decision"], pushed["accepted_row_count"]) == ("RELEASED", "accepted", rows)
    released = authority_record(cluster, database)
    assert released is not None and released.phase is Phase.RELEASED and released.release is not None
    assert all(m.published_uuid == m.candidate_uuid for m in released.members)

    drop_what_is_left(cluster, database, record)
    publishes_again(example, cluster, database, record.operation_id)


def follow_the_runbook(
    decision: str,
    example: ModuleType,
    maintenance: ModuleType,
    cluster: EmbeddedCluster,
    database: str,
    record: AuthorityRecord,
    capfd: pytest.CaptureFixture[str],
    *,
    internal: bool,
) -> None:
    """The runbook's steps for ``decision``, from the stopped run to a new run that publishes."""
    if decision == "restored":
        restored_then_released(example, maintenance, cluster, database, record, capfd)
    else:
        accepted_then_released(example, maintenance, cluster, database, record, capfd, internal=internal)
