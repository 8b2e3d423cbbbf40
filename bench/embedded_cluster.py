"""Benchmark of the embedded cluster: start time, Native load through HTTP vs INFILE in the same engine, RSS.

Run: ``.venv/bin/python bench/embedded_cluster.py [--rows 1000000] [--repeat 5]``. The load ratio compares
clickhouse-connect's ``raw_insert`` of Native bytes through the member's HTTP endpoint with
``INSERT ... FROM INFILE ... FORMAT Native`` of the same bytes executed inside the same engine: each round runs
the three loads back to back (table truncated in between); the figures are the best runs and the median of the
per-round ratios, which cancels out the load of a shared machine. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's package, not an installed one

from dpone_embedded import EmbeddedCluster

COLUMNS = ["id", "name", "amount", "ts"]
DDL = "(id UInt64, name String, amount Nullable(Decimal(18,4)), ts DateTime64(3,'UTC')) ENGINE = MergeTree ORDER BY id"
SOURCE = (
    "SELECT number AS id, toString(cityHash64(number)) AS name,"
    " if(number % 10 = 0, NULL, toDecimal64(number / 7, 4)) AS amount,"
    " toDateTime64('2024-01-01 00:00:00', 3, 'UTC') + toIntervalMillisecond(number) AS ts FROM numbers({rows})"
)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _drain(stream) -> int:
    total = 0
    while chunk := stream.read(1 << 20):
        total += len(chunk)
    return total


def _best(samples: list[float]) -> float:
    return min(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dpone-bench-") as scratch:
        started = time.perf_counter()
        cluster = EmbeddedCluster.start(Path(scratch) / "cluster")
        start_seconds = time.perf_counter() - started
        try:
            figures = _measure(cluster, Path(scratch), args.rows, args.repeat)
        finally:
            cluster.stop()
    figures["cluster_start_seconds"] = round(start_seconds, 3)
    print(json.dumps(figures, indent=2))


def _measure(cluster: EmbeddedCluster, scratch: Path, rows: int, repeat: int) -> dict[str, object]:
    coordinator = cluster.client("coordinator")
    native = coordinator.raw_query(SOURCE.format(rows=rows), fmt="Native")
    path = scratch / "load.native"
    path.write_bytes(native)
    member = cluster.client("member1", compress=False)
    member.command("CREATE DATABASE bench ENGINE = Atomic")
    member.command(f"CREATE TABLE bench.t {DDL}")
    infile, http, http_stream = [], [], []
    for _ in range(repeat):
        member.command("TRUNCATE TABLE bench.t")
        t0 = time.perf_counter()
        member.command(f"INSERT INTO bench.t FROM INFILE '{path}' FORMAT Native")
        infile.append(time.perf_counter() - t0)
        member.command("TRUNCATE TABLE bench.t")
        t0 = time.perf_counter()
        summary = member.raw_insert("bench.t", COLUMNS, native, fmt="Native")
        http.append(time.perf_counter() - t0)
        assert summary.written_rows == rows, summary.summary
        member.command("TRUNCATE TABLE bench.t")
        chunks = (native[i : i + (1 << 20)] for i in range(0, len(native), 1 << 20))
        t0 = time.perf_counter()
        member.raw_insert("bench.t", COLUMNS, chunks, fmt="Native")
        http_stream.append(time.perf_counter() - t0)
    count = int(member.command("SELECT count() FROM bench.t"))
    assert count == rows, count
    stream_read, outfile = [], []
    for number in range(repeat):
        t0 = time.perf_counter()
        stream = member.raw_stream("SELECT * FROM bench.t", fmt="Native")
        received = _drain(stream)
        stream_read.append(time.perf_counter() - t0)
        target = scratch / f"out-{number}.native"
        t0 = time.perf_counter()
        member.command(f"SELECT * FROM bench.t INTO OUTFILE '{target}' FORMAT Native")
        outfile.append(time.perf_counter() - t0)
        target.unlink()
    assert received > 0
    processes = cluster.processes()
    return {
        "rows": rows,
        "native_bytes": len(native),
        "infile_seconds_best": round(_best(infile), 4),
        "http_raw_insert_seconds_best": round(_best(http), 4),
        "http_streamed_raw_insert_seconds_best": round(_best(http_stream), 4),
        "ratio_http_vs_infile": round(_best(http) / _best(infile), 3),
        "ratio_http_streamed_vs_infile": round(_best(http_stream) / _best(infile), 3),
        "ratio_http_vs_infile_median_of_rounds": round(
            statistics.median(h / i for h, i in zip(http, infile, strict=True)), 3
        ),
        "ratio_http_streamed_vs_infile_median_of_rounds": round(
            statistics.median(h / i for h, i in zip(http_stream, infile, strict=True)), 3
        ),
        "infile_seconds_median": round(statistics.median(infile), 4),
        "http_raw_insert_seconds_median": round(statistics.median(http), 4),
        "http_raw_stream_read_seconds_best": round(_best(stream_read), 4),
        "into_outfile_seconds_best": round(_best(outfile), 4),
        "ratio_stream_read_vs_outfile_median_of_rounds": round(
            statistics.median(r / o for r, o in zip(stream_read, outfile, strict=True)), 3
        ),
        "rss_mb": {name: round(_rss_mb(info["pid"]), 1) for name, info in processes.items()},
    }


if __name__ == "__main__":
    main()
