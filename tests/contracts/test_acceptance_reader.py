"""One contract suite for the bounded acceptance reader (seed 002), run against the in-memory fake AND the real reader
(a worker process per read, over HTTP) on an embedded cluster started with ``internal_replication=true``.

Every case asserts the answer itself: the counts of a table with NULLs and duplicates, real zeros for an empty
table, the UUID read in the same statement, the typed digest equal to the member session's, an unknown table that
cannot be asked, and a read slower than its budget that is interrupted (never an answer). The embedded cluster's
fault hook delays the aggregate statement's response inside the member's engine; the fake advances its clock.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_dpone.contracts.quality_read import ColumnCounts, TargetReadPlan
from airflow_provider_dpone.ports.publication import ColumnSpec, MemberSession, TableSpec, UnavailableError
from airflow_provider_dpone.ports.quality import AcceptanceReader, ReadIncompleteError
from tests.adapters.port_backends import EmbeddedBackend, FakeBackend, PortBackend, Row, open_backend

pytestmark = pytest.mark.embedded_cluster(members=2, internal_replication=True)

COLUMNS = (("id", "UInt64"), ("s", "Nullable(String)"))
SPEC = TableSpec(columns=tuple(ColumnSpec(name=n, type=t) for n, t in COLUMNS), order_by=("id",))
ROWS: tuple[Row, ...] = ((1, "a"), (2, None), (3, "a"), (4, None), (5, "b"))
ALL = ("row_count", "null_count", "distinct_count")


@pytest.fixture(params=["fake", "embedded"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PortBackend]:
    instance = open_backend(request.param, request, tmp_path, internal_replication=True)
    try:
        yield instance
    finally:
        instance.close()


def reader(backend: PortBackend) -> AcceptanceReader:
    assert backend.ports.acceptance is not None
    return backend.ports.acceptance


def session(backend: PortBackend, member_id: str) -> MemberSession:
    return backend.ports.sessions.session(backend.inventory.member(member_id))


def table_with(backend: PortBackend, member_id: str, rows: tuple[Row, ...], name: str = "accepted") -> str:
    value = str(uuid.uuid4())
    session(backend, member_id).create_table(backend.database, name, value, SPEC)
    receipt = backend.seal(COLUMNS, rows)
    session(backend, member_id).load(
        backend.database,
        name,
        value,
        backend.ports.artifacts.open(receipt),
        query_id=f"dpone-load-{uuid.uuid4().hex}",
        dedup_token="t",
    )
    return value


def plan(
    backend: PortBackend, generation: str, metrics: tuple[str, ...] = ALL, name: str = "accepted"
) -> TargetReadPlan:
    columns = ("id", "s") if set(metrics) - {"row_count"} else ()
    return TargetReadPlan.model_validate(
        {
            "database": backend.database,
            "table": name,
            "generation_uuid": generation,
            "metrics": metrics,
            "columns": columns,
        }
    )


def slow_reads(backend: PortBackend, member_id: str, seconds: float) -> None:
    if isinstance(backend, FakeBackend):
        backend.world.acceptance.slow_ms[member_id] = int(seconds * 1000)
    else:
        assert isinstance(backend, EmbeddedBackend)
        backend.embedded.faults.delay_response(backend.process_of(member_id), seconds, match="uniqExact|countIf|count")


def test_counts_of_nulls_and_duplicates_on_one_member(backend: PortBackend) -> None:
    member_id = backend.inventory.member_ids[0]
    generation = table_with(backend, member_id, ROWS)
    request = plan(backend, generation)
    counts = reader(backend).observe(backend.inventory.member(member_id), request, budget_ms=30_000)
    assert counts.answers(request) and counts.generation_uuid == generation and counts.row_count == len(ROWS)
    assert counts.columns == (
        ColumnCounts(name="id", null_count=0, distinct_count=5),
        ColumnCounts(name="s", null_count=2, distinct_count=2),
    )
    observed = session(backend, member_id).observe_table(backend.database, "accepted", with_content=True)
    assert counts.content_digest == observed.content_digest


def test_an_empty_table_answers_real_zeros(backend: PortBackend) -> None:
    member_id = backend.inventory.member_ids[1]
    generation = table_with(backend, member_id, ())
    counts = reader(backend).observe(backend.inventory.member(member_id), plan(backend, generation), budget_ms=30_000)
    assert counts.row_count == 0
    assert [(c.null_count, c.distinct_count) for c in counts.columns] == [(0, 0), (0, 0)]
    assert all(type(c.null_count) is int and type(c.distinct_count) is int for c in counts.columns)
    observed = session(backend, member_id).observe_table(backend.database, "accepted", with_content=True)
    assert counts.content_digest == observed.content_digest


def test_row_count_only_selects_no_column(backend: PortBackend) -> None:
    member_id = backend.inventory.member_ids[0]
    generation = table_with(backend, member_id, ROWS)
    request = plan(backend, generation, ("row_count",))
    counts = reader(backend).observe(backend.inventory.member(member_id), request, budget_ms=30_000)
    assert counts.row_count == len(ROWS) and counts.columns == () and counts.answers(request)


def test_an_unknown_table_cannot_be_asked(backend: PortBackend) -> None:
    member_id = backend.inventory.member_ids[0]
    with pytest.raises(UnavailableError):
        reader(backend).observe(
            backend.inventory.member(member_id), plan(backend, str(uuid.uuid4()), name="absent"), budget_ms=30_000
        )


def test_a_read_slower_than_its_budget_is_interrupted(backend: PortBackend) -> None:
    member_id = backend.inventory.member_ids[0]
    generation = table_with(backend, member_id, ROWS)
    slow_reads(backend, member_id, 8.0)
    started = time.monotonic()
    with pytest.raises(ReadIncompleteError):
        reader(backend).observe(backend.inventory.member(member_id), plan(backend, generation), budget_ms=1_500)
    assert time.monotonic() - started < 6.0  # the worker was killed at the deadline, not waited for
