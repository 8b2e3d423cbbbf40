"""Every process of a cluster is stopped at teardown, also when the code using it fails or its owner dies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dpone_embedded
import pytest
from dpone_embedded import EmbeddedCluster
from dpone_embedded.launcher import alive

pytestmark = pytest.mark.embedded

ROOT = str(Path(dpone_embedded.__file__).resolve().parent.parent)


def _wait_gone(pids: list[int], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(alive(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


def test_processes_stop_when_the_block_fails(tmp_path: Path) -> None:
    pids: list[int] = []

    def use_and_fail() -> None:
        with EmbeddedCluster.start(tmp_path / "c") as cluster:
            pids.extend(info["pid"] for info in cluster.processes().values())
            assert len(pids) == 3 and all(alive(pid) for pid in pids)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        use_and_fail()
    assert _wait_gone(pids)


def test_processes_exit_when_their_owner_dies(tmp_path: Path) -> None:
    script = (
        "import json, sys, time\n"
        "from dpone_embedded import EmbeddedCluster\n"
        f"c = EmbeddedCluster.start({str(tmp_path / 'c')!r})\n"
        "print(json.dumps([i['pid'] for i in c.processes().values()]), flush=True)\n"
        "time.sleep(600)\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": ROOT}
    )
    try:
        assert owner.stdout is not None
        pids = json.loads(owner.stdout.readline())
        assert all(alive(pid) for pid in pids)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert _wait_gone(pids)


def test_a_second_cluster_in_the_same_directory_is_refused(tmp_path: Path) -> None:
    with EmbeddedCluster.start(tmp_path / "c"), pytest.raises(RuntimeError, match="already running"):
        EmbeddedCluster.start(tmp_path / "c")
    with pytest.raises(ValueError, match="at least two"):
        EmbeddedCluster.start(tmp_path / "d", members=1)


def test_down_and_up_again_keeps_ports_and_tables(tmp_path: Path) -> None:
    with EmbeddedCluster.start(tmp_path / "c") as first:
        ports = [e.port for e in first.endpoints]
        first.client("member1").command("CREATE DATABASE keep ENGINE = Atomic")
        first.client("member1").command("CREATE TABLE keep.t (a UInt8) ENGINE = MergeTree ORDER BY a")
        first.client("member1").command("INSERT INTO keep.t VALUES (1), (2)")
    with EmbeddedCluster.start(tmp_path / "c") as second:
        assert [e.port for e in second.endpoints] == ports
        assert second.client("member1").command("SELECT count() FROM keep.t") == 2
