"""What a person reads in the task log, on the embedded cluster: stage shows each member's load and every rebuild with
its code; stage, publish and cleanup name every member one way, ``member m<16 hex> (shard S, replica R)``, as the Test
button does; refused credentials and an unreachable coordinator are told apart from a missing cluster, and only the
unreachable coordinator is retried."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from dpone_embedded import EmbeddedCluster

from airflow_provider_dpone.cluster.values.identities import member_id
from airflow_provider_dpone.operators import (
    DponeCleanupOperator,
    DponeFenceOperator,
    DponePublishOperator,
    DponeStageOperator,
)
from airflow_provider_dpone.operators.reporting import DponeRetryableError, DponeTerminalError
from tests.support.airflow.dag_runner import load_example
from tests.support.airflow.embedded_example import embedded_manifest, member_rows

PASSWORD = "pw-Logs-Redact-4c1d"
pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2, password=PASSWORD)]

SOURCE_ROWS = 12


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder)


def context() -> Any:
    return {"dag_run": SimpleNamespace(dag_id="logs_it", run_id="manual__logs")}


def lines_with(text: str, log: str) -> list[str]:
    return [line for line in log.splitlines() if text in line]


def member_names(cluster: EmbeddedCluster) -> dict[str, str]:
    """Each member's one name, by the double's own handle (``member2``): the id from the member's position in
    ``system.clusters``, and the position as the embedded cluster's CLI prints it beside that handle."""
    return {
        member.name: f"member {member_id(member.shard_num, member.replica_num)} ({member.position})"
        for member in cluster.members
    }


NAMED = re.compile(r": member (m[0-9a-f]{16}(?: \(shard \d+, replica \d+\))?)[:;, ]")


def test_stage_logs_each_member_load_and_a_rebuild_with_its_code(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(embedded_cluster.connection_json()))
    manifest = embedded_manifest(example, embedded_cluster, fresh_database, rows=SOURCE_ROWS)
    DponeFenceOperator(task_id="fence", manifest=manifest).execute(context())
    stage = DponeStageOperator(task_id="stage", manifest=manifest)
    embedded_cluster.faults.fail_next_statement("member2", 241, match="^INSERT INTO")  # member2's load is refused
    capfd.readouterr()
    staged = stage.execute(context())
    log = capfd.readouterr().out
    assert len(lines_with(": loading artifact ", log)) == 3, "each member once, and the rebuilt member again"
    assert len(lines_with(": load answered in ", log)) == 2
    (refused,) = lines_with(": load unanswered or refused (", log)
    (rebuild,) = lines_with("DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_REBUILT", log)
    member = refused.split("dpone stage: member ")[1].split(": load ")[0]  # its one name: id and position
    assert f"dpone stage: member {member}: rebuild 1 of at most " in rebuild
    assert f"[candidate held 0 of {SOURCE_ROWS} rows]" in rebuild
    assert log.index(refused) < log.index(rebuild) < log.rindex(f"member {member}: loading artifact ")
    assert {(m["member_id"], m["rebuilds"]) for m in staged["members"] if m["rebuilds"]} == {(member.split()[0], 1)}
    assert staged["ready_members"] == 2
    assert PASSWORD not in log


