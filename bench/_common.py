"""Measurement helpers shared by the native transfer benchmarks (``bench/native_transfer*.py``).

Imported as ``_common``: each benchmark runs as a script (also in its worker subprocess), so its own folder is first
on ``sys.path``.
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def rss_bytes() -> int:
    """The resident set size of this process, from ``/proc/self/status`` (0 where it is not available)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def arrow_bytes() -> int:
    """Bytes Arrow has allocated in this process right now (0 where pyarrow is not imported)."""
    import sys

    arrow = sys.modules.get("pyarrow")
    return int(arrow.total_allocated_bytes()) if arrow is not None else 0


class PeakSampler:
    """Samples VmRSS every 5 ms in a thread; ``peak`` is the highest value seen while running, ``arrow_peak`` the
    highest Arrow allocation (the worker's own buffers, apart from an in-process engine's memory), ``cpu`` the CPU
    seconds the sampling thread itself used (it grows with wall time, so CPU counters subtract it)."""

    def __init__(self) -> None:
        self.peak = rss_bytes()
        self.arrow_peak = arrow_bytes()
        self.cpu = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            self.arrow_peak = max(self.arrow_peak, arrow_bytes())
            time.sleep(0.005)
        self.cpu = time.thread_time()

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())


def process_cpu_seconds(pid: int, *, reaped: bool = False) -> float:
    """User + system CPU of process ``pid`` (all its threads; with ``reaped``, also its exited, waited-for children),
    from ``/proc/<pid>/stat``; 0 when the process is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if reaped else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The live child pids of ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


class CpuCounters:
    """CPU seconds spent by this worker process, the PostgreSQL server (postmaster, its live backends and the ones
    it has reaped) and, when known, the source engine's process: each measurement reports the CPU it cost, not only
    its wall time, because on a shared two-core machine wall time depends on what else runs."""

    def __init__(self, postmaster: int | None, source: int | None) -> None:
        self._postmaster = postmaster
        self._source = source

    def snapshot(self) -> dict[str, float]:
        worker = os.times()
        sample = {"worker": worker.user + worker.system}
        if self._postmaster:
            sample["postgres"] = process_cpu_seconds(self._postmaster, reaped=True) + sum(
                process_cpu_seconds(child) for child in children(self._postmaster)
            )
        if self._source:
            sample["source"] = process_cpu_seconds(self._source)
        return sample

    @staticmethod
    def spent(before: dict[str, float], after: dict[str, float], sampler: PeakSampler) -> dict[str, float]:
        """CPU seconds between two snapshots, without the RSS sampling thread's own (``sampler`` has stopped)."""
        spent = {name: after[name] - before[name] for name in before}
        spent["worker"] -= sampler.cpu
        return {name: round(value, 3) for name, value in spent.items()}


class UtcClock:
    """The wall clock the route's lease and journal read."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)


def chdb_engine() -> tuple[str, dict[str, Any]]:
    """A fresh in-process engine directory with a users config that allows access management; returns the directory
    and the clickhouse-connect arguments that open it."""
    path = tempfile.mkdtemp(prefix="dpone-bench-chdb-")
    config = Path(path) / "config.xml"
    config.write_text(
        "<clickhouse><users><default><password></password><networks><ip>::/0</ip></networks>"
        "<profile>default</profile><quota>default</quota><access_management>1</access_management></default></users>"
        "<profiles><default></default></profiles><quotas><default></default></quotas>"
        f"<user_directories><users_xml><path>{config}</path></users_xml></user_directories></clickhouse>"
    )
    return path, {"interface": "chdb", "path": path, "chdb_options": {"config-file": str(config)}}


def spread(values: list[float]) -> str:
    """Median with min and max, in seconds."""
    return f"median {statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})"


def worker_env() -> dict[str, str]:
    """The environment of a worker subprocess: ``PYTHONPATH`` points at the package the benchmark imported, so the
    worker runs the same code."""
    import airflow_provider_dpone

    return {**os.environ, "PYTHONPATH": str(Path(airflow_provider_dpone.__file__).resolve().parent.parent)}
