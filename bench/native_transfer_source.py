"""Benchmark: raw-snapshot source stream + durable stage vs a plain clickhouse-connect stream of the same SELECT.

For each size (default 100k and 1M rows of a ReplacingMergeTree with UInt64, UInt64, String, Nullable(Decimal(18,4)),
DateTime64(3,'UTC') over four inserts), a fresh worker process starts one in-process engine (chdb), loads the rows,
and runs one warmup plus N measured trials of:

* baseline: ``query_column_block_stream`` of exactly the rendered data SELECT (same projection, provenance columns and
  frozen settings), consuming every block;
* ours: admission (profile, physical profiles) + the single producer: typed chunk encoding and digest, provenance
  coverage, create-once stage objects and journal records on file://, EOF sealing.

It prints median and min/max per phase, the ratio ours/baseline measured in the same run, the peak RSS growth over
the RSS at the start of each phase (bounded chunks: it should not grow with the row count), and whether the admitted
trials agree on the stable workload digest (repeatability). Not part of the pytest suite.

    .venv/bin/python bench/native_transfer_source.py [--rows 100000 1000000] [--trials 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _common import PeakSampler, chdb_engine, rss_bytes, spread, worker_env


def worker(rows: int, trials: int) -> dict[str, Any]:
    import clickhouse_connect

    from airflow_provider_dpone.core.clock import SystemClock
    from airflow_provider_dpone.core.manifest.transfer_options import NativeTransferOptions
    from airflow_provider_dpone.transfer.route.admission import SourceRequest, admit
    from airflow_provider_dpone.transfer.route.custody import LeaseKeeper
    from airflow_provider_dpone.transfer.route.extraction import Producer
    from airflow_provider_dpone.transfer.route.journal import RouteJournal
    from airflow_provider_dpone.transfer.source.session import ClickHouseSnapshotConnector, inprocess_transport
    from airflow_provider_dpone.transfer.source.sql import render_select
    from airflow_provider_dpone.transfer.storage import ObjectJournalStore, ObjectStageStore
    from airflow_provider_dpone.transfer.values.chunk import RelationRef

    path, engine = chdb_engine()
    stage_root = tempfile.mkdtemp(prefix="dpone-bench-stage-")
    admin = clickhouse_connect.get_client(**engine)
    admin.command("CREATE DATABASE bench ENGINE = Atomic")
    admin.command(
        "CREATE TABLE bench.events (id UInt64, ver UInt64, payload String, amount Nullable(Decimal(18, 4)), "
        "ts DateTime64(3, 'UTC')) ENGINE = ReplacingMergeTree(ver) ORDER BY id"
    )
    per_insert = rows // 4
    for batch in range(4):
        admin.command(
            f"INSERT INTO bench.events SELECT number, {batch}, concat('payload-', toString(number)), "
            f"if(number % 7 = 0, NULL, toDecimal64(number, 4) / 3), "
            f"toDateTime64('2026-01-01 00:00:00', 3, 'UTC') + number FROM numbers({per_insert})"
        )
    connector = ClickHouseSnapshotConnector(lambda: clickhouse_connect.get_client(**engine), inprocess_transport(path))
    options = NativeTransferOptions.model_validate({"source_snapshot": {"mode": "exact_raw_rows"}})
    loaded_rss = rss_bytes()
    results: dict[str, list[float]] = {"baseline_s": [], "ours_s": [], "baseline_peak": [], "ours_peak": []}
    workloads: list[tuple[int, str, bool]] = []
    for trial in range(trials + 1):
        operation = uuid.uuid4().hex
        request = SourceRequest(
            operation_id=operation,
            route_fingerprint="0" * 64,
            relation=RelationRef(database="bench", table="events"),
            window=None,
            options=options,
        )
        session = connector.connect()
        invocation = uuid.uuid4().hex
        admitted = admit(session, request, invocation, f"bench-{invocation}")
        sql, parameters = render_select(admitted.query, row_hash=False)
        plain = clickhouse_connect.get_client(**engine)
        settings = {**admitted.query.settings_dict(), "max_block_size": admitted.query.block_rows}
        baseline_start_rss = rss_bytes()
        with PeakSampler() as baseline_memory:
            started = time.perf_counter()
            count = 0
            with plain.query_column_block_stream(sql, parameters=parameters, settings=settings) as stream:
                for block in stream:
                    count += len(block[0])
            baseline = time.perf_counter() - started
        plain.close()
        assert count == rows, (count, rows)
        journal = RouteJournal(ObjectJournalStore(f"file://{stage_root}", operation))
        lease = LeaseKeeper(journal, SystemClock(), uuid.uuid4().hex, dt.timedelta(minutes=30))
        lease.acquire()
        producer = Producer(journal, ObjectStageStore(f"file://{stage_root}", operation), lease, lambda _: None)
        ours_start_rss = rss_bytes()
        with PeakSampler() as ours_memory:
            started = time.perf_counter()
            complete = producer.extract(session, admitted)
            ours = time.perf_counter() - started
        session.close()
        assert complete.rows == rows
        if trial == 0:
            continue
        results["baseline_s"].append(baseline)
        results["ours_s"].append(ours)
        results["baseline_peak"].append(baseline_memory.peak - baseline_start_rss)
        results["ours_peak"].append(ours_memory.peak - ours_start_rss)
        workloads.append((complete.rows, complete.workload_digest, bool(producer.endpoint_authority_agreement)))
    admitted_trials = [w for w in workloads if w[2]]
    return {
        "rows": rows,
        "trials": trials,
        "engine_rss_mib": loaded_rss / 2**20,
        **results,
        "admitted_trials": len(admitted_trials),
        "repeatable": len({(r, d) for r, d, _ in admitted_trials}) == 1,
        "stage_bytes": sum(f.stat().st_size for f in Path(stage_root).rglob("*.chunk")) // (trials + 1),
    }


def summarize(result: dict[str, Any]) -> None:
    rows = result["rows"]
    baseline, ours = statistics.median(result["baseline_s"]), statistics.median(result["ours_s"])
    print(f"\n== {rows:,} rows, {result['trials']} measured trials (+1 warmup) ==")
    print(f"baseline plain stream   : {spread(result['baseline_s'])}  {rows / baseline:,.0f} rows/s")
    print(f"ours stream + stage     : {spread(result['ours_s'])}  {rows / ours:,.0f} rows/s")
    print(f"ratio ours / baseline   : {ours / baseline:.2f}x")
    print(
        f"peak RSS growth in phase: baseline {max(result['baseline_peak']) / 2**20:.1f} MiB, "
        f"ours {max(result['ours_peak']) / 2**20:.1f} MiB (process with engine and data: {result['engine_rss_mib']:.0f} MiB)"
    )
    print(f"stage bytes per trial   : {result['stage_bytes'] / 2**20:.1f} MiB")
    print(f"repeatable workload     : {result['repeatable']} over {result['admitted_trials']} admitted trials")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.rows[0], args.trials)))
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    env = worker_env()
    results = []
    for rows in args.rows:
        output = subprocess.run(
            [sys.executable, __file__, "--worker", "--rows", str(rows), "--trials", str(args.trials)],
            env=env,
            capture_output=True,
            text=True,
        )
        if output.returncode:
            raise SystemExit(f"worker for {rows} rows failed:\n{output.stderr[-4000:]}")
        results.append(json.loads(output.stdout.strip().splitlines()[-1]))
        summarize(results[-1])
    if len(results) >= 2:
        small, large = results[0], results[-1]
        growth = max(large["ours_peak"]) / max(1, max(small["ours_peak"]))
        print(
            f"\nours peak RSS growth {small['rows']:,} -> {large['rows']:,} rows: {growth:.2f}x "
            f"(rows x{large['rows'] / small['rows']:.0f})"
        )


if __name__ == "__main__":
    main()
