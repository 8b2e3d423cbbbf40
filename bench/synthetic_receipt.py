"""The local synthetic fault profile of seed 000 ("Measurable differentiation") and its receipt.

On a two-member embedded cluster (real ClickHouse engines behind HTTP, emulated ``ON CLUSTER`` queue, in-process
KeeperMap) the external publication service runs on the real adapters through one scenario per fault: a lost first
load response, a refused load, a lost ``EXCHANGE`` response, a lost cleanup ``DROP`` response, and a replay after
completion. Each failing call is retried as Airflow would (a new try: fresh adapters, same operation). Every member
is then read directly: duplicate rows (rows minus distinct ids), members whose content is not the artifact's
(divergent), and success reported while either is non-zero (false success). Beside it, the naive baseline: the same
rows inserted into every member's table, the first response lost, the insert retried.

The receipt (``scope: local_synthetic``, ``live_certification: UNVERIFIED``) binds the commit and a digest of the
fixture configuration. Local synthetic evidence does not certify networks, grants, queue retention, server patches
or production performance (see docs/limitations.md).

    .venv/bin/python bench/synthetic_receipt.py [--rows 20000] [--out test_artifacts/...]      # or: make synthetic-receipt
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from external_publication import COLUMNS, ROOT, TABLE_DDL, provision, request, resolved, source_query  # noqa: E402

DEFAULT_OUT = ROOT / "test_artifacts" / "clickhouse-external-publication" / "synthetic-receipt.json"
SCHEMA = "dpone.clickhouse.cluster-external-synthetic-receipt.v1"
TARGET = "target_table"


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _member_facts(cluster: Any, database: str, expected: tuple[int, int]) -> list[dict[str, Any]]:
    """Per member, read directly: rows, duplicate rows, and whether the content is exactly the expected multiset."""
    facts = []
    for member in cluster.members:
        client = cluster.client(member)
        try:
            rows, ids, digest = client.query(
                f"SELECT count(), uniqExact(id), sum(reinterpretAsUInt128(sipHash128(tuple(*))))"
                f" FROM `{database}`.`{TARGET}`"
            ).result_rows[0]
        finally:
            client.close()
        facts.append(
            {"rows": int(rows), "duplicates": int(rows) - int(ids), "exact": (int(rows), int(digest)) == expected}
        )
    return facts


def _expected(cluster: Any, rows: int) -> tuple[int, int]:
    client = cluster.client()
    try:
        count, digest = client.query(
            f"SELECT count(), sum(reinterpretAsUInt128(sipHash128(tuple(*)))) FROM ({source_query(rows)})"
        ).result_rows[0]
    finally:
        client.close()
    return int(count), int(digest)


def _counts(name: str, fault: str, outcome: str, facts: list[dict[str, Any]]) -> dict[str, Any]:
    duplicates = sum(fact["duplicates"] for fact in facts)
    divergent = sum(not fact["exact"] for fact in facts)
    succeeded = outcome == "completed"
    return {
        "name": name,
        "fault": fault,
        "outcome": outcome,
        "duplicate_rows": duplicates,
        "divergent_members": divergent,
        "false_successes": int(succeeded and (duplicates > 0 or divergent > 0)),
    }


def _adapters(cluster: Any, database: str, store: Path) -> Any:
    """The real adapter set of one task try: a fresh one-shot guard, as a new worker process has."""
    from airflow.sdk import ObjectStoragePath

    from airflow_provider_dpone.cluster.clickhouse.adapter_set import adapters_for
    from airflow_provider_dpone.cluster.clickhouse.artifact_store import ObjectStorageArtifactStore
    from airflow_provider_dpone.cluster.clickhouse.oneshot import MutationGuard

    return adapters_for(
        resolved(cluster.connection_json(database), database),
        database=database,
        store=ObjectStorageArtifactStore(ObjectStoragePath(f"file://{store}")),
        guard=MutationGuard(),
        ddl_task_timeout_seconds=10,
    )


def _ours(cluster: Any, store: Path, database: str, rows: int, run_id: str) -> str:
    """One operation of the service; a step failing with a retryable code is tried again (at most three tries)."""
    from airflow_provider_dpone.cluster.protocol.results import Committed, Completed
    from airflow_provider_dpone.cluster.protocol.service import publication_service
    from airflow_provider_dpone.core.errors import REGISTRY, DponeError

    req = request(database, TARGET, run_id, 1 << 30)
    for step in ("fence", "stage", "publish", "cleanup"):
        for attempt in range(3):
            adapters = _adapters(cluster, database, store)
            try:
                service = publication_service(adapters.ports, req)
                if step == "fence":
                    service.fence()
                elif step == "stage":
                    source = adapters.query_source(query=source_query(rows), columns=COLUMNS, max_source_bytes=1 << 30)
                    service.stage(source)
                elif step == "publish":
                    while not isinstance(service.publish(), Committed):
                        pass
                else:
                    while not isinstance(service.cleanup(), Completed):
                        pass
                break
            except DponeError as error:
                entry = REGISTRY.get(error.code)
                if entry is None or not entry.retryable or attempt == 2:
                    return f"failed:{error.code}"
            finally:
                adapters.close()
    return "completed"


def _naive(cluster: Any, database: str, rows: int) -> str:
    """Insert the rows into every member's table; on a lost response, insert again (what a plain retry does)."""
    cluster.faults.lose_response(cluster.members[0].name, match="^INSERT INTO")
    for member in cluster.members:
        client = cluster.client(member)
        try:
            statement = f"INSERT INTO `{database}`.`{TARGET}` {source_query(rows)}"
            try:
                client.command(statement)
            except Exception:  # noqa: BLE001 -- the lost response: retry once, as a naive loader does
                client.close()
                client = cluster.client(member)
                client.command(statement)
        finally:
            client.close()
    return "completed"


