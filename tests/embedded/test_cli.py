"""The command line: ``up`` prints the cluster, a plain clickhouse-connect client creates a table on every member
through one ON CLUSTER statement, ``status`` adds pids, ``fault`` drives faults, ``down`` stops everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import clickhouse_connect
import dpone_embedded
import pytest
from dpone_embedded.launcher import alive

from airflow_provider_dpone.cluster.values.identities import member_id
from airflow_provider_dpone.cluster.values.inventory import member_label

pytestmark = pytest.mark.embedded

ROOT = str(Path(dpone_embedded.__file__).resolve().parent.parent)


def _cli(*args: str) -> dict:
    return _cli_with_stderr(*args)[0]


def _cli_with_stderr(*args: str) -> tuple[dict, str]:
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run(
        [sys.executable, "-m", "dpone_embedded", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_up_status_fault_down(tmp_path: Path) -> None:
    directory = str(tmp_path / "cluster")
    described = _cli("up", "--dir", directory, "--members", "3", "--internal-replication", "false")
    try:
        assert described["cluster"] == "dpone_cluster"
        assert [(m["shard_num"], m["replica_num"]) for m in described["members"]] == [(1, 1), (1, 2), (1, 3)]
        assert [(m["name"], m["position"]) for m in described["members"]] == [
            ("member1", "shard 1, replica 1"),
            ("member2", "shard 1, replica 2"),
            ("member3", "shard 1, replica 3"),
        ]
        # the product's one name of each member, as the provider computes it (the double computes it on its own)
        assert [m["label"] for m in described["members"]] == [
            member_label(member_id(1, replica), 1, replica) for replica in (1, 2, 3)
        ]
        assert [m["member_id"] for m in described["members"]] == [member_id(1, replica) for replica in (1, 2, 3)]
        password = described["airflow_connection_json"]["password"]
        assert len(password) >= 20, "the demo runs with a generated password"
        assert described["airflow_connection_uri"].startswith("dpone-clickhouse://default:")
        specs = sorted(Path(directory).glob("*/spec.json"))
        assert len(specs) == 4 and all(spec.stat().st_mode & 0o777 == 0o600 for spec in specs)
        extra = described["airflow_connection_json"]["extra"]
        assert sorted(extra["member_endpoints"]) == ["1:1", "1:2", "1:3"]

        coordinator = described["coordinator"]
        client = clickhouse_connect.get_client(host=coordinator["host"], port=coordinator["port"], password=password)
        client.command("CREATE DATABASE cli_db ON CLUSTER dpone_cluster ENGINE = Atomic")
        client.command("CREATE TABLE cli_db.t ON CLUSTER dpone_cluster (a UInt8) ENGINE = MergeTree ORDER BY a")
        for member in described["members"]:
            member_client = clickhouse_connect.get_client(host=member["host"], port=member["port"], password=password)
            assert member_client.command("EXISTS TABLE cli_db.t") == 1

        status = _cli("status", "--dir", directory)
        assert {k: v for k, v in status.items() if k != "processes"} == described
        assert sorted(status["processes"]) == ["coordinator", "member1", "member2", "member3"]
        assert all(process["alive"] for process in status["processes"].values())

        armed = _cli("fault", "--dir", directory, "pause", member_id(1, 2))  # the name a task log gives the member
        assert [(f["target"], f["kind"]) for f in armed["armed"]] == [("member2", "pause")]
        armed = _cli("fault", "--dir", directory, "pause", "2")
        assert [(f["target"], f["kind"]) for f in armed["armed"]] == [("member2", "pause")]
        armed = _cli("fault", "--dir", directory, "lose-response", "coordinator", "--match", "INSERT")
        assert len(armed["armed"]) == 2
        _cli("fault", "--dir", directory, "pause-replication", "member1")
        _cli("fault", "--dir", directory, "stall-replication", "3")
        armed = _cli("fault", "--dir", directory, "lag-replication", "2", "1.5")
        replication = {(f["target"], f["kind"], f["seconds"]) for f in armed["armed"] if "replication" in f["kind"]}
        assert replication == {
            ("member1", "pause_replication", None),
            ("member3", "stall_replication", None),
            ("member2", "lag_replication", 1.5),
        }
        armed = _cli("fault", "--dir", directory, "resume-replication", "1")
        assert ("member1", "pause_replication") not in {(f["target"], f["kind"]) for f in armed["armed"]}
        armed = _cli("fault", "--dir", directory, "hold-ddl", "coordinator", "--match", "^EXCHANGE")
        assert ("coordinator", "hold_ddl", "^EXCHANGE") in {
            (f["target"], f["kind"], f["pattern"]) for f in armed["armed"]
        }
        before = int(client.command("SELECT uptime()"))
        armed = _cli("fault", "--dir", directory, "emulate-restart", "coordinator")
        assert "hold_ddl" not in {f["kind"] for f in armed["armed"]}  # the held request died with the server
        assert int(client.command("SELECT uptime()")) <= before
        _cli("fault", "--dir", directory, "hold-ddl", "coordinator")
        armed = _cli("fault", "--dir", directory, "release-ddl", "coordinator")
        assert "hold_ddl" not in {f["kind"] for f in armed["armed"]}
        assert _cli("fault", "--dir", directory, "reset") == {"armed": [], "killed": []}
    finally:
        stopped = _cli("down", "--dir", directory)
    assert sorted(stopped["stopped"]) == ["coordinator", "member1", "member2", "member3"]
    after = json.loads((Path(directory) / "cluster.json").read_text())
    assert not any(alive(pid) for pid in after["pids"].values())


def test_up_on_a_stopped_cluster_keeps_its_connection_or_says_loudly_that_it_changed(tmp_path: Path) -> None:
    directory = str(tmp_path / "cluster")
    first = _cli("up", "--dir", directory)
    _cli("down", "--dir", directory)
    try:
        again, notice = _cli_with_stderr("up", "--dir", directory)
        assert again["airflow_connection_json"]["password"] == first["airflow_connection_json"]["password"]
        assert again["airflow_connection_uri"] == first["airflow_connection_uri"], "ports are kept where free"
        assert "WARNING" not in notice
        coordinator = again["coordinator"]
        saved = first["airflow_connection_json"]["password"]
        client = clickhouse_connect.get_client(host=coordinator["host"], port=coordinator["port"], password=saved)
        assert client.command("SELECT 1") == 1, "the connection saved after the first up still works"
    finally:
        _cli("down", "--dir", directory)
    try:
        changed, notice = _cli_with_stderr("up", "--dir", directory, "--password", "another-password")
        assert changed["airflow_connection_json"]["password"] == "another-password"
        assert notice.startswith("WARNING: the Airflow connection of the embedded cluster") and "(password)" in notice
        assert "another-password" not in notice, "stderr never carries the password"
        [command] = [line.strip() for line in notice.splitlines() if "connections add" in line]
        uri = command.split("--conn-uri ", 1)[1]
        read = subprocess.run(
            ["bash", "-c", f"echo {uri}"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": ROOT},
            timeout=120,
            check=True,
        )
        assert read.stdout.strip() == changed["airflow_connection_uri"], "the command reads the new connection"
    finally:
        _cli("down", "--dir", directory)


def test_errors_are_json_on_stderr(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run(
        [sys.executable, "-m", "dpone_embedded", "status", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert json.loads(done.stderr)["error"] == "FileNotFoundError"


def test_up_without_chdb_prints_one_line_naming_the_embedded_extra(tmp_path: Path) -> None:
    """In an interpreter where chdb cannot be imported, ``up`` explains itself in one line: no traceback, no process."""
    hide_chdb = (
        "import runpy, sys; sys.modules['chdb'] = None; "
        "sys.argv[0] = 'dpone_embedded'; "
        "runpy.run_module('dpone_embedded', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", hide_chdb, "up", "--dir", str(tmp_path / "cluster")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "the embedded cluster needs chdb, which is not installed: "
        "pip install dpone-embedded (from a clone of the provider: pip install ./packages/dpone-embedded)"
    ]
    assert not (tmp_path / "cluster").exists(), "nothing was started"
