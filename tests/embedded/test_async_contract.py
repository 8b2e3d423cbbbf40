"""clickhouse-connect's async client (aiohttp) against the embedded HTTP endpoint, unchanged."""

from __future__ import annotations

import uuid

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError
from dpone_embedded import EmbeddedCluster

pytestmark = pytest.mark.embedded


async def test_async_query_insert_raw_insert_and_stream(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    client = await embedded_cluster.async_client("member1")
    try:
        assert await client.ping()
        table = f"`{fresh_database}`.t"
        await client.command(f"CREATE TABLE {table} (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
        summary = await client.insert(table, [(1, "a"), (2, "b")], column_names=["id", "s"])
        assert summary.written_rows == 2
        native = await client.raw_query(
            "SELECT number + 10 AS id, toString(number) AS s FROM numbers(5000)", fmt="Native"
        )
        raw = await client.raw_insert(table, ["id", "s"], native, fmt="Native")
        assert raw.written_rows == 5000
        result = await client.query(f"SELECT count(), sum(id) FROM {table}")
        assert result.result_rows == [(5002, 3 + sum(range(10, 5010)))]
        stream = await client.raw_stream(f"SELECT id FROM {table} ORDER BY id", fmt="TabSeparated")
        async with stream:
            chunks = [chunk async for chunk in stream]
        assert b"".join(chunks).split(b"\n")[:3] == [b"1", b"2", b"10"]
    finally:
        await client.close()


async def test_async_settings_query_id_and_errors(embedded_cluster: EmbeddedCluster) -> None:
    client = await embedded_cluster.async_client("coordinator")
    try:
        query_id = f"aq-{uuid.uuid4()}"
        result = await client.query(
            "SELECT getSetting('log_comment'), {v:String}",
            parameters={"v": "p"},
            settings={"log_comment": "async", "query_id": query_id},
        )
        assert result.result_rows == [("async", "p")]
        assert result.query_id == query_id
        with pytest.raises(DatabaseError) as error:
            await client.query("SELECT * FROM no_db_here.no_table")
        assert error.value.code in (60, 81)
    finally:
        await client.close()


async def test_async_on_cluster_and_lost_response(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    client = await embedded_cluster.async_client("coordinator")
    try:
        answer = await client.command(
            f"CREATE TABLE `{fresh_database}`.c ON CLUSTER {embedded_cluster.cluster_name} (a UInt8) ENGINE = Memory"
        )
        assert isinstance(answer, list) and answer[2] == "0"
        embedded_cluster.faults.lose_response("coordinator", match="DROP TABLE")
        with pytest.raises(OperationalError):
            await client.command(f"DROP TABLE `{fresh_database}`.c ON CLUSTER {embedded_cluster.cluster_name} SYNC")
    finally:
        await client.close()
    for member in embedded_cluster.members:
        assert embedded_cluster.client(member).command(f"EXISTS TABLE `{fresh_database}`.c") == 0