SCENARIOS: tuple[tuple[str, str, bool, Callable[[Any], None]], ...] = (
    # name, fault, existing target first, arm
    (
        "lost_first_load_response",
        "member1 INSERT response lost",
        False,
        lambda c: c.faults.lose_response(c.members[0].name, match="^INSERT INTO"),
    ),
    (
        "refused_load",
        "member2 INSERT refused (Code 243)",
        False,
        lambda c: c.faults.fail_next_statement(c.members[1].name, 243, match="^INSERT INTO"),
    ),
    (
        "lost_exchange_response",
        "coordinator EXCHANGE response lost",
        True,
        lambda c: c.faults.lose_response("coordinator", match="^EXCHANGE TABLES"),
    ),
    (
        "lost_cleanup_response",
        "coordinator DROP response lost",
        True,
        lambda c: c.faults.lose_response("coordinator", match="^DROP TABLE"),
    ),
    ("replay_after_completion", "the completed operation run again", True, lambda c: None),
)


def produce(rows: int, out: Path) -> dict[str, Any]:
    """Run the profile on a fresh embedded cluster and write the receipt to ``out``; return it."""
    from dpone_embedded import EmbeddedCluster

    from airflow_provider_dpone.core.canonical import canonical_json

    fixture = {
        "members": 2,
        "internal_replication": False,
        "rows": rows,
        "columns": [list(column) for column in COLUMNS],
        "scenarios": [name for name, *_ in SCENARIOS],
        "baseline": "naive_retry_lost_first_load_response",
        "retries_per_step": 2,
    }
    with tempfile.TemporaryDirectory() as temporary, EmbeddedCluster.start(Path(temporary) / "cluster", 2) as cluster:
        base = Path(temporary)
        endpoints = [(e.host, e.port) for e in cluster.endpoints]
        expected = _expected(cluster, rows)
        results = []
        for index, (name, fault, existing, arm) in enumerate(SCENARIOS):
            database = f"synthetic_{index}"
            provision(resolved(cluster.connection_json(database), database), endpoints, database)
            if existing:
                _ours(cluster, base / "artifacts", database, rows, "previous")
            if name == "replay_after_completion":
                _ours(cluster, base / "artifacts", database, rows, name)
            arm(cluster)
            outcome = _ours(cluster, base / "artifacts", database, rows, name)
            # an armed fault that never fired tested nothing; the replay arms none
            fired = None if name == "replay_after_completion" else not cluster.faults.armed()
            cluster.faults.reset()
            counts = _counts(name, fault, outcome, _member_facts(cluster, database, expected))
            results.append({**counts, "fault_fired": fired})
        database = "synthetic_naive"
        provision(resolved(cluster.connection_json(database), database), endpoints, database)
        for member in cluster.members:
            client = cluster.client(member)
            try:
                client.command(f"CREATE TABLE `{database}`.`{TARGET}` ({TABLE_DDL}) ENGINE = MergeTree ORDER BY id")
            finally:
                client.close()
        outcome = _naive(cluster, database, rows)
        fired = not cluster.faults.armed()
        cluster.faults.reset()
        fact = _counts(
            "naive_retry_lost_first_load_response",
            "member1 INSERT response lost",
            outcome,
            _member_facts(cluster, database, expected),
        )
        engine = cluster.client()
        try:
            version = str(engine.command("SELECT version()"))
        finally:
            engine.close()
    receipt = {
        "schema": SCHEMA,
        "scope": "local_synthetic",
        "live_certification": "UNVERIFIED",
        "commit": _git("rev-parse", "HEAD"),
        "worktree_clean": _git("status", "--porcelain") == "",
        "engine_version": version,
        "fixture": fixture,
        "fixture_sha256": hashlib.sha256(canonical_json(fixture).encode()).hexdigest(),
        "scenarios": results,
        "baseline": [{**fact, "fault_fired": fired}],
        "totals": {
            key: sum(result[key] for result in results)
            for key in ("duplicate_rows", "false_successes", "divergent_members")
        },
        "limitations": "local synthetic evidence; does not certify external networks, grants, queue retention, "
        "server patches or production workload performance",
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(receipt, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return receipt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    receipt = produce(args.rows, args.out)
    print(json.dumps({"out": str(args.out), "totals": receipt["totals"], "baseline": receipt["baseline"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
