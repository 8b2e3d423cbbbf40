"""One contract suite for the bounded acceptance reader (seed 002), run against the in-memory fake AND the real reader
(one worker process per observation, over HTTP) on an embedded cluster started with ``internal_replication=true``
and, opt-in (``real_cluster``), on the compose cluster's ``dpone_cluster_replicated``.

Every case asserts the answer itself: the guard facts of every replica of a ``ReplicatedMergeTree`` table (UUID,
columns, parts digest equal to the member session's, one Keeper path, writable), the content digest exactly where
the parts differ from the verified ones, the counts of a table with NULLs and duplicates, real zeros for an empty
table, an unknown table that cannot be asked, and an observation slower than its budget that is interrupted (never
an answer). The embedded cluster's fault hook delays the aggregate statement's response inside the member's engine;
the fake advances its clock.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_dpone.cluster.ports import (
    ColumnSpec,
    CreateReplicatedTable,
    DispatchSettings,
    MemberSession,
    ReadIncompleteError,
    TableRead,
    TableSpec,
)
from airflow_provider_dpone.cluster.values.quality_read import ColumnCounts, Observation, ReplicaRead, TargetReadPlan
from airflow_provider_dpone.cluster.values.receipts import CURRENT_CONTENT_DIGEST
from airflow_provider_dpone.core.errors import UnavailableError
from tests.support.cluster.port_backends import (
    BACKENDS,
    ONLY_THE_DOUBLE,
    EmbeddedBackend,
    FakeBackend,
    PortBackend,
    RealBackend,
    Row,
    open_backend,
)

pytestmark = [pytest.mark.contract, pytest.mark.embedded_cluster(members=2, internal_replication=True)]

COLUMNS = (("id", "UInt64"), ("s", "Nullable(String)"))
SPEC = TableSpec(
    columns=tuple(ColumnSpec(name=n, type=t) for n, t in COLUMNS), engine="ReplicatedMergeTree", order_by=("id",)
)
ROWS: tuple[Row, ...] = ((1, "a"), (2, None), (3, "a"), (4, None), (5, "b"))
ALL = ("row_count", "null_count", "distinct_count")
SYNC_SECONDS = 10.0


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PortBackend]:
    instance = open_backend(request.param, request, tmp_path, internal_replication=True)
    try:
        yield instance
    finally:
        instance.close()


def session(backend: PortBackend, member_id: str) -> MemberSession:
    return backend.ports.sessions.session(backend.inventory.member(member_id))


def replicated_with(backend: PortBackend, rows: tuple[Row, ...], name: str = "accepted") -> str:
    """A replicated table ON CLUSTER holding ``rows`` on every replica (loaded once, through the first)."""
    value = str(uuid.uuid4())
    token = uuid.uuid4().hex
    settings = DispatchSettings(
        correlation_token=token, query_digest="d" * 64, log_comment='{"dpone":"contract","token":"' + token + '"}'
    )
    intent = CreateReplicatedTable(
        cluster=backend.cluster, database=backend.database, table=name, uuid=value, spec=SPEC
    )
    assert not backend.ports.ddl.dispatch(backend.inventory, intent, settings).failed
    first = backend.inventory.member_ids[0]
    receipt = backend.seal(COLUMNS, rows)
    session(backend, first).load(
        backend.database,
        name,
        value,
        backend.ports.artifacts.open(receipt),
        query_id=f"dpone-load-{uuid.uuid4().hex}",
        dedup_token=uuid.uuid4().hex,
    )
    for member_id in backend.inventory.member_ids:
        assert session(backend, member_id).sync_replica(backend.database, name, timeout_seconds=SYNC_SECONDS)
    return value


def observe(backend: PortBackend, plan: TargetReadPlan, budget_ms: int = 30_000) -> Observation:
    assert backend.ports.acceptance is not None
    members = tuple(backend.inventory.member(member_id) for member_id in plan.member_ids)
    return backend.ports.acceptance.observe(members, plan, budget_ms=budget_ms)


def plan(
    backend: PortBackend,
    generation: str,
    *,
    metrics: tuple[str, ...] = ALL,
    guard: tuple[ReplicaRead, ...] = (),
    scan: bool = True,
    name: str = "accepted",
) -> TargetReadPlan:
    columns = ("id", "s") if scan and set(metrics) - {"row_count"} else ()
    return TargetReadPlan.model_validate(
        {
            "database": backend.database,
            "table": name,
            "generation_uuid": generation,
            "guard": guard,
            "scan": backend.inventory.member_ids[0] if scan else None,
            "metrics": metrics if scan else (),
            "columns": columns,
            "digest_version": CURRENT_CONTENT_DIGEST,
            "schema_columns": COLUMNS if scan else (),
        }
    )


def slow_scans(backend: PortBackend, member_id: str, seconds: float) -> None:
    if isinstance(backend, FakeBackend):
        backend.world.acceptance.slow_ms[member_id] = int(seconds * 1000)
    elif isinstance(backend, RealBackend):
        pytest.skip(ONLY_THE_DOUBLE.format(what="slow one statement's response down inside a member"))
    else:
        assert isinstance(backend, EmbeddedBackend)
        backend.embedded.faults.delay_response(backend.process_of(member_id), seconds, match="uniqExact")


def test_counts_of_nulls_and_duplicates_on_one_replica_between_guard_facts_of_every_replica(
    backend: PortBackend,
) -> None:
    generation = replicated_with(backend, ROWS)
    verified = {
        mid: session(backend, mid).observe_table(
            TableRead(backend.database, "accepted", with_content=False, with_parts=True)
        )
        for mid in backend.inventory.member_ids
    }
    guard = tuple(ReplicaRead(member_id=mid, verified_parts=obs.parts_digest) for mid, obs in verified.items())
    request = plan(backend, generation, guard=guard)
    observation = observe(backend, request)
    assert observation.answers(request)
    counts = observation.counts
    assert counts is not None and counts.generation_uuid == generation and counts.row_count == len(ROWS)
    assert counts.columns == (
        ColumnCounts(name="id", null_count=0, distinct_count=5),
        ColumnCounts(name="s", null_count=2, distinct_count=2),
    )
    digest = session(backend, backend.inventory.member_ids[0]).observe_table(
        TableRead(backend.database, "accepted", with_content=True)
    )
    assert counts.content_digest == digest.content_digest
    for facts in (observation.before, observation.after):
        assert [fact.uuid for fact in facts] == [generation] * 2 and {fact.columns for fact in facts} == {COLUMNS}
        assert [fact.parts_digest for fact in facts] == [verified[mid].parts_digest for mid in verified]
        assert all(fact.content_digest is None for fact in facts)  # parts as verified: no digest needed
        assert len({fact.zookeeper_path for fact in facts}) == 1 and {fact.readonly for fact in facts} == {False}


def test_the_scan_and_a_changed_replica_are_digested_with_the_plans_digest_version(backend: PortBackend) -> None:
    """Both the count's digest and the guard's re-digest of a replica whose parts differ equal the member session's
    digest of the plan's version."""
    generation = replicated_with(backend, ROWS)
    first = backend.inventory.member_ids[0]
    request = plan(backend, generation, guard=(ReplicaRead(member_id=first, verified_parts="0" * 64),))
    observation = observe(backend, request)
    expected = (
        session(backend, first).observe_table(TableRead(backend.database, "accepted", with_content=True)).content_digest
    )
    assert observation.counts is not None and observation.counts.content_digest == expected
    assert [fact.content_digest for fact in observation.before] == [expected]


