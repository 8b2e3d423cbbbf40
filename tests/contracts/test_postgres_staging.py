"""PostgreSQL staging: one chunk is read where it lies, never by scanning all of staging, and publication leaves
nothing of staging behind.

The staging index is a BRIN over the chunk ordinal, one page per range, summarized by each load in its transaction.
These tests load several chunks of variable-length rows (COPY then also puts rows into earlier pages that still have
room), and observe the server's own account of each chunk read (``EXPLAIN ANALYZE``): the heap pages it visited stay
close to the chunk's own pages, whichever chunk is read, and however many were loaded before it. The published table
carries no staging column, index or storage parameter.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

import tests.contracts.test_target_contract as contract
from airflow_provider_dpone.adapters.postgres import statements as sql
from airflow_provider_dpone.adapters.postgres.digest import chunk_digest, readback_chunk
from airflow_provider_dpone.contracts.transfer_target import CHUNK_COLUMN, TargetPlan
from tests.fixtures.postgres import PostgresServer
from tests.fixtures.target_harness import PostgresHarness

CHUNKS = 6
ROWS = 4000


@pytest.fixture
def pg(postgres_server: PostgresServer) -> Any:
    made = PostgresHarness(postgres_server.dsn)
    try:
        yield made
    finally:
        made.close()


def _loaded(pg: PostgresHarness) -> tuple[TargetPlan, list[Any]]:
    target = pg.bind()
    invocation = contract.full()
    plan = target.plan(invocation)
    expected = contract.stage(
        pg, invocation, [contract.rows_for(ROWS, start=ordinal * ROWS) for ordinal in range(CHUNKS)]
    )
    return plan, expected


def _visited(conn: psycopg.Connection[Any], query: str) -> tuple[int, str]:
    """Heap pages one read visited and the plan's node types, as the server reports them."""
    conn.execute(sql.READ_BY_INDEX)
    (report,) = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {query}").fetchone()  # type: ignore[misc]
    plan = (report if isinstance(report, list) else json.loads(report))[0]["Plan"]
    nodes, pages, stack = [], 0, [plan]
    while stack:
        node = stack.pop()
        nodes.append(node["Node Type"])
        pages += int(node.get("Exact Heap Blocks", 0)) + int(node.get("Lossy Heap Blocks", 0))
        stack.extend(node.get("Plans", []))
    return pages, " / ".join(nodes)


def test_reading_one_chunk_visits_about_its_own_pages(pg: PostgresHarness) -> None:
    plan, _ = _loaded(pg)
    staging = sql.qualified(plan.target_schema, plan.staging_table)
    with psycopg.connect(pg.dsn, autocommit=False) as conn:
        (total,) = conn.execute(f"SELECT pg_relation_size('{staging}') / current_setting('block_size')::int").fetchone()  # type: ignore[misc]
        per_chunk = total / CHUNKS
        for ordinal in range(CHUNKS):
            for query in (readback_chunk(plan).replace("$1", str(ordinal)), chunk_digest(plan, ordinal)):
                pages, nodes = _visited(conn, query)
                assert "Seq Scan" not in nodes, nodes
                assert 0.5 * per_chunk <= pages <= 1.5 * per_chunk + 8, (ordinal, pages, total)
            present = sql.chunk_present(plan).replace("%s", str(CHUNKS + 3))
            pages, nodes = _visited(conn, present)
            assert "Seq Scan" not in nodes and pages <= 8, (pages, nodes)
            conn.rollback()


def test_the_published_table_keeps_nothing_of_staging(pg: PostgresHarness) -> None:
    plan, expected = _loaded(pg)
    pg.bind().publish(contract.full(), expected)
    target = sql.qualified(plan.target_schema, plan.target_table)
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        options = conn.execute("SELECT reloptions FROM pg_class WHERE oid = %s::regclass", (target,)).fetchone()
        indexes = conn.execute("SELECT count(*) FROM pg_index WHERE indrelid = %s::regclass", (target,)).fetchone()
        columns = [row[0] for row in conn.execute(f"SELECT * FROM {target} LIMIT 0").description or []]
        (count,) = conn.execute(f"SELECT count(*) FROM {target}").fetchone()  # type: ignore[misc]
    assert options == (None,) and indexes == (0,)
    assert CHUNK_COLUMN not in columns and sql.ROW_COLUMN not in columns
    assert count == CHUNKS * ROWS
