"""Contract cases of the internal (replicated) route's ports: ``CreateReplicatedTable`` ON CLUSTER,
``MemberSession.replica_status`` and ``MemberSession.sync_replica``, run against the in-memory fakes AND the real
adapters on an embedded cluster with ``internal_replication=true``.

This is its own module because the embedded cluster's shape is chosen per module (``test_publication_ports.py`` runs
on an ``internal_replication=false`` cluster). The embedded cluster emulates ``Replicated*MergeTree``
replication between its member engines (``docs/embedded-cluster.md``), so every case runs on both sides.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.cluster.clickhouse.adapter_set import MemberEndpoints
from airflow_provider_dpone.cluster.clickhouse.member_session import SYNC_READ_MARGIN_SECONDS, ClickHouseMemberSessions
from airflow_provider_dpone.cluster.ports import (
    ColumnSpec,
    CreateReplicatedTable,
    DispatchSettings,
    DropTable,
    HostDdlState,
    MemberSession,
    TableRead,
    TableSpec,
)
from airflow_provider_dpone.core.errors import OutcomeUnknownError, UnavailableError
from tests.support.cluster.port_backends import BACKENDS, EmbeddedBackend, PortBackend, Row, open_backend

pytestmark = [pytest.mark.contract, pytest.mark.embedded_cluster(members=2, internal_replication=True)]

COLUMNS = (("id", "UInt64"), ("s", "Nullable(String)"))
SPEC = TableSpec(
    columns=tuple(ColumnSpec(name=n, type=t) for n, t in COLUMNS), engine="ReplicatedMergeTree", order_by=("id",)
)
ROWS: tuple[Row, ...] = ((1, "a"), (2, None), (3, "c"))
SYNC_SECONDS = 10.0


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PortBackend]:
    instance = open_backend(request.param, request, tmp_path, internal_replication=True)
    try:
        yield instance
    finally:
        instance.close()


@pytest.fixture
def replicated(backend: PortBackend, request: pytest.FixtureRequest) -> PortBackend:
    """The backend of a case that needs ``Replicated*MergeTree`` (both sides have it)."""
    return backend


def settings() -> DispatchSettings:
    token = uuid.uuid4().hex
    return DispatchSettings(
        correlation_token=token, query_digest="d" * 64, log_comment='{"dpone":"contract","token":"' + token + '"}'
    )


def session(backend: PortBackend, member_id: str) -> MemberSession:
    return backend.ports.sessions.session(backend.inventory.member(member_id))


def members(backend: PortBackend) -> list[str]:
    return list(backend.inventory.member_ids)


def create_replicated(backend: PortBackend, name: str = "cand") -> str:
    value = str(uuid.uuid4())
    intent = CreateReplicatedTable(
        cluster=backend.cluster, database=backend.database, table=name, uuid=value, spec=SPEC
    )
    outcome = backend.ports.ddl.dispatch(backend.inventory, intent, settings())
    assert sorted(outcome.finished) == members(backend) and not outcome.failed
    return value


def load(backend: PortBackend, member_id: str, table_uuid: str, rows: tuple[Row, ...], token: str) -> None:
    receipt = backend.seal(COLUMNS, rows)
    session(backend, member_id).load(
        backend.database,
        "cand",
        table_uuid,
        backend.ports.artifacts.open(receipt),
        query_id=f"dpone-load-{uuid.uuid4().hex}",
        dedup_token=token,
    )


def test_the_inventory_reports_internal_replication(backend: PortBackend) -> None:
    rows = backend.ports.catalog.inventory(backend.cluster)
    assert {row.internal_replication for row in rows} == {True} and len(rows) == 2


def test_replica_status_is_none_for_an_absent_or_a_non_replicated_table(backend: PortBackend) -> None:
    first = members(backend)[0]
    assert session(backend, first).replica_status(backend.database, "absent") is None
    plain = TableSpec(columns=SPEC.columns, order_by=("id",))
    session(backend, first).create_table(backend.database, "plain", str(uuid.uuid4()), plain)
    assert session(backend, first).replica_status(backend.database, "plain") is None


def test_sync_replica_of_a_table_that_is_not_replicated_cannot_be_answered(backend: PortBackend) -> None:
    with pytest.raises(UnavailableError):
        session(backend, members(backend)[0]).sync_replica(backend.database, "absent", timeout_seconds=1)


def test_create_on_cluster_registers_one_replica_per_member_under_one_path(replicated: PortBackend) -> None:
    backend = replicated
    value = create_replicated(backend)
    statuses = []
    for member_id in members(backend):
        observed = session(backend, member_id).observe_table(TableRead(backend.database, "cand", with_content=True))
        assert (observed.uuid, observed.engine, observed.row_count) == (value, "ReplicatedMergeTree", 0)
        assert observed.columns == COLUMNS
        status = session(backend, member_id).replica_status(backend.database, "cand")
        assert status is not None and not status.is_readonly
        assert status.total_replicas == status.active_replicas == len(members(backend))
        assert status.queue_size == 0 and value in status.zookeeper_path
        statuses.append(status)
    assert len({status.zookeeper_path for status in statuses}) == 1
    assert len({status.replica_name for status in statuses}) == len(statuses)


def test_the_create_sent_on_cluster_is_found_in_the_queue_by_its_token(replicated: PortBackend) -> None:
    """The internal route's ``CREATE ... ON CLUSTER`` (a storage ``SETTINGS`` clause of its own), dispatched by the
    product's DDL adapter and found by its own queue lookup on every replica."""
    backend = replicated
    token = settings()
    intent = CreateReplicatedTable(
        cluster=backend.cluster, database=backend.database, table="cand", uuid=str(uuid.uuid4()), spec=SPEC
    )
    outcome = backend.ports.ddl.dispatch(backend.inventory, intent, token)
    assert sorted(outcome.finished) == members(backend) and not outcome.failed
    status = backend.ports.ddl.queue_status(backend.inventory, token.correlation_token)
    assert status is not None and status.correlation_token == token.correlation_token
    assert [host.member_id for host in status.hosts] == members(backend)
    assert all(host.succeeded for host in status.hosts)


