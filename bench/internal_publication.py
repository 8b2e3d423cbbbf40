"""Benchmark: the internal (replicated) publication route on the real adapters vs a plain replicated insert.

On an embedded cluster started with ``internal_replication=True`` (real ClickHouse engines behind HTTP, one process per
member; ``Replicated*MergeTree`` replicated between the member engines), with an artifact of N rows (UInt64, String,
Nullable(Decimal(18,4)), DateTime64(3,'UTC')) extracted once as Native bytes into the artifact store:

* baseline: the same artifact bytes sent once with a plain clickhouse-connect ``raw_insert`` through one replica into
  an existing empty ``ReplicatedMergeTree`` table, then ``SYSTEM SYNC REPLICA`` on every other replica: what a loader
  that does not fence, verify or publish would do, and wait for;
* ours: ``fence`` + ``stage`` + ``publish`` + ``cleanup`` of the publication service in internal mode replacing an
  existing replicated target: one replicated candidate created ON CLUSTER, loaded once through one replica, converged
  and verified on every replica (content digest), then EXCHANGE ON CLUSTER and DROP ON CLUSTER of the predecessor;
  the sealed receipt is bound as the stage input. Sealing (extraction and reference digest) happens once per
  operation and is reported separately, as in ``bench/external_publication.py``.

For 2 and 3 replicas it prints the medians over the trials, the ratio ours/baseline measured in the same run (aim:
at most 1.3), where our time goes (per entry point and per port call), both sides again at 10,000 rows (the cost that
does not grow with rows: round trips and DDL) and the ratio of what remains (the per-row part), and the round trips of
one publication: authority reads and writes, DDL dispatches and queue polls, member statements (by kind) and HTTP
requests; none may depend on the row count. Not part of the pytest suite.

    .venv/bin/python bench/internal_publication.py [--rows 1000000 [10000000]] [--trials 3] [--replicas 2 3]

``--trace`` instead prints the timeline of one publication at 10,000 rows (after two warm-up publications): every
HTTP request the adapters send, with its start (ms from the start of ``fence``), its duration and the statement's
first words, under the entry point it belongs to; requests sent concurrently overlap in time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import external_publication as shared  # the publication benchmarks' shared helpers (this folder is on sys.path)

ROOT = shared.ROOT
CLUSTER = "dpone_cluster_replicated"
TARGET_KEYS = "ENGINE = ReplicatedMergeTree ORDER BY id"
FIXED_COST_ROWS = 10_000
"""A row count small enough that both sides show their cost that does not grow with rows (round trips, DDL)."""


def start_cluster(directory: Path, members: int) -> Any:
    from dpone_embedded import EmbeddedCluster

    return EmbeddedCluster.start(directory, members=members, internal_replication=True)


def request(database: str, target: str, run_id: str, max_bytes: int) -> Any:
    from airflow_provider_dpone.cluster.ports import DeclaredTable
    from airflow_provider_dpone.cluster.protocol.request import PublicationRequest

    return PublicationRequest.parse(
        {
            "cluster": CLUSTER,
            "database": database,
            "target": target,
            "dag_id": "bench",
            "run_id": run_id,
            "normalized_plan_digest": "5" * 64,
            "replication_mode": "internal",
            "table": DeclaredTable(engine="ReplicatedMergeTree", order_by=("id",)),
            "max_source_bytes": max_bytes,
        }
    )


def create_replicated(connection: Any, database: str, table: str) -> None:
    """An empty ReplicatedMergeTree on every replica (one ON CLUSTER statement through the coordinator)."""
    from airflow_provider_dpone.core.clickhouse.clients import Purpose, build_client, close_client

    client = build_client(connection, Purpose.READ)
    try:
        client.command(
            f"CREATE TABLE `{database}`.`{table}` ON CLUSTER {CLUSTER} ({shared.TABLE_DDL}) {TARGET_KEYS}",
            settings={"distributed_ddl_task_timeout": 60},
        )
    finally:
        close_client(client)


def baseline_trial(
    connection: Any,
    members: list[tuple[str, int]],
    database: str,
    path: Path,
    table: str,
    settings: dict[str, Any] | None = None,
) -> float:
    """Plain clickhouse-connect: one raw_insert through the first replica, then SYNC REPLICA on every other one."""
    import clickhouse_connect

    create_replicated(connection, database, table)
    (host, port), *others = members
    started = time.perf_counter()
    client = clickhouse_connect.get_client(host=host, port=port, username=connection.username, password="")
    try:
        with path.open("rb") as handle:
            client.raw_insert(f"`{database}`.`{table}`", None, handle, fmt="Native", settings=settings)
    finally:
        client.close()
    for host, port in others:
        client = clickhouse_connect.get_client(
            host=host, port=port, username=connection.username, password="", send_receive_timeout=900
        )
        try:
            client.command(f"SYSTEM SYNC REPLICA `{database}`.`{table}`", settings={"receive_timeout": 600})
        finally:
            client.close()
    return time.perf_counter() - started


def floor_trial(connection: Any, members: list[tuple[str, int]], database: str, path: Path, table: str) -> float:
    """The seed's floor: the baseline's load (through one replica, squashed by bytes as the route loads, then SYNC
    REPLICA on the others), one content digest per replica at once with the route's SQL, one ``EXCHANGE TABLES ...
    ON CLUSTER`` with an old target (created beforehand, untimed)."""
    from airflow_provider_dpone.cluster.clickhouse.sql_member import LOAD_SQUASHING

    create_replicated(connection, database, f"{table}_old")
    loaded = baseline_trial(connection, members, database, path, table, dict(LOAD_SQUASHING))
    digested = shared.at_once(members, shared.route_digest(connection, database, table))
    return loaded + digested + shared.exchange_on_cluster(connection, database, f"{table}_old", table, CLUSTER)


def ours_trial(
    adapters: Any, members: list[tuple[str, int]], database: str, receipt: Any, trial: int
) -> tuple[float, dict[str, float], Any, Any, Any, dict[str, dict[str, float]]]:
    target = f"target_{trial}"
    create_replicated(adapters.coordinator_connection, database, target)
    original = adapters.ports
    calls, seconds = shared.instrument(adapters)  # counts this trial only: the wrapped ports are restored below
    http: Counter[str] = Counter()
    by_phase: Counter[tuple[str, str]] = Counter()
    undo = shared.count_http(http, by_phase, frozenset(port for _host, port in members))
    started = time.perf_counter()
    try:
        req = request(database, target, f"trial-{trial}-{uuid.uuid4().hex}", 1 << 34)
        spent = shared.run_publication(adapters, req, shared.Sealed(receipt))
    finally:
        undo()
        adapters.ports = original
    elapsed = time.perf_counter() - started
    return elapsed, spent, calls, seconds, http, shared.round_trips_by_phase(by_phase, len(members))


def round_trip_line(replicas: int, calls: Counter[str], http: Counter[str]) -> str:
    authority_reads = calls["authority.read"]
    authority_writes = calls["authority.create"] + calls["authority.compare_and_set"]
    dispatches = calls["ddl.dispatch"]
    polls = calls["ddl.queue_status"]
    member = {k.removeprefix("member."): v for k, v in calls.items() if k.startswith("member.")}
    catalog = sum(v for k, v in calls.items() if k.startswith("catalog."))
    return (
        f"  {replicas:8d}  {authority_reads:14d}  {authority_writes:15d}  {dispatches:14d}  {polls:11d}"
        f"  {catalog:13d}  {sum(member.values()):14d}  {http['http']:10d}   {json.dumps(dict(sorted(member.items())))}"
    )


def measure(base: Path, replicas: int, rows: int, trials: int) -> dict[str, Any]:
    cluster = start_cluster(base / f"cluster{replicas}-{rows}", replicas)
    try:
        database = "bench"
        adapters, _raw, members = shared.attach(cluster, database, base / f"artifacts{replicas}")
        receipt, seal_seconds = shared.seal_artifact(adapters, rows)
        path = Path(str(adapters.store.object_path(receipt.sha256)).removeprefix("file://"))
        print(f"\n{replicas} replicas: artifact {receipt.row_count:,d} rows, {receipt.byte_size / 1e6:.1f} MB Native;")
        print(f"  sealing (extraction + reference digest, once per operation) {seal_seconds:.2f} s")
        baseline_trial(adapters.coordinator_connection, members, database, path, "warmup_base")
        ours_trial(adapters, members, database, receipt, 0)
        base_times, floor_times, our_times, phases = [], [], [], []
        for trial in range(1, trials + 1):
            base_times.append(baseline_trial(adapters.coordinator_connection, members, database, path, f"base_{trial}"))
            floor_times.append(floor_trial(adapters.coordinator_connection, members, database, path, f"floor_{trial}"))
            elapsed, spent, calls, seconds, http, round_trips = ours_trial(adapters, members, database, receipt, trial)
            our_times.append(elapsed)
            phases.append(spent)
        b, o = statistics.median(base_times), statistics.median(our_times)
        print(f"  baseline (raw_insert through one replica + SYNC REPLICA on the others): median {b:.2f} s")
        print(f"  ours (fence+stage+publish+cleanup):                                    median {o:.2f} s")
        f = statistics.median(floor_times)
        print(f"  floor (the baseline + the route's digest per replica + one ON CLUSTER EXCHANGE): median {f:.2f} s")
        print(f"  ratio ours/baseline: {o / b:.2f}; ours/floor: {o / f:.2f}  (aim <= 1.3 at 1M rows, <= 1.15 at 10M)")
        medians = {phase: statistics.median(spent[phase] for spent in phases) for phase in phases[0]}
        print("  ours by entry point (median s):", {k: round(v, 2) for k, v in medians.items()})
        print("  ours by port call (last trial, s):", {k: round(v, 3) for k, v in sorted(seconds.items())})
        shared.print_round_trips(round_trips)
        small, _ = shared.seal_artifact(adapters, FIXED_COST_ROWS)
        small_path = Path(str(adapters.store.object_path(small.sha256)).removeprefix("file://"))
        fixed_base = statistics.median(
            baseline_trial(adapters.coordinator_connection, members, database, small_path, f"small_base_{trial}")
            for trial in range(trials)
        )
        fixed_ours = statistics.median(
            ours_trial(adapters, members, database, small, 100 + trial)[0] for trial in range(trials)
        )
        per_row = (o - fixed_ours) / (b - fixed_base) if b > fixed_base else float("nan")
        print(
            f"  at {FIXED_COST_ROWS:,d} rows (the cost that does not grow with rows): baseline {fixed_base:.2f} s,"
            f" ours {fixed_ours:.2f} s; ratio of the rest (the per-row part): {per_row:.2f}"
        )
        adapters.close()
        return {
            "replicas": replicas,
            "rows": receipt.row_count,
            "baseline_s": round(b, 3),
            "ours_s": round(o, 3),
            "ratio": round(o / b, 3),
            "floor_s": round(f, 3),
            "ratio_vs_floor": round(o / f, 3),
            "fixed_baseline_s": round(fixed_base, 3),
            "fixed_ours_s": round(fixed_ours, 3),
            "per_row_ratio": round(per_row, 3),
            "calls": dict(calls),
            "http": http["http"],
            "round_trips_by_phase": round_trips,
            "ours_by_entry_point_s": {k: round(v, 3) for k, v in medians.items()},
        }
    finally:
        cluster.stop()


def trace(base: Path, replicas: int) -> None:
    """One publication's requests on a timeline: where the cost that does not grow with rows goes."""
    cluster = start_cluster(base / f"trace{replicas}", replicas)
    try:
        adapters, _raw, members = shared.attach(cluster, "bench", base / f"trace-artifacts{replicas}")
        receipt, _ = shared.seal_artifact(adapters, FIXED_COST_ROWS)
        for warmup in range(2):
            ours_trial(adapters, members, "bench", receipt, warmup)
        create_replicated(adapters.coordinator_connection, "bench", "target_traced")
        req = request("bench", "target_traced", f"trace-{uuid.uuid4().hex}", 1 << 34)
        shared.print_timeline(f"{replicas} replicas, {FIXED_COST_ROWS:,d} rows", adapters, req, receipt)
        adapters.close()
    finally:
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000], help="row counts of the timing runs")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--replicas", type=int, nargs="*", default=[2, 3])
    parser.add_argument("--trace", action="store_true", help="the request timeline of one 10,000-row publication")
    args = parser.parse_args(argv)
    if args.trace:
        with tempfile.TemporaryDirectory(prefix="dpone-bench-internal-") as tmp:
            for replicas in args.replicas:
                trace(Path(tmp), replicas)
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="dpone-bench-internal-") as tmp:
        for rows in args.rows:
            for replicas in args.replicas:
                results.append(measure(Path(tmp), replicas, rows, args.trials))
    print("\nround trips of one publication (last trial; sealed artifact bound as stage input):")
    print(
        "  replicas  authority-reads  authority-writes  ddl-dispatches  queue-polls  catalog-reads"
        "  member-calls  http-total   member calls by kind"
    )
    for result in results:
        print(round_trip_line(result["replicas"], Counter(result["calls"]), Counter(http=result["http"])))
    keys = ("rows", "baseline_s", "floor_s", "ours_s", "ratio", "ratio_vs_floor", "fixed_baseline_s", "fixed_ours_s")
    keys += ("per_row_ratio", "http", "round_trips_by_phase", "ours_by_entry_point_s")
    summary = {f"{r['replicas']}x{r['rows']}": {k: r[k] for k in keys} for r in results}
    slopes = shared.per_row_slopes(results, by="replicas")
    print("per-row slope and fixed cost, by replicas:", slopes)
    print(json.dumps({"internal_publication": summary, "per_row_slopes": slopes}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
