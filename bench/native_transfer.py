"""Benchmark: the whole native transfer route, ClickHouse -> durable stage -> PostgreSQL, vs a plain stream read.

For each shape (``narrow``: 5 columns; ``wide``: 100 columns) and row count, a fresh worker process starts one
in-process ClickHouse engine (chdb), loads a ReplacingMergeTree over four inserts, and runs one warmup plus N measured
trials of:

* baseline "stream": clickhouse-connect's ``query_column_block_stream`` of exactly the route's data SELECT (same
  projection, provenance columns and frozen settings), consuming every block (a Native read alone);
* baseline "copy": the plain, unverified pipeline the route is measured against: the same SELECT (projection only) read
  as Arrow and loaded into a PostgreSQL table of the route's column types by binary COPY from Arrow (ADBC), one COPY
  per block, one commit - no stage, no digest, no journal;
* ours: ``NativeTransferRoute.run()`` (full refresh, ``exact_raw_rows``): runtime admission and the raw-snapshot
  profile, the one SELECT, typed chunks sealed into a file:// stage with their journal, EOF sealing, then source-free
  prepare, binary COPY of every chunk into PostgreSQL, target-local verification, the atomic publication with its
  receipt, evidence and cleanup.

Only P3-qualified trials are measured (``qualify``): a trial without before/after endpoint-authority agreement (observed
source drift) is excluded, and the admitted trials must agree on the EOF row count and the typed workload digest, or
the run reports no measurement. Printed per shape and size: the qualification, median/min/max seconds, rows/s and bytes/s (bytes = the typed stage bytes, the same
logical bytes for both), the ratio ours/baseline measured in the same run, each phase's share of the route
(preflight = admission and the pre-query physical profile; sealing = authority re-observation and the post-query
profile), the peak RSS growth of the process during each trial (bounded chunks keep it flat from the small to the
large row count) and the CPU seconds each measurement cost in the worker, in PostgreSQL (postmaster and backends) and
in the source engine's process. Every measurement (both baselines and the route) runs under the same RSS sampler and
CPU counters. The last line printed is one JSON object with every shape's ratios, peaks and CPU seconds, the peaks
side by side per row count (``peak_rss_growth_by_rows``), each check's own CPU seconds (``checks_cpu_s``: the source's
row hash, by a second stream read of the same SELECT with it, and its row count statement; the worker's stage
SHA-256, chunk typed sums and part coverage, by the CPU of the thread that ran them; the target's chunk digests and
the publishing transaction's seal check and, with ``--window``, its digest of the published window, by the CPU of the
PostgreSQL backend that ran them), the wall seconds of the target's loads and chunk digests and how many of the
digests' seconds ran beside a load (``overlap_s``), and the load average before and after. Each measured trial also computes every row
digest method once on each engine over what the plain pipeline moved (the source's sum of its row hashes over the
table, the target's digest over the plain pipeline's table): the **floor** is the plain pipeline plus the cheapest
such pair, the least an independently verified copy could cost; the last line's ``ratios`` gives route / plain and
route / floor per shape and size, with each check's CPU seconds. ``--row-digest`` chooses the route's method
(``pg-record-sha256.v1``, what the hook plans for PostgreSQL; ``typed-sha256.v1``, the typed SHA-256). ``--window`` measures the window replace
(``partition_replace``) instead of the full refresh: the warmup publishes the target in full, every measured trial
replaces a window that holds every row (delete, insert from staging, the window's digest). A throwaway
PostgreSQL server is started once (``tests/support/fixtures/postgres.py``) unless ``--dsn`` is given. Not part of the pytest
suite.

    .venv/bin/python bench/native_transfer.py [--rows 100000 1000000] [--shapes narrow wide] [--trials 3]
        [--source http|chdb] [--window] [--row-digest pg-record-sha256.v1|typed-sha256.v1]

The source is read as production reads it (``--source http``, the default): from a member of an embedded cluster
(``dpone_embedded``) through clickhouse-connect's HTTP client, as the hook builds it for a server;
the route and both baselines go over HTTP. ``--source chdb`` runs the engine in the worker process instead: faster to
set up, but clickhouse-connect's chdb interface materialises the whole ArrowStream result before the first batch, so
the worker's RSS then grows with rows (about 2.2 GiB at 10M narrow rows) and measures the interface, not the route.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from _common import CheckCosts, CpuCounters, PeakSampler, chdb_engine, rss_bytes, spread, worker_env

REPO = Path(__file__).resolve().parents[1]
PHASES = ("admitted", "eof", "stage_complete", "loaded", "succeeded")


def qualify(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """P3 qualification of the measured trials (seed 003): a trial is admitted only with before/after
    ``endpoint_authority_agreement`` (any observed part, merge or mask drift makes the profiles differ); the admitted
    trials must agree on the stable workload values, the EOF row count and the typed workload digest (never on
    query or receipt ids, or timing). Each trial: ``{"rows", "workload_digest", "endpoint_authority_agreement"}``.
    """
    admitted = [i for i, trial in enumerate(trials) if trial["endpoint_authority_agreement"] is True]
    excluded = {i: "observed drift (no endpoint-authority agreement)" for i in range(len(trials)) if i not in admitted}
    stable = {(trials[i]["rows"], trials[i]["workload_digest"]) for i in admitted}
    return {
        "admitted": admitted,
        "excluded": excluded,
        "repeatable": len(stable) == 1,
        "workload": [{"rows": rows, "workload_digest": digest} for rows, digest in sorted(stable)],
    }


def _admitted_only(results: dict[str, Any], qualification: dict[str, Any]) -> dict[str, Any]:
    """The per-trial measurements of the admitted trials; refuses a run without one, or whose workload varies."""
    if not qualification["admitted"] or not qualification["repeatable"]:
        raise SystemExit(f"no qualified measurement: {json.dumps(qualification)}")
    keep = qualification["admitted"]
    return {key: [values[i] for i in keep] if isinstance(values, list) else values for key, values in results.items()}


def _columns(shape: str) -> tuple[str, str]:
    """(column definitions, SELECT expressions over ``number`` and the insert batch ``b``)."""
    if shape == "narrow":
        return (
            "id UInt64, ver UInt64, payload String, amount Nullable(Decimal(18, 4)), ts DateTime64(3, 'UTC')",
            "number, b, concat('payload-', toString(number)), if(number % 7 = 0, NULL, toDecimal64(number, 4) / 3), "
            "toDateTime64('2026-01-01 00:00:00', 3, 'UTC') + number",
        )
    definitions = ["id UInt64", "ver UInt64"]
    expressions = ["number", "b"]
    for i in range(98):
        kind = i % 4
        if kind == 0:
            definitions.append(f"i{i} Int64")
            expressions.append(f"toInt64(number * {i + 3}) - 1000")
        elif kind == 1:
            definitions.append(f"s{i} String")
            expressions.append(f"toString(number % {i + 11})")
        elif kind == 2:
            definitions.append(f"d{i} Nullable(Decimal(18, 4))")
            expressions.append(f"if(number % {i + 5} = 0, NULL, toDecimal64(number % 100000, 4) / 7)")
        else:
            definitions.append(f"t{i} DateTime64(3, 'UTC')")
            expressions.append(f"toDateTime64('2026-01-01 00:00:00', 3, 'UTC') + number + {i}")
    return ", ".join(definitions), ", ".join(expressions)


def worker(
    shape: str,
    rows: int,
    trials: int,
    dsn: str,
    chunk_rows: int,
    source: str = "http",
    window: bool = False,
    row_digest: str = "pg-record-sha256.v1",
) -> dict[str, Any]:
    import clickhouse_connect
    import psycopg

    from airflow_provider_dpone.core.clock import SystemClock
    from airflow_provider_dpone.core.manifest.transfer_options import NativeTransferOptions
    from airflow_provider_dpone.transfer.route.admission import SourceRequest, admit
    from airflow_provider_dpone.transfer.route.route import NativeTransferRoute
    from airflow_provider_dpone.transfer.source.session import ClickHouseSnapshotConnector, inprocess_transport
    from airflow_provider_dpone.transfer.source.sql import render_select
    from airflow_provider_dpone.transfer.storage import ObjectJournalStore, ObjectStageStore
    from airflow_provider_dpone.transfer.targets.postgres.target import (
        PostgresTransferTarget,
        postgres_connection_factory,
        postgres_copy_factory,
    )
    from airflow_provider_dpone.transfer.values.chunk import RelationRef
    from airflow_provider_dpone.transfer.values.row_digest import RowDigest
    from airflow_provider_dpone.transfer.values.target import TargetTable
    from airflow_provider_dpone.transfer.values.utc_window import UtcWindow

    stage_root = tempfile.mkdtemp(prefix="dpone-bench-stage-")
    source_pid = None
    if source == "http":
        engine, connector, cluster = _http_source(stage_root)
        source_pid = cluster.processes()["member1"]["pid"]
    else:
        path, engine = chdb_engine()
        connector = ClickHouseSnapshotConnector(
            lambda: clickhouse_connect.get_client(**engine), inprocess_transport(path)
        )
    admin = clickhouse_connect.get_client(**engine)
    admin.command("CREATE DATABASE bench ENGINE = Atomic")
    definitions, expressions = _columns(shape)
    admin.command(f"CREATE TABLE bench.events ({definitions}) ENGINE = ReplacingMergeTree(ver) ORDER BY id")
    # every trial reads the same rows: a background merge would collapse the four versions of each id
    admin.command("SYSTEM STOP MERGES bench.events")
    for batch in range(4):
        select = expressions.replace(", b,", f", {batch},", 1)
        admin.command(f"INSERT INTO bench.events SELECT {select} FROM numbers({rows // 4})")
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()
        # read while the backend is alive: once the connection closes it exits, and its /proc entry with it
        postmaster = int(Path(f"/proc/{backend[0]}/stat").read_text().rsplit(")", 1)[1].split()[1]) if backend else None
    cpu = CpuCounters(postmaster, source_pid)
    options = NativeTransferOptions.model_validate(
        {"source_snapshot": {"mode": "exact_raw_rows"}, "execution": {"chunk_rows": chunk_rows}}
    )
    target = PostgresTransferTarget(
        postgres_connection_factory(dsn), postgres_copy_factory(dsn), TargetTable(target_schema=schema, table="events")
    )
    results: dict[str, list[Any]] = {
        "baseline_s": [],
        "copy_s": [],
        "ours_s": [],
        "ours_peak": [],
        "ours_arrow_peak": [],
        "baseline_peak": [],
        "copy_peak": [],
        "phases": [],
        "stage_bytes": [],
        "ours_cpu": [],
        "copy_cpu": [],
        "baseline_cpu": [],
        "checks_cpu": [],
        "floor_digests": [],
        "overlap": [],
    }
    trial_workloads: list[dict[str, Any]] = []
    # a window that holds every row (the timestamps start at 2026-01-01 and grow by a second per row)
    every_row = UtcWindow.of(
        "ts" if shape == "narrow" else "t3",
        dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        dt.datetime(2027, 1, 1, tzinfo=dt.UTC),
    )
    for trial in range(trials + 1):
        operation = uuid.uuid4().hex
        request = SourceRequest(
            operation_id=operation,
            route_fingerprint="0" * 64,
            relation=RelationRef(database="bench", table="events"),
            window=every_row if window and trial else None,  # the warmup creates the target in full
            options=options,
            row_digest=RowDigest(row_digest),
        )
        probe = connector.connect()
        admitted = admit(probe, request, uuid.uuid4().hex, f"bench-{uuid.uuid4().hex}")
        probe.close()
        sql, parameters = render_select(admitted.query, row_hash=False)
        settings = {**admitted.query.settings_dict(), "max_block_size": admitted.query.block_rows}
        plain = clickhouse_connect.get_client(**engine)
        start_rss, start_cpu = rss_bytes(), cpu.snapshot()
        with PeakSampler() as stream_memory:
            started = time.perf_counter()
            count = 0
            with plain.query_column_block_stream(
                sql, parameters=parameters, settings=settings, query_formats={"String": "bytes"}
            ) as stream:
                for block in stream:
                    count += len(block[0])
            baseline = time.perf_counter() - started
        stream_peak, stream_cpu = stream_memory.peak - start_rss, cpu.spent(start_cpu, cpu.snapshot(), stream_memory)
        hashed_sql, hashed_parameters = render_select(admitted.query, row_hash=True)
        before_hashed = cpu.snapshot()
        with plain.query_column_block_stream(
            hashed_sql, parameters=hashed_parameters, settings=settings, query_formats={"String": "bytes"}
        ) as stream:
            for _block in stream:
                pass
        row_hash_source_cpu = (cpu.snapshot().get("source", 0.0) - before_hashed.get("source", 0.0)) - stream_cpu.get(
            "source", 0.0
        )
        copy_s, copy_peak, copy_cpu, floor_digests = None, None, None, None
        if trial:  # the route's target table exists after the warmup: the plain pipeline copies into its twin
            start_rss = rss_bytes()
            with PeakSampler() as copy_memory:
                copy_s, copy_before, copy_after = _arrow_copy(plain, admitted, dsn, schema, cpu)
            copy_peak, copy_cpu = copy_memory.peak - start_rss, cpu.spent(copy_before, copy_after, copy_memory)
            floor_digests = _independent_digests(plain, admitted, dsn, schema, cpu, target)
        plain.close()
        assert count == rows, (count, rows)
        marks: dict[str, float] = {}

        def checkpoint(point: str, marks: dict[str, float] = marks) -> None:
            if point in PHASES:
                marks[point] = time.perf_counter()

        stage_bytes = {"total": 0}
        stage = ObjectStageStore(f"file://{stage_root}", operation)
        original_put = stage.put

        def counting_put(
            key: str, data: bytes, original_put: Any = original_put, stage_bytes: dict[str, int] = stage_bytes
        ) -> None:
            if key.endswith(".chunk"):
                stage_bytes["total"] += len(data)
            original_put(key, data)

        stage.put = counting_put  # type: ignore[method-assign]
        costs = CheckCosts(source_pid)
        restore = _meter_checks(costs, target)
        spans = _Spans(target)
        route = NativeTransferRoute(
            request,
            connector=_MeteredConnector(connector, costs),
            journal_store=ObjectJournalStore(f"file://{stage_root}", operation),
            stage=stage,
            target_factory=lambda: target,
            clock=SystemClock(),
            lease_duration=dt.timedelta(hours=1),
            checkpoint=checkpoint,
        )
        start_rss, start_cpu = rss_bytes(), cpu.snapshot()
        with PeakSampler() as memory:
            started = time.perf_counter()
            result = route.run()
            ours = time.perf_counter() - started
        ours_cpu = cpu.spent(start_cpu, cpu.snapshot(), memory)
        restore()
        overlap = spans.restore()
        checks = {**costs.rounded(), "source_row_hash": round(row_hash_source_cpu, 3)}
        assert result.rows == rows
        with psycopg.connect(dsn, autocommit=True) as conn:
            # the published table's first vacuum, which any load of this size brings; run here, outside every timed
            # window, autovacuum would start it during the next trial's measurements
            conn.execute(f'VACUUM (ANALYZE) "{schema}".events')
        if trial == 0:
            continue
        points = [started, *(marks[name] for name in PHASES)]
        results["baseline_s"].append(baseline)
        results["baseline_peak"].append(stream_peak)
        results["baseline_cpu"].append(stream_cpu)
        results["copy_cpu"].append(copy_cpu)
        results["ours_cpu"].append(ours_cpu)
        results["checks_cpu"].append(checks)
        results["overlap"].append(overlap)
        results["copy_s"].append(copy_s)
        results["floor_digests"].append(floor_digests)
        results["copy_peak"].append(copy_peak)
        results["ours_s"].append(ours)
        results["ours_peak"].append(memory.peak - start_rss)
        results["ours_arrow_peak"].append(memory.arrow_peak)
        results["stage_bytes"].append(stage_bytes["total"])
        results["phases"].append([b - a for a, b in itertools.pairwise(points)])
        trial_workloads.append(
            {
                "rows": result.rows,
                "workload_digest": result.workload_digest,
                "endpoint_authority_agreement": result.endpoint_authority_agreement,
            }
        )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    if source == "http":
        cluster.stop()
    shutil.rmtree(stage_root, ignore_errors=True)  # the stage and, over HTTP, the cluster's data (GiB for wide)
    qualification = qualify(trial_workloads)
    measured = _admitted_only(results, qualification)
    return {
        "shape": shape,
        "rows": rows,
        "trials": trials,
        "source": source,
        "row_digest": row_digest,
        "qualification": qualification,
        **measured,
    }


class _Spans:
    """When the target loaded and verified each chunk (wall clock), to show how far the two overlap: the seconds some
    chunk's digest ran while another chunk loaded, in separate backends. Wraps the target's two calls, never changes
    them; ``restore`` unwraps them and returns the figures."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self._lock = threading.Lock()
        self._spans: dict[str, list[tuple[float, float]]] = {"load": [], "verify": []}
        for name in self._spans:
            setattr(target, f"{name}_chunk", self._timed(name, getattr(target, f"{name}_chunk")))

    def _timed(self, name: str, function: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                with self._lock:
                    self._spans[name].append((started, time.perf_counter()))

        return timed

    def restore(self) -> dict[str, float]:
        for name in self._spans:
            delattr(self._target, f"{name}_chunk")
        loads, verifies = self._spans["load"], self._spans["verify"]
        both = sum(max(0.0, min(b, d) - max(a, c)) for a, b in verifies for c, d in loads)  # one loader: no overlaps
        return {
            "load_s": round(sum(b - a for a, b in loads), 3),
            "verify_s": round(sum(b - a for a, b in verifies), 3),
            "verify_during_load_s": round(both, 3),
        }


class _MeteredConnector:
    """The route's source connector, with each session's ``selected_rows`` (the server's own row count) metered."""

    def __init__(self, connector: Any, costs: CheckCosts) -> None:
        self._connector = connector
        self._costs = costs

    def connect(self) -> Any:
        session = self._connector.connect()
        session.selected_rows = self._costs.source("source_selected_rows", session.selected_rows)
        return session


def _meter_checks(costs: CheckCosts, target: Any) -> Any:
    """Wrap every check of the route in ``costs``; returns the function that unwraps them."""
    from airflow_provider_dpone.transfer.route import extraction, physical, recovery

    patched = [
        (extraction, "_sha", "worker_stage_sha256", costs.worker),
        (recovery, "sha256_hex", "worker_stage_sha256", costs.worker),
        (extraction._ChunkBuffer, "total", "worker_chunk_typed_sum", costs.worker),
        (physical.CoverageTracker, "observe", "worker_part_coverage", costs.worker),
        (physical.CoverageTracker, "require_selected", "worker_part_coverage", costs.worker),
        (physical.CoverageTracker, "entries", "worker_part_coverage", costs.worker),
        (target, "_staged_digest_and_writer", "target_chunk_digest", costs.backend),
        (target, "_staged_chunks", "target_publication_check", costs.backend),
        (target, "_staging_identity", "target_publication_check", costs.backend),
        *(
            [(target, "_window_digest", "target_window_digest", costs.backend)]
            if hasattr(target, "_window_digest")
            else []
        ),
    ]
    originals = [(owner, attribute, owner.__dict__.get(attribute)) for owner, attribute, _, _ in patched]
    for owner, attribute, name, meter in patched:
        setattr(owner, attribute, meter(name, getattr(owner, attribute)))

    def restore() -> None:
        for owner, attribute, original in originals:
            if original is None:
                delattr(owner, attribute)  # an instance attribute over the class's method
            else:
                setattr(owner, attribute, original)

    return restore


def _arrow_copy(
    client: Any, admitted: Any, dsn: str, schema: str, cpu: CpuCounters
) -> tuple[float, dict[str, float], dict[str, float]]:
    """The plain pipeline: Arrow blocks of the projection, cast to the target's wire types, binary COPY, one commit.

    Returns its seconds and the CPU counters before and after it."""
    import adbc_driver_postgresql.dbapi as adbc
    import pyarrow as pa

    from airflow_provider_dpone.transfer.targets.postgres.arrow_load import wire_type
    from airflow_provider_dpone.transfer.values.arrow_chunk import conform
    from airflow_provider_dpone.transfer.values.target_types import parse_column_type

    columns = admitted.plan.columns
    query = admitted.query
    sql = f"SELECT {', '.join(c.name for c in columns)} FROM bench.events"  # full refresh: the same rows
    settings = {**query.settings_dict(), "max_block_size": query.block_rows}
    types = [wire_type(parse_column_type(c.source_type)) for c in columns]
    with adbc.connect(dsn) as conn, conn.cursor() as cursor:
        cursor.execute(f'CREATE TABLE "{schema}".baseline (LIKE "{schema}".events)')
        conn.commit()
        started, start_cpu = time.perf_counter(), cpu.snapshot()
        with client.query_arrow_stream(sql, settings=settings, use_strings=False) as stream:
            for batch in stream:
                table = conform(pa.Table.from_batches([batch]), columns)
                table = pa.Table.from_arrays(
                    [a.cast(t) for a, t in zip(table.columns, types, strict=True)], names=table.column_names
                )
                cursor.adbc_ingest("baseline", table, mode="append", db_schema_name=schema)
        conn.commit()
        elapsed, end_cpu = time.perf_counter() - started, cpu.snapshot()
    return elapsed, start_cpu, end_cpu


def _independent_digests(
    client: Any, admitted: Any, dsn: str, schema: str, cpu: CpuCounters, target: Any
) -> dict[str, dict[str, float]]:
    """Each row digest method computed once on each engine over what the plain pipeline moved: the source's sum of
    its row hashes over the table, the target's digest over the plain pipeline's table (``baseline``, dropped
    after). Seconds and the engine's CPU seconds per method; the floor adds the cheapest pair to the plain copy."""
    import psycopg

    from airflow_provider_dpone.core.clickhouse.row_hash import row_hash_expression
    from airflow_provider_dpone.transfer.source.pg_record import pg_record_hash
    from airflow_provider_dpone.transfer.targets.postgres.digest import table_digest
    from airflow_provider_dpone.transfer.values.row_digest import RowDigest

    columns = admitted.plan.columns
    source_hash = {
        RowDigest.TYPED_SHA256: row_hash_expression([(c.name, c.source_type) for c in columns]),
        RowDigest.PG_RECORD_SHA256: pg_record_hash(columns),
    }
    settings = admitted.query.settings_dict()
    found: dict[str, dict[str, float]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for method, expression in source_hash.items():
            before, started = cpu.snapshot(), time.perf_counter()
            client.query(
                f"SELECT count(), toString(sum(reinterpretAsUInt256(reverse({expression})))) FROM bench.events",
                settings=settings,
            )
            source_s, middle = time.perf_counter() - started, cpu.snapshot()
            plan = target.table.plan("bench-floor", columns, None, method)
            started = time.perf_counter()
            conn.execute(table_digest(plan, schema, "baseline")).fetchone()
            target_s, after = time.perf_counter() - started, cpu.snapshot()
            found[method.value] = {
                "source_s": round(source_s, 3),
                "target_s": round(target_s, 3),
                "source_cpu_s": round(middle.get("source", 0.0) - before.get("source", 0.0), 3),
                "target_cpu_s": round(after.get("postgres", 0.0) - middle.get("postgres", 0.0), 3),
            }
        conn.execute(f'DROP TABLE "{schema}".baseline')
    return found


def _http_source(root: str) -> tuple[dict[str, Any], Any, Any]:
    """A member of an embedded cluster over HTTP: plain client kwargs (admin, baseline) and the hook's connector."""
    from dpone_embedded import EmbeddedCluster

    from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
    from airflow_provider_dpone.transfer.source.session import http_connector

    cluster = EmbeddedCluster.start(Path(root) / "cluster", members=2)
    member = cluster.endpoint("member1")
    options = ClickHouseConnectionOptions()
    engine = {
        "host": member.host,
        "port": member.port,
        "username": cluster.user,
        "password": cluster.password,
        "query_retries": 0,
        "autogenerate_session_id": False,
        "connect_timeout": options.connect_timeout_seconds,
        "send_receive_timeout": options.send_receive_timeout_seconds,
    }
    return engine, http_connector(member.host, member.port, cluster.user, cluster.password, options), cluster


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    rows = result["rows"]
    baseline, ours = statistics.median(result["baseline_s"]), statistics.median(result["ours_s"])
    copy = statistics.median(result["copy_s"])
    data = statistics.median(result["stage_bytes"])
    source = "HTTP, embedded cluster member" if result.get("source") == "http" else "in-process engine"
    print(f"\n== {result['shape']}, {rows:,} rows, source {source}, {result['trials']} measured trials (+1 warmup) ==")
    qualification = result["qualification"]
    print(
        f"P3 qualification     : {len(qualification['admitted'])} admitted, {len(qualification['excluded'])} excluded, "
        f"workload {qualification['workload'][0]['workload_digest'][:16]} over {qualification['workload'][0]['rows']:,} rows"
    )
    print(
        f"baseline stream read : {spread(result['baseline_s'])}  {rows / baseline:,.0f} rows/s  {data / baseline / 2**20:,.1f} MiB/s"
    )
    print(
        f"route into PostgreSQL: {spread(result['ours_s'])}  {rows / ours:,.0f} rows/s  {data / ours / 2**20:,.1f} MiB/s"
    )
    print(
        f"plain Arrow->COPY    : {spread(result['copy_s'])}  {rows / copy:,.0f} rows/s  {data / copy / 2**20:,.1f} MiB/s"
    )
    print(f"ratio route / stream : {ours / baseline:.2f}x   (typed stage bytes {data / 2**20:.1f} MiB)")
    print(f"ratio route / copy   : {ours / copy:.2f}x")
    shares = [statistics.median(phase[i] for phase in result["phases"]) for i in range(len(PHASES))]
    total = sum(shares)
    names = ("preflight", "stream+stage", "sealing", "load+verify", "publish+evidence")
    print("phase shares         : " + ", ".join(f"{n} {s / total:.1%}" for n, s in zip(names, shares, strict=True)))
    print(f"raw-profile overhead : {(shares[0] + shares[2]) / total:.1%} of the route (preflight + EOF sealing)")
    peaks = {name: max(result[f"{name}_peak"]) / 2**20 for name in ("ours", "copy", "baseline")}
    print(
        f"peak RSS growth      : route {peaks['ours']:.1f} MiB, plain copy {peaks['copy']:.1f} MiB, "
        f"stream {peaks['baseline']:.1f} MiB"
    )
    cpu = {name: _median_cpu(result[f"{name}_cpu"]) for name in ("ours", "copy", "baseline")}
    checks = _median_cpu(result["checks_cpu"])
    digests = {
        method: _median_cpu([sample[method] for sample in result["floor_digests"]])
        for method in result["floor_digests"][0]
    }
    cheapest = min(digests, key=lambda method: digests[method]["source_s"] + digests[method]["target_s"])
    floor = copy + digests[cheapest]["source_s"] + digests[cheapest]["target_s"]
    print(
        f"floor                : {floor:.2f} s = plain copy + the cheapest independent digest on both engines "
        f"({cheapest}: source {digests[cheapest]['source_s']:.2f} s, target {digests[cheapest]['target_s']:.2f} s)"
    )
    print(f"ratio route / floor  : {ours / floor:.2f}x   (route's row digest: {result.get('row_digest')})")
    for method, figures in digests.items():
        print(f"digest {method:20}: " + ", ".join(f"{name} {value:.2f}" for name, value in figures.items()))
    print("CPU s per check      : " + ", ".join(f"{name} {value:.2f}" for name, value in checks.items()))
    overlap = _median_cpu(result["overlap"])
    print(
        f"load / verify overlap: loads {overlap['load_s']:.2f} s, chunk digests {overlap['verify_s']:.2f} s, "
        f"of which {overlap['verify_during_load_s']:.2f} s beside a load"
    )
    for label, name in (("route", "ours"), ("plain copy", "copy"), ("stream", "baseline")):
        print(f"CPU s ({label:10}): " + ", ".join(f"{part} {value:.2f}" for part, value in cpu[name].items()))
    arrow = max(result["ours_arrow_peak"]) / 2**20
    print(
        f"route Arrow buffers  : peak {arrow:.1f} MiB (the worker's own chunk buffers, without the in-process engine)"
    )
    return {
        "shape": result["shape"],
        "route_arrow_peak_mib": round(arrow, 1),
        "rows": rows,
        "trials": result["trials"],
        "qualification": result["qualification"],
        "route_s": round(ours, 3),
        "arrow_copy_s": round(copy, 3),
        "stream_s": round(baseline, 3),
        "ratio_route_vs_arrow_copy": round(ours / copy, 3),
        "ratio_route_vs_stream": round(ours / baseline, 3),
        "row_digest": result.get("row_digest"),
        "floor_s": round(floor, 3),
        "floor_digest": cheapest,
        "ratio_route_vs_floor": round(ours / floor, 3),
        "independent_digests": digests,
        "peak_rss_growth_mib": {name: round(value, 1) for name, value in peaks.items()},
        "cpu_s": {"route": cpu["ours"], "arrow_copy": cpu["copy"], "stream": cpu["baseline"]},
        "checks_cpu_s": checks,
        "overlap_s": overlap,
    }


def _median_cpu(samples: list[dict[str, float]]) -> dict[str, float]:
    """The median CPU seconds of each process group (or check) over the measured trials."""
    names = sorted({part for sample in samples for part in sample})
    return {part: round(statistics.median(sample.get(part, 0.0) for sample in samples), 3) for part in names}


def rss_by_rows(summary: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per shape, each measurement's peak RSS growth at every row count: flat in rows means these stay level."""
    labels = {"ours": "route_mib", "copy": "arrow_copy_mib", "baseline": "stream_mib"}
    shapes: dict[str, dict[str, Any]] = {}
    for entry in summary:
        shape = shapes.setdefault(entry["shape"], {"shape": entry["shape"], "rows": []})
        shape["rows"].append(entry["rows"])
        for name, value in entry["peak_rss_growth_mib"].items():
            shape.setdefault(labels[name], []).append(value)
    return list(shapes.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--shapes", nargs="+", default=["narrow", "wide"], choices=["narrow", "wide"])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--chunk-rows", type=int, default=100_000)
    parser.add_argument("--dsn", default=None)
    parser.add_argument(
        "--source",
        default="http",
        choices=["chdb", "http"],
        help="http (as production reads): a member of an embedded cluster through clickhouse-connect's HTTP client; "
        "chdb: the engine in this process (its ArrowStream result is materialised whole, so RSS grows with rows)",
    )
    parser.add_argument("--window", action="store_true", help="measure the window replace instead of the full refresh")
    parser.add_argument(
        "--row-digest",
        default="pg-record-sha256.v1",
        choices=["pg-record-sha256.v1", "typed-sha256.v1"],
        help="the route's row digest method (the hook plans pg-record-sha256.v1 for PostgreSQL)",
    )
    parser.add_argument("--worker", nargs=2, metavar=("SHAPE", "DSN"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        shape, dsn = args.worker
        print(
            json.dumps(
                worker(
                    shape, args.rows[0], args.trials, dsn, args.chunk_rows, args.source, args.window, args.row_digest
                )
            )
        )
        return
    sys.path.insert(0, str(REPO))
    env = worker_env()
    load_before = os.getloadavg()

    summary: list[dict[str, Any]] = []

    def run_all(dsn: str) -> None:
        for shape in args.shapes:
            results = []
            for rows in args.rows:
                command = [sys.executable, __file__, "--worker", shape, dsn, "--rows", str(rows)]
                command += ["--trials", str(args.trials), "--chunk-rows", str(args.chunk_rows), "--source", args.source]
                command += ["--window"] if args.window else []
                command += ["--row-digest", args.row_digest]
                output = subprocess.run(command, env=env, capture_output=True, text=True)
                if output.returncode:
                    raise SystemExit(f"worker {shape}/{rows} failed:\n{output.stderr[-4000:]}")
                results.append(json.loads(output.stdout.strip().splitlines()[-1]))
                summary.append(summarize(results[-1]))
            if len(results) >= 2:
                small, large = results[0], results[-1]
                print(
                    f"\n{shape}: peak RSS growth {max(small['ours_peak']) / 2**20:.1f} MiB at {small['rows']:,} rows vs "
                    f"{max(large['ours_peak']) / 2**20:.1f} MiB at {large['rows']:,} rows "
                    f"(rows x{large['rows'] / small['rows']:.0f})"
                )

    if args.dsn:
        run_all(args.dsn)
    else:
        from tests.support.fixtures.postgres import throwaway_cluster

        with throwaway_cluster() as server:
            run_all(server.dsn)
    report = {
        "bench": "native_transfer",
        "source": args.source,
        "mode": "window_replace" if args.window else "full_refresh",
        "load_average": {"before": round(load_before[0], 2), "after": round(os.getloadavg()[0], 2)},
        "row_digest": args.row_digest,
        "ratios": [
            {
                "shape": entry["shape"],
                "rows": entry["rows"],
                "route_vs_plain": entry["ratio_route_vs_arrow_copy"],
                "route_vs_floor": entry["ratio_route_vs_floor"],
                "floor_s": entry["floor_s"],
                "checks_cpu_s": entry["checks_cpu_s"],
                "overlap_s": entry["overlap_s"],
            }
            for entry in summary
        ],
        "results": summary,
        "peak_rss_growth_by_rows": rss_by_rows(summary),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