def test_an_insert_on_one_replica_reaches_every_replica_after_sync(replicated: PortBackend) -> None:
    backend = replicated
    value = create_replicated(backend)
    first, second = members(backend)
    load(backend, first, value, ROWS, "token-1")
    expected = backend.seal(COLUMNS, ROWS)
    for member_id in (second, first):
        assert session(backend, member_id).sync_replica(backend.database, "cand", timeout_seconds=SYNC_SECONDS)
        observed = session(backend, member_id).observe_table(TableRead(backend.database, "cand", with_content=True))
        assert (observed.row_count, observed.content_digest) == (3, expected.content_digest)
        status = session(backend, member_id).replica_status(backend.database, "cand")
        assert status is not None and status.queue_size == 0 and status.log_pointer > status.log_max_index


def test_the_same_token_and_the_same_blocks_are_inserted_once(replicated: PortBackend) -> None:
    backend = replicated
    value = create_replicated(backend)
    first, second = members(backend)
    load(backend, first, value, ROWS, "same-token")
    load(backend, first, value, ROWS, "same-token")
    assert session(backend, second).sync_replica(backend.database, "cand", timeout_seconds=SYNC_SECONDS)
    for member_id in (first, second):
        observed = session(backend, member_id).observe_table(TableRead(backend.database, "cand", with_content=True))
        assert observed.row_count == 3


def test_sync_replica_answers_false_within_the_bound_while_the_replica_cannot_fetch(replicated: PortBackend) -> None:
    backend = replicated
    value = create_replicated(backend)
    first, second = members(backend)
    backend.stop_fetches(second, "cand")
    load(backend, first, value, ROWS, "token-lag")
    started = time.monotonic()
    assert session(backend, second).sync_replica(backend.database, "cand", timeout_seconds=1) is False
    assert time.monotonic() - started < SYNC_SECONDS
    assert (
        session(backend, second).observe_table(TableRead(backend.database, "cand", with_content=False)).row_count == 0
    )
    status = session(backend, second).replica_status(backend.database, "cand")
    assert status is not None and status.queue_size >= 1
    backend.start_fetches(second, "cand")
    assert session(backend, second).sync_replica(backend.database, "cand", timeout_seconds=SYNC_SECONDS)
    assert (
        session(backend, second).observe_table(TableRead(backend.database, "cand", with_content=False)).row_count == 3
    )


