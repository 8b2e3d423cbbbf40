"""Measurement helpers shared by the native transfer benchmarks (``bench/native_transfer*.py``).

Imported as ``_common``: each benchmark runs as a script (also in its worker subprocess), so its own folder is first
on ``sys.path``.
"""

from __future__ import annotations

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


def thread_cpu_seconds(pid: int) -> float:
    """CPU of the main thread of process ``pid`` from ``/proc/<pid>/schedstat`` (nanoseconds, not clock ticks): exact
    enough to charge one statement to a single-threaded server backend; 0 when the process is gone."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except OSError:
        return 0.0


class CheckCosts:
    """Each check's own CPU seconds, wherever it runs: a worker check by the CPU of the thread that ran it, a target
    check by the CPU of the PostgreSQL backend that ran its statement, a source check by the source engine's CPU
    across the call (nothing else reads the source while the route makes it). Checks are wrapped, never changed."""

    def __init__(self, source_pid: int | None) -> None:
        self._source = source_pid
        self._lock = threading.Lock()
        self.spent: dict[str, float] = {}

    def _add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.spent[name] = self.spent.get(name, 0.0) + seconds

    def worker(self, name: str, function: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                self._add(name, time.thread_time() - started)

        return timed

    def backend(self, name: str, function: Any) -> Any:
        """``function(session, ...)`` runs its statements on ``session``'s PostgreSQL backend."""

        def timed(session: Any, *args: Any, **kwargs: Any) -> Any:
            pid = session.conn.info.backend_pid
            started = thread_cpu_seconds(pid)
            try:
                return function(session, *args, **kwargs)
            finally:
                self._add(name, thread_cpu_seconds(pid) - started)

        return timed

    def source(self, name: str, function: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = process_cpu_seconds(self._source) if self._source else 0.0
            try:
                return function(*args, **kwargs)
            finally:
                if self._source:
                    self._add(name, process_cpu_seconds(self._source) - started)

        return timed

    def rounded(self) -> dict[str, float]:
        return {name: round(value, 3) for name, value in sorted(self.spent.items())}


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
