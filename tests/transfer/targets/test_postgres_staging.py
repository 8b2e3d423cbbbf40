"""PostgreSQL staging: one chunk is read where it lies, never by scanning all of staging, at a cost that does not
grow with staging, and publication leaves nothing of staging behind.

The staging index is a B-tree over the chunk ordinal. These tests load several chunks of variable-length rows (COPY
then also puts rows into earlier pages that still have room), and observe the server's own account of each chunk
read (``EXPLAIN (ANALYZE, BUFFERS)``): the heap pages it visited stay close to the chunk's own pages, whichever chunk
is read, and the index pages a lookup touches stay the same however many chunks were loaded before it. The published
table carries no staging column, index or storage parameter.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pyarrow as pa
import pytest

import tests.transfer.targets.test_target_contract as contract
from airflow_provider_dpone.transfer.targets.postgres import statements as sql
from airflow_provider_dpone.transfer.targets.postgres.digest import chunk_digest
from airflow_provider_dpone.transfer.values.target import CHUNK_COLUMN, TargetPlan
from tests.support.fixtures.postgres import PostgresServer
from tests.support.fixtures.target_harness import PostgresHarness

pytestmark = pytest.mark.contract

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


def _plan_nodes(conn: psycopg.Connection[Any], query: str) -> list[dict[str, Any]]:
    """Every node of the executed plan of ``query`` read through the staging index, with its buffer counts."""
    conn.execute(sql.READ_BY_INDEX)
    (report,) = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {query}").fetchone()  # type: ignore[misc]
    nodes, stack = [], [(report if isinstance(report, list) else json.loads(report))[0]["Plan"]]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.get("Plans", []))
    return nodes


def _visited(conn: psycopg.Connection[Any], query: str) -> tuple[int, str]:
    """Heap pages one read visited and the plan's node types, as the server reports them."""
    nodes = _plan_nodes(conn, query)
    pages = sum(int(node.get("Exact Heap Blocks", 0)) + int(node.get("Lossy Heap Blocks", 0)) for node in nodes)
    return pages, " / ".join(node["Node Type"] for node in nodes)


def _buffers(node: dict[str, Any]) -> int:
    return int(node["Shared Hit Blocks"]) + int(node["Shared Read Blocks"])


def _index_pages(conn: psycopg.Connection[Any], query: str) -> int:
    """Index pages the lookup's index node touched (a node's counts include its children's: subtract them)."""
    return sum(
        _buffers(node) - sum(_buffers(child) for child in node.get("Plans", []))
        for node in _plan_nodes(conn, query)
        if "Index" in node["Node Type"]
    )


def test_reading_one_chunk_visits_about_its_own_pages(pg: PostgresHarness) -> None:
    plan, _ = _loaded(pg)
    staging = sql.qualified(plan.target_schema, plan.staging_table)
    with psycopg.connect(pg.dsn, autocommit=False) as conn:
        (total,) = conn.execute(f"SELECT pg_relation_size('{staging}') / current_setting('block_size')::int").fetchone()  # type: ignore[misc]
        per_chunk = total / CHUNKS
        for ordinal in range(CHUNKS):
            for query in (
                sql.copy_out_chunk(plan, ordinal).removeprefix("COPY (").removesuffix(") TO STDOUT (FORMAT BINARY)"),
                chunk_digest(plan, ordinal),
            ):
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


def test_a_lookup_costs_the_same_however_much_is_staged(pg: PostgresHarness) -> None:
    """The already-loaded check of a new ordinal, and the read of the first chunk, touch as many index pages with 40
    chunks staged as with 2 (a BRIN reads its whole index on every lookup: these grew with staging)."""
    target = pg.bind()
    invocation = contract.full()
    plan = target.plan(invocation)
    target.prepare(invocation)
    base = contract.chunk(contract.rows_for(2000))
    block = pa.concat_tables([base] * 10)  # 20,000 rows per chunk
    present = sql.chunk_present(plan)
    first = chunk_digest(plan, 0)

    def costs(loaded: int) -> tuple[int, int]:
        with psycopg.connect(pg.dsn, autocommit=False) as conn:
            return _index_pages(conn, present.replace("%s", str(loaded + 1))), _index_pages(conn, first)

    for ordinal in range(2):
        target.load_chunk(invocation, ordinal, block)
    small = costs(2)
    for ordinal in range(2, 40):
        target.load_chunk(invocation, ordinal, block)
    large = costs(40)
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        staged = conn.execute(sql.chunk_counts(plan)).fetchall()
    assert len(staged) == 40 and {count for _, count in staged} == {20_000}
    assert large[0] <= small[0] + 1 and large[1] <= small[1] + 1, (small, large)
