"""An abandoned snapshot SELECT is cancelled on the server, as the server records it.

The source is a member of the embedded cluster reached through the production HTTP connector (pinning session,
one-shot client). Its table holds far more rows than the client's and the kernel's buffers: a SELECT the server were
left to finish would report every row produced (``QueryFinish``). Each case reads the member's own record of the query
(``system.query_log``): ``ExceptionWhileProcessing`` with fewer rows produced than the table holds, and a code that
says the client's exit stopped it. ``QUERY_WAS_CANCELLED`` (394) when the hang-up or the KILL met the running query;
``NETWORK_ERROR`` (210) when they met the server blocked in a write to the reader that stopped reading, which a real
server fails the same way (which one comes first is timing, on a real server as here). The KILL reaching the server
is asserted by the server's own count of KILL statements.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
from airflow_provider_dpone.transfer.route.read_profile import frozen_settings
from airflow_provider_dpone.transfer.route.schema_admission import map_type
from airflow_provider_dpone.transfer.source.session import http_connector
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.query import SnapshotQuery
from airflow_provider_dpone.transfer.values.raw_snapshot import SettingRecord
from tests.support.fixtures.query_log import ended_query

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.embedded_cluster(members=2),
]

MEMBER = "member1"
ROWS = 150_000
BLOCK_ROWS = 1_000
COLUMNS = (("id", "UInt64"), ("payload", "String"))
PAYLOAD = "concat(" + ", ".join(f"hex(SHA256(toString(number + {n} * 1000000)))" for n in range(4)) + ")"
"""256 hex characters per row that compress about two to one: the result is about 40 MB on the wire."""
STOPPED_BY_CLIENT = (394, 210)
"""QUERY_WAS_CANCELLED, NETWORK_ERROR: the two ways a server records a query its client left (module docstring)."""


class AbandonedError(Exception):
    """What the stage or the target raised in the middle of the stream."""


@pytest.fixture
def admin(embedded_cluster) -> Iterator[Any]:
    client = embedded_cluster.client(MEMBER)
    yield client
    client.close()


@pytest.fixture
def relation(admin, fresh_database) -> RelationRef:
    admin.command(f"CREATE TABLE {fresh_database}.events (id UInt64, payload String) ENGINE = MergeTree ORDER BY id")
    admin.command(f"INSERT INTO {fresh_database}.events SELECT number, {PAYLOAD} FROM numbers({ROWS})")
    return RelationRef(database=fresh_database, table="events")


def snapshot(relation: RelationRef) -> SnapshotQuery:
    return SnapshotQuery(
        relation=relation,
        projection=tuple(map_type(name, type_, implicit_utc=False) for name, type_ in COLUMNS),
        window=None,
        provenance=False,
        settings=tuple(SettingRecord(name=k, value=v) for k, v in sorted(frozen_settings(60).items())),
        vendor_query_id=f"dpone-cancel-{uuid.uuid4().hex}",
        block_rows=BLOCK_ROWS,
        expected=None,
    )


def source_session(cluster: Any) -> Any:
    endpoint = cluster.endpoint(MEMBER)
    options = ClickHouseConnectionOptions()
    return http_connector(endpoint.host, endpoint.port, cluster.user, cluster.password, options).connect()


def kills(admin: Any) -> int:
    """How many ``KILL QUERY`` statements the member ran."""
    rows = admin.query(
        "SELECT count() FROM system.query_log WHERE startsWith(query, concat('KILL', ' QUERY')) AND type = 'QueryFinish'"
    ).result_rows
    return int(rows[0][0])


def raise_inside(session: Any, query: SnapshotQuery, error: Exception, after_blocks: int) -> None:
    """Read ``after_blocks`` blocks of the stream, then fail inside it with ``error``."""
    with session.stream(query) as blocks:
        for index, _ in enumerate(blocks):
            if index + 1 == after_blocks:
                raise error


def assert_cancelled(admin: Any, query_id: str) -> None:
    kind, code, produced = ended_query(admin, query_id)
    assert kind == "ExceptionWhileProcessing" and code in STOPPED_BY_CLIENT, (
        f"{query_id} was not stopped: {kind} {code}"
    )
    assert 0 < produced < ROWS


def test_a_stream_left_after_its_first_block_is_cancelled_on_the_server(embedded_cluster, admin, relation) -> None:
    before = kills(admin)
    query = snapshot(relation)
    session = source_session(embedded_cluster)
    try:
        with session.stream(query) as blocks:
            first = next(iter(blocks))
            assert first.rows == BLOCK_ROWS
    finally:
        session.close()
    assert_cancelled(admin, query.vendor_query_id)
    assert kills(admin) == before + 1


def test_an_error_inside_the_stream_cancels_the_query_and_propagates_unchanged(
    embedded_cluster, admin, relation
) -> None:
    before = kills(admin)
    query = snapshot(relation)
    session = source_session(embedded_cluster)
    raised = AbandonedError("stage write failed")
    try:
        with pytest.raises(AbandonedError) as caught:
            raise_inside(session, query, raised, after_blocks=3)
    finally:
        session.close()
    assert caught.value is raised
    assert_cancelled(admin, query.vendor_query_id)
    assert kills(admin) == before + 1


def test_a_failed_kill_never_masks_the_original_error(embedded_cluster, admin, relation, caplog) -> None:
    embedded_cluster.faults.fail_next_statement(MEMBER, 497, match="KILL QUERY")
    query = snapshot(relation)
    session = source_session(embedded_cluster)
    raised = AbandonedError("target refused the chunk")
    try:
        with caplog.at_level(logging.WARNING), pytest.raises(AbandonedError) as caught:
            raise_inside(session, query, raised, after_blocks=1)
    finally:
        session.close()
    assert caught.value is raised
    warnings = [r.getMessage() for r in caplog.records if "native_transfer.source_cancel_unconfirmed" in r.getMessage()]
    assert len(warnings) == 1 and query.vendor_query_id in warnings[0] and "server code 497" in warnings[0]
    # the server still cancels the read: its client hung up under readonly + cancel_http_readonly_queries_on_client_close
    assert_cancelled(admin, query.vendor_query_id)


def test_a_kill_whose_response_is_lost_is_sent_once(embedded_cluster, admin, relation, caplog) -> None:
    before = kills(admin)
    embedded_cluster.faults.lose_response(MEMBER, match="KILL QUERY")
    query = snapshot(relation)
    session = source_session(embedded_cluster)
    try:
        with caplog.at_level(logging.WARNING), session.stream(query) as blocks:
            next(iter(blocks))
    finally:
        session.close()
    assert_cancelled(admin, query.vendor_query_id)
    assert kills(admin) == before + 1, "the KILL left the client more than once"
    assert any("native_transfer.source_cancel_unconfirmed" in r.getMessage() for r in caplog.records)


def test_a_stream_read_to_its_end_sends_no_kill(embedded_cluster, admin, fresh_database) -> None:
    admin.command(f"CREATE TABLE {fresh_database}.small (id UInt64, payload String) ENGINE = MergeTree ORDER BY id")
    admin.command(f"INSERT INTO {fresh_database}.small SELECT number, {PAYLOAD} FROM numbers(5000)")
    query = snapshot(RelationRef(database=fresh_database, table="small"))
    before = kills(admin)
    session = source_session(embedded_cluster)
    try:
        with session.stream(query) as blocks:
            assert sum(block.rows for block in blocks) == 5000
    finally:
        session.close()
    assert ended_query(admin, query.vendor_query_id) == ("QueryFinish", 0, 5000)
    assert kills(admin) == before