def test_a_replica_whose_parts_differ_from_the_verified_ones_is_digested(backend: PortBackend) -> None:
    generation = replicated_with(backend, ROWS)
    first, second = backend.inventory.member_ids
    guard = (ReplicaRead(member_id=first, verified_parts="0" * 64), ReplicaRead(member_id=second))
    observation = observe(backend, plan(backend, generation, guard=guard, scan=False))
    digest = (
        session(backend, first).observe_table(TableRead(backend.database, "accepted", with_content=True)).content_digest
    )
    assert [fact.content_digest for fact in observation.before] == [digest, digest]
    assert observation.counts is None and observation.after == ()


def test_an_empty_table_answers_real_zeros(backend: PortBackend) -> None:
    generation = replicated_with(backend, ())
    counts = observe(backend, plan(backend, generation)).counts
    assert counts is not None and counts.row_count == 0
    assert [(c.null_count, c.distinct_count) for c in counts.columns] == [(0, 0), (0, 0)]
    assert all(type(c.null_count) is int and type(c.distinct_count) is int for c in counts.columns)


def test_row_count_only_selects_no_column(backend: PortBackend) -> None:
    generation = replicated_with(backend, ROWS)
    request = plan(backend, generation, metrics=("row_count",))
    counts = observe(backend, request).counts
    assert counts is not None and counts.row_count == len(ROWS) and counts.columns == ()


def test_an_absent_table_is_a_fact_and_cannot_be_counted(backend: PortBackend) -> None:
    first = backend.inventory.member_ids[0]
    absent = plan(backend, str(uuid.uuid4()), guard=(ReplicaRead(member_id=first),), scan=False, name="absent")
    assert [fact.exists for fact in observe(backend, absent).before] == [False]
    with pytest.raises(UnavailableError):
        observe(backend, plan(backend, str(uuid.uuid4()), name="absent"))


def test_an_observation_slower_than_its_budget_is_interrupted(backend: PortBackend) -> None:
    generation = replicated_with(backend, ROWS)
    slow_scans(backend, backend.inventory.member_ids[0], 8.0)
    guard = tuple(ReplicaRead(member_id=mid) for mid in backend.inventory.member_ids)
    started = time.monotonic()
    with pytest.raises(ReadIncompleteError):
        observe(backend, plan(backend, generation, guard=guard), budget_ms=2_500)
    assert time.monotonic() - started < 6.0  # the worker was killed at the deadline, not waited for
