"""An embedded cluster with nothing to do uses next to no CPU: its workers sleep until the cluster's bell rings."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from dpone_embedded import EmbeddedCluster

pytestmark = [pytest.mark.embedded, pytest.mark.slow]

SETTLE_SECONDS = 2.0
WINDOW_SECONDS = 10.0
IDLE_SHARE = 0.005
"""The aim: half a percent of a core per process."""
TICK_ALLOWANCE = 5
"""Clock ticks (1/CLK_TCK s each) allowed on top: the kernel charges CPU time by whole ticks."""


def _cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (every thread, those ended included), from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads CPU times from /proc (Linux)")
def test_an_idle_cluster_uses_under_half_a_percent_of_a_core_per_process(tmp_path: Path) -> None:
    """After a distributed DDL, a replicated insert and a replica sync, each process is left alone for
    ``WINDOW_SECONDS`` and the CPU time it was charged meanwhile must stay under ``IDLE_SHARE`` of the window (plus
    ``TICK_ALLOWANCE`` ticks of accounting granularity).

    Not flaky on a loaded 2-core machine: the measure is each process's own CPU time (what the kernel charged to it),
    not wall-clock time or the load average. Other work on the machine delays an idle process's wake-ups but charges
    it nothing; the test sends no request during the window, and the settling time lets the work above finish (the
    replica sync returns only once the insert is replicated). A process that polls its state charges several
    percent of a core (about 9 % per member before the bell: 90 ticks in such a window) whatever the load.
    """
    with EmbeddedCluster.start(tmp_path / "c", members=2) as cluster:
        coordinator = cluster.client()
        coordinator.command(f"CREATE DATABASE idle ON CLUSTER {cluster.cluster_name} ENGINE = Atomic")
        coordinator.command(
            f"CREATE TABLE idle.t ON CLUSTER {cluster.cluster_name} (k UInt64) ENGINE = ReplicatedMergeTree ORDER BY k"
        )
        cluster.client("member1").command("INSERT INTO idle.t SELECT number FROM numbers(100)")
        replica = cluster.client("member2")
        replica.command("SYSTEM SYNC REPLICA idle.t")
        assert replica.command("SELECT count() FROM idle.t") == 100
        pids = {name: int(info["pid"]) for name, info in cluster.processes().items()}
        time.sleep(SETTLE_SECONDS)
        before = {name: _cpu_seconds(pid) for name, pid in pids.items()}
        started = time.monotonic()
        time.sleep(WINDOW_SECONDS)
        after = {name: _cpu_seconds(pid) for name, pid in pids.items()}
        window = time.monotonic() - started
    bound = IDLE_SHARE * window + TICK_ALLOWANCE / os.sysconf("SC_CLK_TCK")
    used = {name: round(after[name] - before[name], 3) for name in pids}
    assert len(used) == 3
    assert all(seconds <= bound for seconds in used.values()), f"CPU seconds over {window:.1f} s: {used} > {bound}"