def test_a_taken_name_fails_the_create_on_that_host_only(replicated: PortBackend) -> None:
    backend = replicated
    first, second = members(backend)
    plain = TableSpec(columns=SPEC.columns, order_by=("id",))
    session(backend, second).create_table(backend.database, "cand", str(uuid.uuid4()), plain)
    value = str(uuid.uuid4())
    token = settings()
    intent = CreateReplicatedTable(
        cluster=backend.cluster, database=backend.database, table="cand", uuid=value, spec=SPEC
    )
    with pytest.raises(OutcomeUnknownError):
        backend.ports.ddl.dispatch(backend.inventory, intent, token)
    status = backend.ports.ddl.queue_status(backend.inventory, token.correlation_token)
    assert status is not None
    hosts = {host.member_id: host for host in status.hosts}
    assert hosts[first].succeeded and hosts[second].state is HostDdlState.FINISHED and hosts[second].failed
    assert session(backend, first).observe_table(TableRead(backend.database, "cand", with_content=False)).uuid == value
    assert session(backend, second).observe_table(TableRead(backend.database, "cand", with_content=False)).uuid != value


def test_drop_on_cluster_removes_every_replica_and_frees_the_path(replicated: PortBackend) -> None:
    backend = replicated
    value = create_replicated(backend)
    drop = DropTable(cluster=backend.cluster, database=backend.database, table="cand")
    backend.ports.ddl.dispatch(backend.inventory, drop, settings())
    for member_id in members(backend):
        assert (
            not session(backend, member_id)
            .observe_table(TableRead(backend.database, "cand", with_content=False))
            .exists
        )
        assert session(backend, member_id).replica_status(backend.database, "cand") is None
    intent = CreateReplicatedTable(
        cluster=backend.cluster, database=backend.database, table="cand", uuid=value, spec=SPEC
    )
    outcome = backend.ports.ddl.dispatch(backend.inventory, intent, settings())  # the same UUID: the path was freed
    assert not outcome.failed


def test_a_lost_load_response_on_a_replica_is_unknown_and_every_replica_gets_the_rows_once(
    replicated: PortBackend,
) -> None:
    backend = replicated
    value = create_replicated(backend)
    first, second = members(backend)
    backend.lose_next_response("load", second)
    with pytest.raises(OutcomeUnknownError):
        load(backend, second, value, ROWS, "token-lost")
    expected = backend.seal(COLUMNS, ROWS)
    for member_id in (first, second):
        assert session(backend, member_id).sync_replica(backend.database, "cand", timeout_seconds=SYNC_SECONDS)
        observed = session(backend, member_id).observe_table(TableRead(backend.database, "cand", with_content=True))
        assert (observed.row_count, observed.content_digest) == (3, expected.content_digest), member_id


def test_a_resend_with_the_same_token_through_the_other_replica_is_deduplicated_by_the_shared_log(
    replicated: PortBackend,
) -> None:
    """ClickHouse behaviour the protocol does not rely on (it rebuilds instead), but which the fakes must share:
    block ids live in the shared log, so the replica a resend goes through does not matter; another token does."""
    backend = replicated
    value = create_replicated(backend)
    first, second = members(backend)
    load(backend, first, value, ROWS, "same")
    load(backend, second, value, ROWS, "same")
    load(backend, second, value, ROWS, "other")
    doubled = backend.seal(COLUMNS, (*ROWS, *ROWS))
    for member_id in (first, second):
        assert session(backend, member_id).sync_replica(backend.database, "cand", timeout_seconds=SYNC_SECONDS)
        observed = session(backend, member_id).observe_table(TableRead(backend.database, "cand", with_content=True))
        assert (observed.row_count, observed.content_digest) == (6, doubled.content_digest), member_id


def test_the_sync_wait_ends_on_the_server_before_the_client_stops_reading(
    embedded_cluster: Any, fresh_database: str, tmp_path: Path
) -> None:
    """Real adapters only (the bound is about HTTP): a bound longer than the client's read timeout is clamped below
    it, so a replica that does not catch up answers "not yet" (False), never a transport failure the protocol would
    read as an unavailable member."""
    backend = EmbeddedBackend(embedded_cluster, fresh_database, tmp_path)
    read_timeout = SYNC_READ_MARGIN_SECONDS + 2
    options = backend.connection.options.model_copy(update={"send_receive_timeout_seconds": read_timeout})
    endpoints = MemberEndpoints.derived_from(replace(backend.connection, options=options))
    try:
        value = create_replicated(backend)
        first, second = members(backend)
        backend.stop_fetches(second, "cand")
        load(backend, first, value, ROWS, "token-clamp")
        short = ClickHouseMemberSessions(endpoints).session(backend.inventory.member(second))
        started = time.monotonic()
        assert short.sync_replica(fresh_database, "cand", timeout_seconds=60) is False
        assert time.monotonic() - started < read_timeout
    finally:
        endpoints.close()
        backend.close()
