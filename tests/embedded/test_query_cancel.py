"""A streamed SELECT on the embedded endpoint stops as ClickHouse stops a query, and the member records how it ended.

ClickHouse's rules, modelled: ``KILL QUERY WHERE <condition over system.processes> [ASYNC|SYNC]`` cancels the matching
running queries (ASYNC answers ``waiting`` at once, SYNC ``finished`` once they ended); a client that closes its
connection cancels a read only under ``readonly > 0`` and ``cancel_http_readonly_queries_on_client_close = 1``;
otherwise the query runs on until a write to the closed connection fails (``NETWORK_ERROR``, not a cancellation).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from dpone_embedded import EmbeddedCluster

from tests.support.fixtures.query_log import ended_query

pytestmark = pytest.mark.embedded

MEMBER = "member1"
ROWS = 2_000_000
SELECT = f"SELECT number, hex(SHA256(toString(number))) FROM numbers({ROWS})"
"""Far more than any buffer between the engine and the client holds (about 150 MB of result)."""
SLOW = f"SELECT number, sleepEachRow(0.0002) FROM numbers({ROWS})"
"""Produced slowly (0.2 s a block of 1000 rows), so the server is between blocks, never stuck writing to a reader
that paused, when the client acts: what the client meets is the running query (a server blocked in a write to a
client that then closes fails that write, Code 210, before any check of the peer can run)."""


def drain(batches: Any) -> None:
    for _ in batches:
        pass


def settings(query_id: str, **extra: Any) -> dict[str, Any]:
    return {"query_id": query_id, "max_block_size": 1000, **extra}


@pytest.mark.parametrize("mode", ["ASYNC", "SYNC"])
def test_kill_query_stops_a_stream_whose_client_stays_connected(embedded_cluster: EmbeddedCluster, mode: str) -> None:
    reader, other = embedded_cluster.client(MEMBER), embedded_cluster.client(MEMBER)
    query_id = f"kill-{uuid.uuid4().hex}"
    with reader.query_arrow_stream(SLOW, settings=settings(query_id)) as stream:
        batches = iter(stream)
        next(batches)
        listed = other.query(
            "SELECT query_id, is_cancelled FROM system.processes WHERE query_id = {id:String}",
            parameters={"id": query_id},
        ).result_rows
        assert listed == [(query_id, 0)]
        answer = other.query(
            f"KILL QUERY WHERE query_id = {{id:String}} {mode}", parameters={"id": query_id}
        ).result_rows
        assert [(row[0], row[1]) for row in answer] == [("waiting" if mode == "ASYNC" else "finished", query_id)]
        # recorded while the client is still connected
        assert ended_query(other, query_id)[:2] == ("ExceptionWhileProcessing", 394)
        with pytest.raises(Exception):  # the body ends short: the driver's error type varies
            drain(batches)
    assert ended_query(other, query_id)[2] < ROWS


def test_kill_query_matching_nothing_answers_no_rows(embedded_cluster: EmbeddedCluster) -> None:
    client = embedded_cluster.client(MEMBER)
    answer = client.query("KILL QUERY WHERE query_id = 'absent' SYNC FORMAT JSONEachRow").result_rows
    assert answer in ([], [[""]], [("",)])


def test_a_client_close_cancels_a_readonly_read_that_asks_for_it(embedded_cluster: EmbeddedCluster) -> None:
    client, observer = embedded_cluster.client(MEMBER), embedded_cluster.client(MEMBER)
    query_id = f"close-{uuid.uuid4().hex}"
    cancel = {"readonly": 2, "cancel_http_readonly_queries_on_client_close": 1}
    with client.query_arrow_stream(SLOW, settings=settings(query_id, **cancel)) as stream:
        next(iter(stream))
    kind, code, produced = ended_query(observer, query_id)  # the client's own session stays busy until the query ends
    assert (kind, code) == ("ExceptionWhileProcessing", 394) and produced < ROWS


@pytest.mark.parametrize(
    "extra",
    [
        {"cancel_http_readonly_queries_on_client_close": 1, "readonly": 0},
        {"cancel_http_readonly_queries_on_client_close": 0},
    ],
    ids=["not-readonly", "setting-off"],
)
def test_without_the_rule_a_closed_client_only_breaks_the_next_write(
    embedded_cluster: EmbeddedCluster, extra: dict[str, Any]
) -> None:
    client, observer = embedded_cluster.client(MEMBER), embedded_cluster.client(MEMBER)
    query_id = f"write-{uuid.uuid4().hex}"
    with client.query_arrow_stream(SELECT, settings=settings(query_id, **extra)) as stream:
        next(iter(stream))
    kind, code, produced = ended_query(observer, query_id)  # the client's own session stays busy until the query ends
    assert (kind, code) == ("ExceptionWhileProcessing", 210) and produced < ROWS


def test_a_read_to_its_end_is_recorded_finished_with_its_rows(embedded_cluster: EmbeddedCluster) -> None:
    client = embedded_cluster.client(MEMBER)
    query_id = f"end-{uuid.uuid4().hex}"
    with client.query_arrow_stream("SELECT number FROM numbers(25000)", settings=settings(query_id)) as stream:
        assert sum(batch.num_rows for batch in stream) == 25000
    assert ended_query(client, query_id) == ("QueryFinish", 0, 25000)


def test_readonly_on_a_session_request_refuses_writes_and_leaves_the_session_writable(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    client = embedded_cluster.client(MEMBER)
    session = {"session_id": uuid.uuid4().hex}
    client.command(f"CREATE TABLE {fresh_database}.t (x UInt8) ENGINE = MergeTree ORDER BY x", settings=session)
    with pytest.raises(Exception, match="readonly"):
        client.command(f"INSERT INTO {fresh_database}.t VALUES (1)", settings={**session, "readonly": 2})
    assert client.query("SELECT 1", settings={**session, "readonly": 2}).result_rows == [(1,)]
    client.command(f"INSERT INTO {fresh_database}.t VALUES (2)", settings=session)
    assert client.query(f"SELECT x FROM {fresh_database}.t", settings=session).result_rows == [(2,)]