def test_stage_publish_and_cleanup_name_every_member_by_id_and_position(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(embedded_cluster.connection_json()))
    manifest = embedded_manifest(example, embedded_cluster, fresh_database, rows=SOURCE_ROWS)
    names = member_names(embedded_cluster)
    DponeFenceOperator(task_id="fence", manifest=manifest).execute(context())
    embedded_cluster.faults.fail_next_statement("member2", 241, match="^INSERT INTO")  # a rebuild line for member2
    capfd.readouterr()
    staged = DponeStageOperator(task_id="stage", manifest=manifest).execute(context())
    stage_log = capfd.readouterr().out
    DponePublishOperator(task_id="publish", manifest=manifest, deferrable=False).execute(context())
    publish_log = capfd.readouterr().out
    DponeCleanupOperator(task_id="cleanup", manifest=manifest, deferrable=False).execute(context())
    cleanup_log = capfd.readouterr().out

    member2 = names["member2"]
    for needle in (": loading artifact ", ": load unanswered or refused (", ": rebuild 1 of at most ", ": stage READY"):
        assert f"dpone stage: {member2}{needle}" in stage_log, needle
    for task, log in (("publish", publish_log), ("cleanup", cleanup_log)):
        phase = "COMMITTED" if task == "publish" else "COMPLETED"
        for name in names.values():
            assert len(lines_with(f"dpone {task}: {name}: {phase} {SOURCE_ROWS} rows, content digest ", log)) == 1
    named = [found for log in (stage_log, publish_log, cleanup_log) for found in NAMED.findall(log)]
    assert len(named) >= 10 and set(named) == {name.removeprefix("member ") for name in names.values()}
    assert {(m["shard_num"], m["replica_num"]) for m in staged["members"]} == {(1, 1), (1, 2)}
    assert member_rows(embedded_cluster, fresh_database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_refused_credentials_fail_without_retry_and_an_unreachable_coordinator_is_retried(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    manifest = embedded_manifest(example, embedded_cluster, fresh_database, rows=SOURCE_ROWS)
    fence = DponeFenceOperator(task_id="fence", manifest=manifest)
    wrong = {**embedded_cluster.connection_json(), "password": "not-the-password"}
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(wrong))
    capfd.readouterr()
    with pytest.raises(DponeTerminalError, match=r"(?s)^DPONE_CLICKHOUSE_AUTHENTICATION_FAILED: .*Code 516"):
        fence.execute(context())
    log = capfd.readouterr().out
    assert len(lines_with("dpone fence: DPONE_CLICKHOUSE_AUTHENTICATION_FAILED", log)) == 1
    assert "(terminal: no retry)" in log and "not-the-password" not in log

    nowhere = {**embedded_cluster.connection_json(), "port": _free_port()}
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(nowhere))
    with pytest.raises(DponeRetryableError, match=r"^DPONE_CLICKHOUSE_COORDINATOR_UNREACHABLE: "):
        fence.execute(context())
    log = capfd.readouterr().out
    assert "INVENTORY_INCOMPLETE" not in log and "(retryable)" in log
    assert str(nowhere["port"]) not in log, "no host or port in the log"

    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(embedded_cluster.connection_json()))
    assert fence.execute(context())["phase"] == "LOCKED"
    assert member_rows(embedded_cluster, fresh_database) == [None, None], "nothing was published"


@pytest.fixture
def manifest(
    example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """The example manifest on the embedded cluster, with the good connection exported."""
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(embedded_cluster.connection_json()))
    return embedded_manifest(example, embedded_cluster, fresh_database, rows=SOURCE_ROWS)


def test_a_cluster_name_the_coordinator_does_not_define_fails_at_once_and_is_named(
    manifest: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    manifest["physical_design"]["storage"]["clickhouse"]["cluster"]["name"] = "dpone_clustr"
    capfd.readouterr()
    with pytest.raises(
        DponeTerminalError, match=r"(?s)^DPONE_CLICKHOUSE_CLUSTER_NOT_DEFINED: .*\n  \[cluster dpone_clustr\]\n"
    ):
        DponeFenceOperator(task_id="fence", manifest=manifest).execute(context())
    log = capfd.readouterr().out
    (headline,) = lines_with("dpone fence: DPONE_CLICKHOUSE_CLUSTER_NOT_DEFINED: ", log)
    assert "(terminal: no retry)" in headline and "dpone_clustr" not in headline, "the detail has its own line"
    assert len(lines_with("dpone fence:   [cluster dpone_clustr]", log)) == 1


def test_a_member_that_is_down_is_named_with_its_cluster(
    manifest: dict[str, Any], embedded_cluster: EmbeddedCluster, capfd: pytest.CaptureFixture[str]
) -> None:
    down = embedded_cluster.members[1]
    label = f"member {member_id(down.shard_num, down.replica_num)} (shard {down.shard_num}, replica {down.replica_num})"
    embedded_cluster.faults.kill(down.name)
    try:
        capfd.readouterr()
        with pytest.raises(DponeRetryableError, match=r"^DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE: "):
            DponeFenceOperator(task_id="fence", manifest=manifest).execute(context())
        log = capfd.readouterr().out
        assert f"[cluster {embedded_cluster.cluster_name}: {label} did not answer]" in log
        assert (
            len(lines_with("DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE: a member did not answer (retryable)", log))
            == 1
        )
    finally:
        embedded_cluster.faults.reset()
