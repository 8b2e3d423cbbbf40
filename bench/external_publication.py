"""Benchmark: external-replication publication through the protocol service on the real adapters vs plain loads.

On an embedded cluster (real ClickHouse engines behind HTTP, one process per member), with an artifact of N rows
(UInt64, String, Nullable(Decimal(18,4)), DateTime64(3,'UTC')) extracted once as Native bytes into the artifact store:

* baselines: the same artifact bytes loaded with a plain clickhouse-connect ``raw_insert`` into a fresh table on
  every member, one member after another and all members in parallel (what a loader that does not fence, verify or
  publish would do);
* floor: what any publication meeting the seed's checks must at least do, measured in the same trials: the plain
  parallel loads, one content digest per member with the route's SQL, one ``EXCHANGE TABLES ... ON CLUSTER``
  (``ours/floor`` is printed beside the other ratios; with two ``--rows`` values, the per-row slope and the fixed
  cost of ours and of the floor);
* ours: ``fence`` + ``stage`` + ``publish`` + ``cleanup`` of the external publication service replacing a target
  that already holds N rows on every member (EXCHANGE, then DROP of the predecessor), with the sealed receipt bound
  as the stage input, in two cases measured in the same trials against the same baselines:
  - steady state (the headline): the old target is what a previous publication of this target published (the same
    N-row artifact, published untimed just before), so its digest is the one that publication verified;
  - first adoption: the old target was created and filled outside dpone, so every member's target is digested.
  The artifact's extraction and reference digest (sealing) are measured separately: they happen once per operation,
  not per member. Producing the old target is not timed.

It prints medians over the trials and the ratios ours/baseline measured in the same run; the share of staging spent
verifying (server-side digests and the artifact's verification on open) vs loading; where the time goes (wall clock
per entry point, and port-call seconds by category: load, digests, artifact hashing, authority, DDL, catalog and
member reads); the port calls and HTTP requests
(Keeper authority and cluster round trips) of one publication for 2, 3 and 4 members, which must not depend on rows;
and the peak RSS of a worker process running the whole operation (extraction included) at two sizes, which must not
grow with the row count (bytes are streamed in bounded chunks). The last line is one JSON object with the ratios.
Not part of the pytest suite.

    .venv/bin/python bench/external_publication.py [--rows 1000000 10000000] [--trials 3] [--members 2 3 4]
        [--rss-rows 100000 1000000]

``--trace`` instead prints the timeline of one steady-state publication of ``--rows`` rows per ``--members`` count
(after warm-ups): every HTTP request the adapters send, with its start, duration and statement head, under its entry
point (the internal bench's ``--trace`` prints the same for the replicated route).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

COLUMNS = (
    ("id", "UInt64"),
    ("name", "String"),
    ("amount", "Nullable(Decimal(18, 4))"),
    ("at", "DateTime64(3, 'UTC')"),
)
TABLE_DDL = ", ".join(f"`{name}` {type_}" for name, type_ in COLUMNS)


def source_query(rows: int) -> str:
    return (
        "SELECT number AS id, concat('name-', toString(number)) AS name,"
        " if(number % 10 = 0, NULL, toDecimal64(number % 100000, 4) / 3) AS amount,"
        " toDateTime64('2026-01-01 00:00:00', 3, 'UTC') + number AS at"
        f" FROM numbers({rows})"
    )


# --- helpers shared by the parent and the RSS worker ----------------------------------------------------------------


def resolved(raw: dict[str, Any], database: str) -> Any:
    from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection
    from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions

    return ResolvedConnection(
        host=raw["host"],
        port=int(raw["port"]),
        username=raw["login"],
        password=raw["password"],
        database=database,
        options=ClickHouseConnectionOptions.model_validate(raw["extra"]),
    )


def provision(connection: Any, endpoints: list[tuple[str, int]], database: str) -> None:
    """The database on every process and the KeeperMap authority table (seed 002 preconditions)."""
    from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_COLUMNS, AUTHORITY_TABLE
    from airflow_provider_dpone.core.clickhouse.clients import Purpose, build_client, close_client

    columns = ", ".join(f"`{n}` {t}" for n, t in AUTHORITY_COLUMNS)
    path = f"/dpone/bench/{uuid.uuid4().hex}"
    bare = replace(connection, database="")
    for host, port in endpoints:
        client = build_client(bare.at(host, port), Purpose.READ)
        try:
            client.command(f"CREATE DATABASE IF NOT EXISTS `{database}` ENGINE = Atomic")
            client.command(
                f"CREATE TABLE `{database}`.`{AUTHORITY_TABLE}` ({columns}) ENGINE = KeeperMap('{path}')"
                " PRIMARY KEY target_key"
            )
        finally:
            close_client(client)


def on_members(connection: Any, members: list[tuple[str, int]], statement: str) -> None:
    from airflow_provider_dpone.core.clickhouse.clients import Purpose, build_client, close_client

    for host, port in members:
        client = build_client(connection.at(host, port), Purpose.READ)
        try:
            client.command(statement)
        finally:
            close_client(client)


class Sealed:
    """An ``ArtifactSource`` whose artifact is already sealed: staging binds the receipt, nothing is extracted."""

    def __init__(self, receipt: Any) -> None:
        self.receipt = receipt
        self.columns = receipt.schema_pairs

    def seal(self) -> Any:
        return self.receipt


def request(database: str, target: str, run_id: str, max_bytes: int) -> Any:
    from airflow_provider_dpone.cluster.ports import DeclaredTable
    from airflow_provider_dpone.cluster.protocol.request import PublicationRequest

    return PublicationRequest.parse(
        {
            "cluster": "dpone_cluster",
            "database": database,
            "target": target,
            "dag_id": "bench",
            "run_id": run_id,
            "normalized_plan_digest": "5" * 64,
            "replication_mode": "external",
            "table": DeclaredTable(order_by=("id",)),
            "max_source_bytes": max_bytes,
        }
    )


PHASES = ("fence", "stage", "publish", "reconcile", "cleanup")
"""The phases round trips and wall time are reported by: the four entry points, and the reconciliation of their ON
CLUSTER DDL (queue entry, every member's side, the completion CAS with its checks) inside publish and cleanup."""
_PHASE = ["-"]  # the phase the main thread is in; the requests of its worker threads are charged to it


def run_publication(adapters: Any, req: Any, source: Any) -> dict[str, float]:
    """The four entry points in order; wall-clock seconds spent in each, and in the reconciliation of their DDL
    (``reconcile``: within publish and cleanup, whose seconds include it)."""
    from airflow_provider_dpone.cluster.protocol.results import Committed, Completed
    from airflow_provider_dpone.cluster.protocol.service import publication_service

    service = publication_service(adapters.ports, req)
    spent: dict[str, float] = {"reconcile": 0.0}
    _time_reconcile(spent)

    def entry(phase: str, call: Callable[[], Any]) -> Any:
        _PHASE[0] = phase
        started = time.perf_counter()
        try:
            return call()
        finally:
            spent[phase] = time.perf_counter() - started
            _PHASE[0] = "-"

    entry("fence", service.fence)
    staged = entry("stage", lambda: service.stage(source))
    if staged.phase != "STAGED":
        raise RuntimeError(f"stage ended in {staged.phase}")
    if not isinstance(entry("publish", service.publish), Committed):
        raise RuntimeError("publication did not commit")
    if not isinstance(entry("cleanup", service.cleanup), Completed):
        raise RuntimeError("cleanup did not complete")
    return {phase: spent[phase] for phase in ("fence", "stage", "publish", "cleanup", "reconcile")}


_RECONCILE_SECONDS: list[dict[str, float]] = []  # the ``spent`` of the publication being run


def _time_reconcile(spent: dict[str, float]) -> None:
    """Charge the requests and the wall time of every DDL reconciliation (``ddl_step.reconcile_step``) to the
    ``reconcile`` phase while ``spent``'s publication runs (the wrapper is installed once per process)."""
    from airflow_provider_dpone.cluster.protocol import ddl_step

    if not _RECONCILE_SECONDS:
        original = ddl_step.reconcile_step

        def reconcile_step(*args: Any, **kwargs: Any) -> Any:
            outer, _PHASE[0] = _PHASE[0], "reconcile"
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                _RECONCILE_SECONDS[-1]["reconcile"] += time.perf_counter() - started
                _PHASE[0] = outer

        ddl_step.reconcile_step = reconcile_step
    _RECONCILE_SECONDS[:] = [spent]


# --- instrumentation --------------------------------------------------------------------------------------------


class Counting:
    """Counts calls (and time) of every method of a port object; wraps member sessions as they are opened."""

    def __init__(self, target: Any, prefix: str, calls: Counter[str], seconds: Counter[str]) -> None:
        self._target = target
        self._prefix = prefix
        self._calls = calls
        self._seconds = seconds

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return value

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            key = f"{self._prefix}.{name}"
            read = args[0] if name == "observe_table" else None
            if read is not None and read.with_content:
                key += "+digest-changed-parts" if read.known_parts else "+digest"  # whole or partial read
                key += ":candidate" if "__dpone_" in read.table else ":target"
            started = time.perf_counter()
            try:
                result = value(*args, **kwargs)
            finally:
                self._calls[key] += 1
                self._seconds[key] += time.perf_counter() - started
            if "+digest" in key:  # how many parts and rows the digest read (the others' recorded sums were reused)
                self._calls[f"parts-read:{key}"] += result.parts_read or 0
                known = {fact.part for fact in read.known_parts} if read is not None else set()
                fresh = [fact.rows for fact in result.part_digests or () if fact.part not in known]
                self._calls[f"rows-read:{key}"] += sum(fresh) if result.part_digests else result.row_count or 0
            if name == "session":
                return Counting(result, "member", self._calls, self._seconds)
            return result

        return wrapped


CATEGORIES: dict[str, tuple[str, ...]] = {
    "load (member.load: the INSERT, hashing the artifact while it streams)": ("member.load",),
    "content digest of the candidates (after load; barrier re-digests)": ("member.observe_table+digest:candidate",),
    "content digest of the old target (baseline)": ("member.observe_table+digest:target",),
    "content digest of changed parts only (barrier, baseline; after a merge)": (
        "member.observe_table+digest-changed-parts:candidate",
        "member.observe_table+digest-changed-parts:target",
    ),
    "artifact verification on open (a full SHA-256 pass)": ("artifacts.open",),
    "authority reads": ("authority.read",),
    "authority writes (create, CAS = update + read-back)": ("authority.create", "authority.compare_and_set"),
    "ON CLUSTER DDL (dispatch + queue status)": ("ddl.dispatch", "ddl.queue_status"),
    "catalog reads (inventory; database engine + authority table facts, one read per member)": (
        "catalog.inventory",
        "catalog.admission_facts",
    ),
    "member metadata reads (UUIDs, schema, parts, counts)": ("member.observe_table", "member.table_uuids"),
    "member DDL (create, drop)": ("member.create_table", "member.drop_table"),
}


def breakdown(seconds: Counter[str]) -> dict[str, float]:
    """Port-call seconds by category (summed over members: concurrent calls overlap, so the sum can exceed wall
    time); anything not in a category is reported as ``other``."""
    grouped = {name: sum(seconds[key] for key in keys) for name, keys in CATEGORIES.items()}
    known = {key for keys in CATEGORIES.values() for key in keys}
    grouped["other"] = sum(value for key, value in seconds.items() if key not in known and key not in CHECKS)
    for key, (_, _, label) in CHECKS.items():
        grouped[f"{label} (wall; its port calls are counted above)"] = seconds[key]
    return {name: round(value, 3) for name, value in grouped.items()}


POST_DDL_CHECK = "check.post_ddl_content"
AFTER_COMMIT_LOOK = "check.after_commit"
CHECKS: dict[str, tuple[str, str, str]] = {
    POST_DDL_CHECK: ("publication", "_require_published_as_verified", "post-DDL content check"),
    AFTER_COMMIT_LOOK: ("service", "look_again", "look after COMMITTED"),
}
"""Checks timed by wall clock: key -> (module of ``cluster/protocol`` whose name is wrapped, that name, label)."""
_CHECK_SECONDS: list[Counter[str]] = []  # the seconds counter of the trial being instrumented


def _time_checks() -> None:
    """Charge the wall time of each check in :data:`CHECKS` (the content check between the publication DDL and
    COMMITTED, the look after COMMITTED; their port calls are also counted by port) to the trial being
    instrumented. A check the code under test does not have is left out."""
    import importlib

    for key, (module_name, name, _) in CHECKS.items():
        module = importlib.import_module(f"airflow_provider_dpone.cluster.protocol.{module_name}")
        check = getattr(module, name, None)
        if check is None:
            continue

        def timed(*args: Any, _check: Any = check, _key: str = key, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return _check(*args, **kwargs)
            finally:
                if _CHECK_SECONDS:
                    _CHECK_SECONDS[-1][_key] += time.perf_counter() - started

        setattr(module, name, timed)


def instrument(adapters: Any) -> tuple[Counter[str], Counter[str]]:
    calls: Counter[str] = Counter()
    seconds: Counter[str] = Counter()
    if not _CHECK_SECONDS:  # the first instrumented trial wraps the check once, for this process
        _time_checks()
    _CHECK_SECONDS[:] = [seconds]
    ports = adapters.ports
    adapters.ports = replace(
        ports,
        authority=Counting(ports.authority, "authority", calls, seconds),
        catalog=Counting(ports.catalog, "catalog", calls, seconds),
        sessions=Counting(ports.sessions, "sessions", calls, seconds),
        ddl=Counting(ports.ddl, "ddl", calls, seconds),
        artifacts=Counting(ports.artifacts, "artifacts", calls, seconds),
    )
    return calls, seconds


def count_http(
    counter: Counter[str], by_phase: Counter[tuple[str, str]] | None = None, members: frozenset[int] = frozenset()
) -> Callable[[], None]:
    """Count every HTTP request the adapters' pools send (``counter["http"]``) and, with ``by_phase``, each by the
    phase it was sent in and where it went: ``member`` (a member's port, in ``members``), ``authority`` (a
    statement on the authority table, through the coordinator) or ``coordinator`` (topology, ON CLUSTER DDL, its
    queue, server identity).
    Returns the undo."""
    from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_TABLE
    from airflow_provider_dpone.core.clickhouse import clients

    original = clients.PinnedPoolManager.urlopen

    def urlopen(self: Any, method: str, url: str, redirect: bool = True, **kw: Any) -> Any:
        counter["http"] += 1
        if by_phase is not None:
            if urlsplit(url).port in members:
                where = "member"
            elif AUTHORITY_TABLE in statement_text(url, kw.get("body")):
                where = "authority"
            else:
                where = "coordinator"
            by_phase[(_PHASE[0], where)] += 1
        return original(self, method, url, redirect, **kw)

    clients.PinnedPoolManager.urlopen = urlopen  # type: ignore[method-assign]

    def undo() -> None:
        clients.PinnedPoolManager.urlopen = original  # type: ignore[method-assign]

    return undo


def round_trips_by_phase(by_phase: Counter[tuple[str, str]], members: int) -> dict[str, dict[str, float]]:
    """HTTP requests of one publication per phase: to the authority, to the coordinator otherwise, to the members
    (in all, and per member), and the total."""
    table: dict[str, dict[str, float]] = {}
    for phase in (*PHASES, "-"):
        authority, coordinator = by_phase[(phase, "authority")], by_phase[(phase, "coordinator")]
        member = by_phase[(phase, "member")]
        if phase == "-" and not authority + coordinator + member:
            continue
        table[phase] = {
            "authority": authority,
            "coordinator": coordinator,
            "members": member,
            "per_member": round(member / members, 1),
            "total": authority + coordinator + member,
        }
    table["all"] = {key: round(sum(row[key] for row in table.values()), 1) for key in next(iter(table.values()))}
    return table


def print_round_trips(table: dict[str, dict[str, float]], indent: str = "  ") -> None:
    print(f"{indent}HTTP requests by phase (reconcile: within publish and cleanup, counted there only):")
    print(f"{indent}  phase       authority  coordinator  members  per-member  total")
    for phase, row in table.items():
        print(
            f"{indent}  {phase:<10} {row['authority']:9.0f}  {row['coordinator']:11.0f}  {row['members']:7.0f}"
            f"  {row['per_member']:10.1f}  {row['total']:5.0f}"
        )


# --- phases -----------------------------------------------------------------------------------------------------


def statement_text(url: str, body: Any, limit: int = 2000) -> str:
    """The statement a request carries (in its ``query`` parameter, or else the first ``limit`` characters of its
    body)."""
    text = parse_qs(urlsplit(url).query).get("query", [""])[0]
    if not text and isinstance(body, bytes | str):
        text = body[:limit].decode("utf-8", "replace") if isinstance(body, bytes) else body[:limit]
    return text


def statement_head(url: str, body: Any) -> str:
    """The first words of the statement a request carries."""
    return re.sub(r"\s+", " ", statement_text(url, body, 200))[:100]


def print_timeline(title: str, adapters: Any, req: Any, receipt: Any) -> None:
    """Run one publication of ``req`` and print every HTTP request the adapters send: its start (ms from the start
    of ``fence``), its duration and the statement's first words, under the entry point it belongs to; requests sent
    concurrently overlap in time."""
    from airflow_provider_dpone.core.clickhouse import clients

    requests: list[tuple[float, float, str]] = []
    original = clients.PinnedPoolManager.urlopen

    def urlopen(self: Any, method: str, url: str, redirect: bool = True, **kw: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(self, method, url, redirect, **kw)
        finally:
            requests.append((started, time.perf_counter() - started, statement_head(url, kw.get("body"))))

    clients.PinnedPoolManager.urlopen = urlopen  # type: ignore[method-assign]
    began = time.perf_counter()
    try:
        spent = run_publication(adapters, req, Sealed(receipt))
    finally:
        clients.PinnedPoolManager.urlopen = original  # type: ignore[method-assign]
    ends, total = [], 0.0
    for phase, seconds in spent.items():
        total += seconds
        ends.append((began + total, phase))
    print(f"\n{title}: {len(requests)} requests, {total * 1000:.0f} ms")
    phase = 0
    print(f"  -- {ends[0][1]}")
    for started, seconds, head in sorted(requests):
        while phase < len(ends) - 1 and started >= ends[phase][0]:
            phase += 1
            print(f"  -- {ends[phase][1]}")
        print(f"  {(started - began) * 1000:8.1f} {seconds * 1000:7.1f}  {head}")


def trace(base: Path, members_count: int, rows: int) -> None:
    """The request timeline of one steady-state publication (the old target published by the previous one) of
    ``rows`` rows, after two warm-up publications."""
    cluster = start_cluster(base / f"trace{members_count}", members_count)
    try:
        adapters, _raw, members = attach(cluster, "bench", base / f"trace-artifacts{members_count}")
        receipt, _ = seal_artifact(adapters, rows)
        for warmup in range(2):
            ours_trial(adapters, members, "bench", receipt, f"warmup_{warmup}", steady=True)
        run_publication(adapters, request("bench", "traced", f"previous-{uuid.uuid4().hex}", 1 << 34), Sealed(receipt))
        req = request("bench", "traced", f"trace-{uuid.uuid4().hex}", 1 << 34)
        print_timeline(f"{members_count} members, {rows:,d} rows, steady state", adapters, req, receipt)
        adapters.close()
    finally:
        cluster.stop()


def seal_artifact(adapters: Any, rows: int) -> tuple[Any, float]:
    source = adapters.query_source(query=source_query(rows), columns=COLUMNS, max_source_bytes=1 << 34)
    started = time.perf_counter()
    receipt = source.seal()
    return receipt, time.perf_counter() - started


def _plain_load(
    connection: Any, host: str, port: int, database: str, path: Path, table: str, settings: dict[str, Any] | None = None
) -> None:
    import clickhouse_connect

    client = clickhouse_connect.get_client(host=host, port=port, username=connection.username, password="")
    try:
        client.command(f"CREATE TABLE `{database}`.`{table}` ({TABLE_DDL}) ENGINE = MergeTree ORDER BY id")
        with path.open("rb") as handle:
            client.raw_insert(f"`{database}`.`{table}`", None, handle, fmt="Native", settings=settings)
    finally:
        client.close()


def baseline_trial(connection: Any, members: list[tuple[str, int]], database: str, path: Path, table: str) -> float:
    """Plain clickhouse-connect: CREATE + one raw_insert of the artifact bytes per member, one after another."""
    started = time.perf_counter()
    for host, port in members:
        _plain_load(connection, host, port, database, path, table)
    return time.perf_counter() - started


def at_once(members: list[tuple[str, int]], work: Callable[[str, int], None]) -> float:
    """``work(host, port)`` for every member, one thread each, all at once; the seconds until the last one ends."""
    errors: list[BaseException] = []

    def run(host: str, port: int) -> None:
        try:
            work(host, port)
        except BaseException as error:  # noqa: BLE001 -- reported after the join
            errors.append(error)

    threads = [threading.Thread(target=run, args=member) for member in members]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return elapsed


def parallel_baseline_trial(
    connection: Any, members: list[tuple[str, int]], database: str, path: Path, table: str
) -> float:
    """The same plain loads, one thread (and client) per member, all at once."""
    return at_once(members, lambda host, port: _plain_load(connection, host, port, database, path, table))


def route_digest(connection: Any, database: str, table: str) -> Callable[[str, int], None]:
    """One content digest of ``table`` on a member, with the route's SQL (``sql_digest.part_content``, version 2)."""
    from airflow_provider_dpone.cluster.clickhouse import sql_digest
    from airflow_provider_dpone.core.clickhouse.clients import Purpose, build_client, close_client

    statement = sql_digest.part_content(database, table, COLUMNS, 2)

    def digest(host: str, port: int) -> None:
        client = build_client(connection.at(host, port), Purpose.READ)
        try:
            client.query(statement)
        finally:
            close_client(client)

    return digest


def exchange_on_cluster(
    connection: Any, database: str, first: str, second: str, cluster: str = "dpone_cluster"
) -> float:
    """One ``EXCHANGE TABLES ... ON CLUSTER`` through the coordinator; its seconds."""
    from airflow_provider_dpone.core.clickhouse.clients import Purpose, build_client, close_client

    client = build_client(connection, Purpose.READ)
    started = time.perf_counter()
    try:
        client.command(f"EXCHANGE TABLES `{database}`.`{first}` AND `{database}`.`{second}` ON CLUSTER {cluster}")
    finally:
        close_client(client)
    return time.perf_counter() - started


def floor_trial(connection: Any, members: list[tuple[str, int]], database: str, path: Path, name: str) -> float:
    """The seed's floor for one publication: on every member at once, the plain load of the artifact into a fresh
    candidate (squashed by bytes, as the route loads) and one content digest of it with the route's SQL; then one
    ``EXCHANGE TABLES ... ON CLUSTER`` of the candidate with the old target (created beforehand, untimed). No fence,
    no authority, no metadata read: what any publication that meets the seed's checks must at least do."""
    from airflow_provider_dpone.cluster.clickhouse.sql_member import LOAD_SQUASHING

    old = f"{name}_old"
    on_members(connection, members, f"CREATE TABLE `{database}`.`{old}` ({TABLE_DDL}) ENGINE = MergeTree ORDER BY id")
    digest = route_digest(connection, database, name)

    def stage(host: str, port: int) -> None:
        _plain_load(connection, host, port, database, path, name, dict(LOAD_SQUASHING))
        digest(host, port)

    return at_once(members, stage) + exchange_on_cluster(connection, database, old, name)


def ours_trial(
    adapters: Any, members: list[tuple[str, int]], database: str, receipt: Any, name: str, *, steady: bool
) -> Any:
    """One publication replacing ``name``, which holds the artifact's rows on every member first: published by a
    previous (untimed) publication when ``steady``, else created and filled outside dpone."""
    connection = adapters.coordinator_connection
    if steady:
        run_publication(adapters, request(database, name, f"previous-{uuid.uuid4().hex}", 1 << 34), Sealed(receipt))
    else:
        ddl = f"CREATE TABLE `{database}`.`{name}` ({TABLE_DDL}) ENGINE = MergeTree ORDER BY id"
        on_members(connection, members, ddl)
        on_members(connection, members, f"INSERT INTO `{database}`.`{name}` {source_query(receipt.row_count)}")
    original = adapters.ports
    calls, seconds = instrument(adapters)  # this trial only: the wrapped ports are restored below
    by_phase: Counter[tuple[str, str]] = Counter()
    undo = count_http(Counter(), by_phase, frozenset(port for _host, port in members))
    started = time.perf_counter()
    try:
        req = request(database, name, f"{name}-{uuid.uuid4().hex}", 1 << 34)
        spent = run_publication(adapters, req, Sealed(receipt))
    finally:
        undo()
        adapters.ports = original
    elapsed = time.perf_counter() - started
    return elapsed, spent, calls, seconds, round_trips_by_phase(by_phase, len(members))


def verification_share(seconds: Counter[str]) -> float:
    """Server-side digests and the artifact's verification on open, over the loads (port-call seconds)."""
    loading = seconds["member.load"]
    verifying = sum(v for k, v in seconds.items() if "+digest" in k) + seconds["artifacts.open"]
    return verifying / loading if loading else float("nan")


def rss_worker(raw: dict[str, Any], database: str, rows: int, directory: str) -> None:
    """Child process: the whole operation (extraction included) for ``rows``; prints RSS figures as JSON."""
    import resource

    from airflow.sdk import ObjectStoragePath

    from airflow_provider_dpone.cluster.clickhouse.adapter_set import adapters_for
    from airflow_provider_dpone.cluster.clickhouse.artifact_store import ObjectStorageArtifactStore

    connection = resolved(raw, database)
    adapters = adapters_for(
        connection, database=database, store=ObjectStorageArtifactStore(ObjectStoragePath(f"file://{directory}"))
    )
    with open("/proc/self/status") as status:
        start_kib = int(status.read().split("VmRSS:")[1].split()[0])
    source = adapters.query_source(query=source_query(rows), columns=COLUMNS, max_source_bytes=1 << 34)
    run_publication(adapters, request(database, f"rss_{rows}", f"rss-{uuid.uuid4().hex}", 1 << 34), source)
    adapters.close()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rows": rows, "start_mib": start_kib / 1024, "peak_mib": peak_kib / 1024}))


# --- main -------------------------------------------------------------------------------------------------------


def start_cluster(directory: Path, members: int) -> Any:
    from dpone_embedded import EmbeddedCluster

    return EmbeddedCluster.start(directory, members=members, internal_replication=False)


def attach(cluster: Any, database: str, store_dir: Path) -> tuple[Any, Any, list[tuple[str, int]]]:
    raw = cluster.connection_json(database)
    connection = resolved(raw, database)
    provision(connection, [(e.host, e.port) for e in cluster.endpoints], database)
    return adapter_set(connection, database, store_dir), raw, [(m.host, m.port) for m in cluster.members]


def adapter_set(connection: Any, database: str, store_dir: Path) -> Any:
    """A fresh set of adapters (no client connected yet), as each Airflow task try builds one."""
    from airflow.sdk import ObjectStoragePath

    from airflow_provider_dpone.cluster.clickhouse.adapter_set import adapters_for
    from airflow_provider_dpone.cluster.clickhouse.artifact_store import ObjectStorageArtifactStore

    adapters = adapters_for(
        connection,
        database=database,
        store=ObjectStorageArtifactStore(ObjectStoragePath(f"file://{store_dir}")),
        ddl_task_timeout_seconds=60,
    )
    adapters.coordinator_connection = connection
    return adapters


def timing(base: Path, rows: int, trials: int, members_count: int = 2) -> dict[str, Any]:
    cluster = start_cluster(base / f"cluster{members_count}-{rows}", members_count)
    try:
        database = "bench"
        adapters, _raw, members = attach(cluster, database, base / "artifacts")
        receipt, seal_seconds = seal_artifact(adapters, rows)
        path = Path(str(adapters.store.object_path(receipt.sha256)).removeprefix("file://"))
        connection = adapters.coordinator_connection
        print(f"artifact: {receipt.row_count} rows, {receipt.byte_size / 1e6:.1f} MB Native; sealing (extraction +")
        print(f"  reference digest on the coordinator) {seal_seconds:.2f} s, once per operation")
        print(f"old target: {rows} rows on every member (replaced by each publication)")
        baseline_trial(connection, members, database, path, "warmup_base")
        ours_trial(adapters, members, database, receipt, "warmup", steady=True)
        base_times, parallel_times, floor_times = [], [], []
        cases: dict[str, list[Any]] = {"steady": [], "first_adoption": []}
        for trial in range(1, trials + 1):
            base_times.append(baseline_trial(connection, members, database, path, f"base_{trial}"))
            parallel_times.append(parallel_baseline_trial(connection, members, database, path, f"par_{trial}"))
            floor_times.append(floor_trial(connection, members, database, path, f"floor_{trial}"))
            cases["steady"].append(ours_trial(adapters, members, database, receipt, f"steady_{trial}", steady=True))
            cases["first_adoption"].append(
                ours_trial(adapters, members, database, receipt, f"adopted_{trial}", steady=False)
            )
        b, p = statistics.median(base_times), statistics.median(parallel_times)
        print(f"baseline (plain raw_insert per member, {len(members)} members, one after another): median {b:.2f} s")
        print(f"baseline (the same plain loads, all members in parallel):           median {p:.2f} s")
        f = statistics.median(floor_times)
        print(f"floor (parallel loads + the route's digest per member + one ON CLUSTER EXCHANGE): median {f:.2f} s")
        summaries = {}
        for case, results in cases.items():
            o = statistics.median(result[0] for result in results)
            share = statistics.median(verification_share(result[3]) for result in results)
            by_phase = {phase: round(statistics.median(r[1][phase] for r in results), 3) for phase in results[0][1]}
            label = "steady state, old target published by dpone" if case == "steady" else "first adoption"
            print(f"ours ({label}, {rows} rows): median {o:.2f} s")
            print(f"  ratio ours/sequential baseline: {o / b:.2f}  (aim <= 1.5); ours/parallel baseline: {o / p:.2f}")
            print(f"  ratio ours/floor: {o / f:.2f}  (aim <= 1.3 at 1M rows, <= 1.15 at 10M)")
            print(f"  verification / loading (port-call seconds, summed over members): {share:.0%}  (aim <= 30%)")
            print("  by entry point (wall clock, median s):", by_phase)
            by_category = breakdown(results[-1][3])
            print("  where the time goes (port-call seconds of the last trial, summed over members):")
            for name, value in by_category.items():
                print(f"    {value:7.3f} s  {name}")
            print("  port calls of one publication:", dict(sorted(results[-1][2].items())))
            print("  seconds by port call (last trial):", {k: round(v, 3) for k, v in sorted(results[-1][3].items())})
            print_round_trips(results[-1][4])
            summaries[case] = {
                "ours_s": round(o, 3),
                "ratio_vs_sequential": round(o / b, 3),
                "ratio_vs_parallel": round(o / p, 3),
                "ratio_vs_floor": round(o / f, 3),
                "verification_share_of_loading": round(share, 3),
                "ours_by_entry_point_s": by_phase,
                "ours_by_category_s": by_category,
                "round_trips_by_phase": results[-1][4],
            }
        digests = digest_costs(connection, members[0], database, "base_1")
        print(f"one member, {rows}-row table (median s of 3; a plain load of it is one sequential baseline / members):")
        print("  ", digests)
        return {
            "rows": rows,
            "members": len(members),
            "trials": trials,
            "old_target_rows": rows,
            "baseline_sequential_s": round(b, 3),
            "baseline_parallel_s": round(p, 3),
            "floor_s": round(f, 3),
            **summaries["steady"],
            "first_adoption": summaries["first_adoption"],
            "digest_costs_one_member_s": digests,
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
    finally:
        cluster.stop()


def digest_costs(connection: Any, member: tuple[str, int], database: str, table: str) -> dict[str, float]:
    """Median seconds (3 runs) of each content-digest version, the per-part form of version 2 (``GROUP BY _part``),
    a count and a plain scan of ``table`` on one member: the measurement the digest version was chosen by."""
    from airflow_provider_dpone.cluster.clickhouse import sql_digest
    from airflow_provider_dpone.core.clickhouse.clients import Purpose, build_client, close_client

    statements = {
        "count": f"SELECT count() FROM `{database}`.`{table}`",
        "scan": f"SELECT count(), sum(id), sum(length(name)), count(amount), max(at) FROM `{database}`.`{table}`",
        # the alternative version 2 was chosen over (count + sipHash128 sum; no longer in the product)
        "digest_v1_siphash128": (
            f"SELECT count(), toString(sum(reinterpretAsUInt128(sipHash128(tuple(*))))) FROM `{database}`.`{table}`"
        ),
        "digest_v2_typed_sha256": sql_digest.table_content(database, table, COLUMNS, 2),
        "digest_v2_per_part": sql_digest.part_content(database, table, COLUMNS, 2),
    }
    client = build_client(connection.at(*member), Purpose.READ)
    try:
        runs: dict[str, list[float]] = {name: [] for name in statements}
        for _ in range(3):  # interleaved, so a warmer cache or a busier moment favours no statement
            for name, statement in statements.items():
                started = time.perf_counter()
                client.query(statement)
                runs[name].append(time.perf_counter() - started)
        return {name: round(statistics.median(values), 3) for name, values in runs.items()}
    finally:
        close_client(client)


def run_as_tasks(connection: Any, database: str, store_dir: Path, req: Any, receipt: Any) -> tuple[Counter, Counter]:
    """One publication whose four entry points each run on a fresh adapter set, as four Airflow tasks would (each
    connects its own clients, and the stage task resolves its table first); the port calls and HTTP requests of all
    four."""
    from airflow_provider_dpone.cluster.protocol.service import bound_columns, publication_service

    calls: Counter[str] = Counter()
    http: Counter[str] = Counter()
    undo = count_http(http)
    try:
        for entry in ("fence", "stage", "publish", "cleanup"):
            adapters = adapter_set(connection, database, store_dir)
            counted, _seconds = instrument(adapters)
            try:
                if entry == "stage":  # as the stage operator: the bound columns first, with the task's admission
                    _columns, begun = bound_columns(adapters.ports, req)
                    publication_service(adapters.ports, req, begun=begun).stage(Sealed(receipt))
                else:
                    getattr(publication_service(adapters.ports, req), entry)()
            finally:
                adapters.close()
            calls.update(counted)
    finally:
        undo()
    return calls, http


def round_trips(base: Path) -> None:
    print("round trips of one publication (10,000 rows; sealed artifact bound as stage input; each entry point on its")
    print("own adapter set, as one Airflow task each, the stage task reading the bound columns first as its operator")
    print("does); the old target is empty and created outside dpone (first adoption), or the previous publication's")
    print("(steady state):")
    print("  members  old-target  keeper-ops  keeper-http  cluster-ddl  member-calls  http-total")
    for count in (2, 3, 4):
        cluster = start_cluster(base / f"cluster{count}", count)
        try:
            adapters, _raw, members = attach(cluster, "rt", base / f"rt{count}")
            receipt, _ = seal_artifact(adapters, 10_000)
            on_members(
                adapters.coordinator_connection,
                members,
                f"CREATE TABLE `rt`.`target_1` ({TABLE_DDL}) ENGINE = MergeTree ORDER BY id",
            )
            for case in ("first", "steady"):  # the first publication makes the target the steady state's
                req = request("rt", "target_1", f"rt-{uuid.uuid4().hex}", 1 << 30)
                calls, http = run_as_tasks(adapters.coordinator_connection, "rt", base / f"rt{count}", req, receipt)
                keeper = sum(v for k, v in calls.items() if k.startswith("authority."))
                cas = 2 * calls["authority.compare_and_set"]  # the update, then one read (adapters' authority_store)
                keeper_http = calls["authority.read"] + calls["authority.create"] + cas
                ddl = calls["ddl.dispatch"] + calls["ddl.queue_status"]
                member = sum(v for k, v in calls.items() if k.startswith("member."))
                print(
                    f"  {count:7d}  {case:>10}  {keeper:10d}  {keeper_http:11d}  {ddl:11d}  {member:12d}"
                    f"  {http['http']:10d}"
                )
            adapters.close()
        finally:
            cluster.stop()


def rss(base: Path, sizes: list[int]) -> None:
    cluster = start_cluster(base / "cluster_rss", 2)
    try:
        database = "rss"
        adapters, raw, _members = attach(cluster, database, base / "rss_artifacts")
        adapters.close()
        print("peak RSS of a worker process running the whole operation (extraction included):")
        for rows in sizes:
            result = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--rss-worker",
                    json.dumps(raw),
                    database,
                    str(rows),
                    str(base / "rss_store"),
                ],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                cwd=str(ROOT),
            )
            figures = json.loads(result.stdout.strip().splitlines()[-1])
            growth = figures["peak_mib"] - figures["start_mib"]
            print(
                f"  {rows:>9,d} rows: peak {figures['peak_mib']:.0f} MiB,"
                f" after imports {figures['start_mib']:.0f} MiB, growth {growth:.0f} MiB"
            )
    finally:
        cluster.stop()


def per_row_slopes(runs: list[dict[str, Any]], by: str = "members") -> list[dict[str, Any]]:
    """Per member count (``by``: the runs' key naming it) with two row counts or more: microseconds per row between
    the smallest and the largest run (ours, steady state, and the floor), the fixed cost left at the smallest, and
    the ratio of the two slopes (what each further row costs ours against the floor)."""
    slopes = []
    for members in sorted({run[by] for run in runs}):
        sized = sorted((run for run in runs if run[by] == members), key=lambda run: run["rows"])
        if len(sized) < 2:
            continue
        small, large = sized[0], sized[-1]
        rows = large["rows"] - small["rows"]
        entry: dict[str, Any] = {by: members, "rows": [small["rows"], large["rows"]]}
        for name, key in (("ours", "ours_s"), ("floor", "floor_s")):
            slope = (large[key] - small[key]) / rows
            entry[f"{name}_us_per_row"] = round(slope * 1e6, 3)
            entry[f"{name}_fixed_s"] = round(small[key] - slope * small["rows"], 3)
        if entry["floor_us_per_row"] > 0:
            entry["slope_ratio_vs_floor"] = round(entry["ours_us_per_row"] / entry["floor_us_per_row"], 3)
        slopes.append(entry)
    return slopes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000], help="row counts of the timing runs")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--members", type=int, nargs="+", default=[2], help="member counts of the timing runs")
    parser.add_argument("--rss-rows", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--skip", nargs="*", default=[], choices=["timing", "round-trips", "rss"])
    parser.add_argument("--rss-worker", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help="the request timeline of one steady-state publication")
    args = parser.parse_args(argv)
    if args.rss_worker:
        raw, database, rows, directory = args.rss_worker
        rss_worker(json.loads(raw), database, int(rows), directory)
        return 0
    if args.trace:
        with tempfile.TemporaryDirectory(prefix="dpone-bench-") as tmp:
            for count in args.members:
                trace(Path(tmp), count, args.rows[0])
        return 0
    summary: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="dpone-bench-") as tmp:
        base = Path(tmp)
        if "timing" not in args.skip:
            runs = [timing(base, rows, args.trials, count) for rows in args.rows for count in args.members]
            summary = {**runs[0], "runs": runs, "per_row_slopes": per_row_slopes(runs)}
            print("per-row slope and fixed cost, by members:", summary["per_row_slopes"])
        if "round-trips" not in args.skip:
            round_trips(base)
        if "rss" not in args.skip:
            rss(base, args.rss_rows)
    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
