"""ClickHouse semantics the product relies on, through HTTP on the embedded cluster: Atomic databases and table
UUIDs, EXCHANGE/RENAME/DROP SYNC, and KeeperMap strict mode as a compare-and-set authority store."""

from __future__ import annotations

import socket
import uuid

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError
from dpone_embedded import EmbeddedCluster

pytestmark = pytest.mark.embedded

STRICT = {"keeper_map_strict_mode": 1}


def _uuids(client, database: str) -> dict[str, str]:
    rows = client.query(
        "SELECT name, toString(uuid) FROM system.tables WHERE database = {db:String}", parameters={"db": database}
    ).result_rows
    return dict(rows)


def test_fresh_database_is_atomic_everywhere(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    for endpoint in embedded_cluster.endpoints:
        engine = embedded_cluster.client(endpoint).command(
            f"SELECT engine FROM system.databases WHERE name = '{fresh_database}'"
        )
        assert engine == "Atomic"


def test_create_with_uuid_exchange_rename_drop_sync(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    client = embedded_cluster.client("member1")
    db = f"`{fresh_database}`"
    chosen = str(uuid.uuid4())
    client.command(f"CREATE TABLE {db}.candidate UUID '{chosen}' (a UInt8) ENGINE = MergeTree ORDER BY a")
    client.command(f"CREATE TABLE {db}.target (a UInt8) ENGINE = MergeTree ORDER BY a")
    client.insert(f"{db}.candidate", [(1,), (2,)], column_names=["a"])
    before = _uuids(client, fresh_database)
    assert before["candidate"] == chosen

    client.command(f"EXCHANGE TABLES {db}.candidate AND {db}.target")
    after = _uuids(client, fresh_database)
    assert after == {"target": chosen, "candidate": before["target"]}
    assert client.command(f"SELECT count() FROM {db}.target") == 2

    client.command(f"RENAME TABLE {db}.candidate TO {db}.previous")
    assert _uuids(client, fresh_database) == {"target": chosen, "previous": before["target"]}
    client.command(f"DROP TABLE {db}.previous SYNC")
    assert _uuids(client, fresh_database) == {"target": chosen}

    with pytest.raises(DatabaseError) as exists:
        client.command(f"CREATE TABLE {db}.other UUID '{chosen}' (a UInt8) ENGINE = Memory")
    assert exists.value.code == 57  # TABLE_ALREADY_EXISTS: a UUID names one table


def test_keeper_map_strict_mode_is_a_compare_and_set(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    client = embedded_cluster.client("coordinator")
    table = f"`{fresh_database}`.authority"
    client.command(
        f"CREATE TABLE {table} (target_key String, payload String) "
        f"ENGINE = KeeperMap('/dpone/{fresh_database}') PRIMARY KEY target_key"
    )
    client.command(f"INSERT INTO {table} VALUES ('k', 'v0')", settings=STRICT)
    with pytest.raises(DatabaseError) as duplicate:
        client.command(f"INSERT INTO {table} VALUES ('k', 'other')", settings=STRICT)
    assert duplicate.value.code == 999  # KEEPER_EXCEPTION: the key exists
    # StorageKeeperMapSink::finalize creates each key in one Keeper multi-request: its failure names the first op
    assert "Transaction failed (Node exists): Op #0, path: /keeper_map_tables/dpone/" in str(duplicate.value)

    def read() -> list[tuple]:
        return client.query(f"SELECT payload, _version FROM {table} WHERE target_key = 'k'").result_rows

    assert read() == [("v0", 0)]
    client.command(
        f"ALTER TABLE {table} UPDATE payload = 'v1' WHERE target_key = 'k' AND _version = 0", settings=STRICT
    )
    assert read() == [("v1", 1)]
    client.command(
        f"ALTER TABLE {table} UPDATE payload = 'stale' WHERE target_key = 'k' AND _version = 0", settings=STRICT
    )
    assert read() == [("v1", 1)]  # a stale version changes nothing


def test_each_process_has_its_own_keeper(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    """The authority lives on the coordinator; a member's KeeperMap with the same path is a different store."""
    path = f"/dpone/shared-{fresh_database}"
    for target in ("coordinator", "member1"):
        embedded_cluster.client(target).command(
            f"CREATE TABLE `{fresh_database}`.kv (k String, v String) ENGINE = KeeperMap('{path}') PRIMARY KEY k"
        )
    embedded_cluster.client("coordinator").command(f"INSERT INTO `{fresh_database}`.kv VALUES ('a', 'b')")
    assert embedded_cluster.client("member1").command(f"SELECT count() FROM `{fresh_database}`.kv") == 0


def test_system_clusters_shows_the_topology_on_every_process(embedded_cluster: EmbeddedCluster) -> None:
    expected = [(1, m.replica_num, "127.0.0.1", m.native_port) for m in embedded_cluster.members]
    for endpoint in embedded_cluster.endpoints:
        client = embedded_cluster.client(endpoint)
        rows = client.query(
            "SELECT shard_num, replica_num, host_name, port, is_local, internal_replication FROM system.clusters"
            " WHERE cluster = {c:String} ORDER BY replica_num",
            parameters={"c": embedded_cluster.cluster_name},
        ).result_rows
        assert [row[:4] for row in rows] == expected
        assert {row[5] for row in rows} == {0}
        local = [row[1] for row in rows if row[4] == 1]
        assert local == ([endpoint.replica_num] if endpoint.role == "member" else [])
        macros = dict(client.query("SELECT macro, substitution FROM system.macros").result_rows)
        assert macros["cluster"] == embedded_cluster.cluster_name
        if endpoint.role == "member":
            assert macros["replica"] == f"r{endpoint.replica_num}" and macros["shard"] == "1"


def test_connection_for_airflow(embedded_cluster: EmbeddedCluster) -> None:
    from airflow.models.connection import Connection

    from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

    for conn in (
        Connection(uri=embedded_cluster.connection_uri(database="db1")),
        Connection(conn_id="x", **embedded_cluster.connection_json(database="db1")),
    ):
        assert conn.conn_type == "dpone_clickhouse"
        assert (conn.host, conn.port, conn.login, conn.schema) == (
            "127.0.0.1",
            embedded_cluster.coordinator.port,
            "default",
            "db1",
        )
        options = DponeClickHouseHook.parse_options(conn.extra)
        assert options.member_endpoints == {m.member_key: m.address for m in embedded_cluster.members}


def test_server_identity_is_the_engines_and_the_same_on_every_process(embedded_cluster: EmbeddedCluster) -> None:
    """chdb answers serverUUID() with zeros (a server reads it from <path>/uuid, written at its first start) and
    hostName() with the machine's name, as servers sharing one host would: only is_local tells the processes apart."""
    answers = {
        endpoint.name: embedded_cluster.client(endpoint)
        .query("SELECT toString(serverUUID()), hostName()")
        .result_rows[0]
        for endpoint in embedded_cluster.endpoints
    }
    assert set(answers.values()) == {("00000000-0000-0000-0000-000000000000", socket.gethostname())}
