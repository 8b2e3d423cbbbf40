"""Replication checks that hold on the embedded cluster and on a real ClickHouse cluster alike.

``test_replication.py`` runs them on the embedded cluster and ``test_real_cluster.py`` on the docker-compose one, so
the emulation is held to what real servers answer. A check gets a :class:`Replicas` (where ``ON CLUSTER`` statements
go, one client factory per replica) and a fresh database that exists on every replica.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

DEFAULT_ENGINE_FULL = "ReplicatedMergeTree('/clickhouse/tables/{uuid}/{shard}', '{replica}') ORDER BY "
REPLICA_STATUS = (
    "SELECT database, table, engine, is_leader, is_readonly, is_session_expired, zookeeper_path, replica_name,"
    " replica_path, queue_size, inserts_in_queue, merges_in_queue, log_max_index, log_pointer, total_replicas,"
    " active_replicas, absolute_delay, last_queue_update FROM system.replicas"
    " WHERE database = {d:String} AND table = {t:String}"
)


@dataclass(frozen=True)
class Replicas:
    cluster: str
    initiator: Callable[[], Any]
    members: tuple[Callable[[], Any], ...]
    shard: str = "1"

    def replica_name(self, index: int) -> str:
        return f"r{index + 1}"


def digest(client: Any, table: str) -> tuple[int, int]:
    """``count()`` and a NULL-safe multiset digest of every row."""
    count, total = client.query(f"SELECT count(), sum(cityHash64(tuple(*))) FROM {table}").result_rows[0]
    return int(count), int(total)


def status(client: Any, database: str, table: str) -> dict[str, Any]:
    rows = client.query(REPLICA_STATUS, parameters={"d": database, "t": table}).named_results()
    return next(iter(rows), {})


def create_like_the_adapter(replicas: Replicas, database: str, table: str, columns: str, order_by: str) -> str:
    """The exact statement the product's ON CLUSTER create sends; returns the table UUID."""
    table_uuid = str(uuid.uuid4())
    replicas.initiator().command(
        f"CREATE TABLE `{database}`.`{table}` UUID '{table_uuid}' ON CLUSTER `{replicas.cluster}` ({columns})"
        f" ENGINE = ReplicatedMergeTree ORDER BY ({order_by}) SETTINGS distributed_ddl_output_mode = 'throw',"
        " distributed_ddl_task_timeout = 120, skip_unavailable_shards = 0, log_comment = 'replication-check'"
    )
    return table_uuid


def sync_all(replicas: Replicas, table: str) -> None:
    for member in replicas.members:
        member().command(f"SYSTEM SYNC REPLICA {table}", settings={"receive_timeout": 30})


def assert_converged(replicas: Replicas, table: str, expected_rows: int) -> tuple[int, int]:
    """Every replica holds the same rows (count and digest), ``expected_rows`` of them."""
    sync_all(replicas, table)
    digests = {digest(member(), table) for member in replicas.members}
    assert len(digests) == 1, digests
    (found,) = digests
    assert found[0] == expected_rows
    return found


def check_default_path_create(replicas: Replicas, database: str) -> None:
    """ON CLUSTER without engine arguments: one Keeper path per shard, one replica per member, ClickHouse's metadata."""
    table_uuid = create_like_the_adapter(replicas, database, "cand", "`a` UInt64, `b` String", "`a`")
    path = f"/clickhouse/tables/{table_uuid}/{replicas.shard}"
    for index, member in enumerate(replicas.members):
        client = member()
        engine, engine_full, create_query, found_uuid = client.query(
            "SELECT engine, engine_full, create_table_query, toString(uuid) FROM system.tables"
            " WHERE database = {d:String} AND name = 'cand'",
            parameters={"d": database},
        ).result_rows[0]
        assert (engine, found_uuid) == ("ReplicatedMergeTree", table_uuid)
        assert engine_full.startswith(DEFAULT_ENGINE_FULL), engine_full
        assert f"ENGINE = {DEFAULT_ENGINE_FULL}" in create_query, create_query
        assert "non_replicated_deduplication_window" not in engine_full + create_query
        row = status(client, database, "cand")
        name = replicas.replica_name(index)
        assert (row["engine"], row["zookeeper_path"], row["replica_name"]) == ("ReplicatedMergeTree", path, name)
        assert row["replica_path"] == f"{path}/replicas/{name}"
        assert (row["is_leader"], row["is_readonly"], row["is_session_expired"]) == (1, 0, 0)
        assert row["total_replicas"] == len(replicas.members)
        assert row["queue_size"] == 0


def check_inserts_replicate(replicas: Replicas, database: str) -> None:
    """Rows written on one replica arrive on every replica; the shared log and the pointers say so."""
    create_like_the_adapter(replicas, database, "t", "`id` UInt64, `name` String, `v` Nullable(Float64)", "`id`")
    table = f"`{database}`.`t`"
    writer = replicas.members[0]()
    writer.insert(
        table, [(i, f"n{i}", None if i % 3 else i / 2) for i in range(1000)], column_names=["id", "name", "v"]
    )
    native = writer.raw_query(
        "SELECT number + 1000 AS id, toString(number) AS name, NULL::Nullable(Float64) AS v FROM numbers(500)",
        fmt="Native",
    )
    replicas.members[-1]().raw_insert(table, ["id", "name", "v"], native, fmt="Native")
    assert_converged(replicas, table, 1500)
    for member in replicas.members:
        row = status(member(), database, "t")
        assert row["log_pointer"] > row["log_max_index"] >= 1
        assert (row["queue_size"], row["inserts_in_queue"]) == (0, 0)
        assert row["active_replicas"] == len(replicas.members)


def check_deduplication(replicas: Replicas, database: str) -> None:
    """A block seen recently on the path is ignored (by content, or by ``insert_deduplication_token``); other
    tables have their own paths and are not deduplicated against it."""
    for name in ("t", "other"):
        create_like_the_adapter(replicas, database, name, "`a` UInt64", "`a`")
    table, other = f"`{database}`.`t`", f"`{database}`.`other`"
    first, last = replicas.members[0](), replicas.members[-1]()
    rows = [(i,) for i in range(100)]
    first.insert(table, rows, column_names=["a"])
    last.insert(table, rows, column_names=["a"])  # the same block again, through another replica: a retry
    assert_converged(replicas, table, 100)
    token = {"insert_deduplication_token": f"tok-{uuid.uuid4().hex}"}
    first.insert(table, [(1000,)], column_names=["a"], settings=token)
    last.insert(table, [(2000,), (2001,)], column_names=["a"], settings=token)  # other rows, same token: ignored
    first.insert(table, [(1000,)], column_names=["a"], settings={"insert_deduplication_token": "another"})
    assert_converged(replicas, table, 102)
    assert first.command(f"SELECT countIf(a >= 2000) FROM {table}") == 0
    first.insert(other, rows, column_names=["a"])
    assert_converged(replicas, other, 100)


def check_exchange_rename_drop(replicas: Replicas, database: str) -> None:
    """EXCHANGE and RENAME move UUIDs between names: the replicas (and their paths) go with the tables; DROP ... SYNC
    removes the replicas, and the last one takes the path with it."""
    target_uuid = create_like_the_adapter(replicas, database, "target", "`a` UInt64", "`a`")
    cand_uuid = create_like_the_adapter(replicas, database, "cand", "`a` UInt64", "`a`")
    target, cand = f"`{database}`.`target`", f"`{database}`.`cand`"
    replicas.members[0]().insert(target, [(1,)], column_names=["a"])
    replicas.members[0]().insert(cand, [(i,) for i in range(10)], column_names=["a"])
    initiator = replicas.initiator()
    initiator.command(f"EXCHANGE TABLES {target} AND {cand} ON CLUSTER `{replicas.cluster}`")
    replicas.members[-1]().insert(target, [(i,) for i in range(10, 20)], column_names=["a"])
    assert_converged(replicas, target, 20)
    assert_converged(replicas, cand, 1)
    for member in replicas.members:
        assert status(member(), database, "target")["zookeeper_path"].split("/")[3] == cand_uuid
        assert status(member(), database, "cand")["zookeeper_path"].split("/")[3] == target_uuid
    initiator.command(f"DROP TABLE {cand} ON CLUSTER `{replicas.cluster}` SYNC")
    initiator.command(f"RENAME TABLE {target} TO `{database}`.`published` ON CLUSTER `{replicas.cluster}`")
    published = f"`{database}`.`published`"
    replicas.members[0]().insert(published, [(99,)], column_names=["a"])
    assert_converged(replicas, published, 21)
    for member in replicas.members:
        client = member()
        names = client.query(
            "SELECT table FROM system.replicas WHERE database = {d:String} ORDER BY table", parameters={"d": database}
        ).result_rows
        assert names == [("published",)]
    initiator.command(f"DROP TABLE {published} ON CLUSTER `{replicas.cluster}` SYNC")
    for member in replicas.members:
        assert member().command(f"SELECT count() FROM system.replicas WHERE database = '{database}'") == 0


def check_explicit_path_and_errors(replicas: Replicas, database: str) -> None:
    """Explicit path and name: ``{database}``/``{table}`` unfold in the metadata, ``{shard}``/``{replica}`` stay;
    a second table on the same path with the same replica name is REPLICA_ALREADY_EXISTS (253); SYNC REPLICA of a
    plain MergeTree table is BAD_ARGUMENTS (36)."""
    client = replicas.members[0]()
    client.command(
        f"CREATE TABLE `{database}`.r (k UInt64, ver UInt64) ENGINE = ReplicatedReplacingMergeTree("
        f"'/dpone/{{shard}}/{{database}}/{{table}}', '{{replica}}', ver) ORDER BY k"
    )
    engine_full = client.query(
        f"SELECT engine_full FROM system.tables WHERE database = '{database}' AND name = 'r'"
    ).result_rows[0][0]
    assert engine_full.startswith(
        f"ReplicatedReplacingMergeTree('/dpone/{{shard}}/{database}/r', '{{replica}}', ver) ORDER BY "
    ), engine_full
    row = status(client, database, "r")
    assert (row["zookeeper_path"], row["replica_name"]) == (f"/dpone/{replicas.shard}/{database}/r", "r1")
    with pytest.raises(DatabaseError) as exists:
        client.command(
            f"CREATE TABLE `{database}`.r2 (k UInt64, ver UInt64) ENGINE = ReplicatedReplacingMergeTree("
            f"'/dpone/{{shard}}/{database}/r', '{{replica}}', ver) ORDER BY k"
        )
    assert exists.value.code == 253
    assert client.command(f"EXISTS TABLE `{database}`.r2") == 0
    client.command(f"CREATE TABLE `{database}`.plain (k UInt64) ENGINE = MergeTree ORDER BY k")
    with pytest.raises(DatabaseError) as plain:
        client.command(f"SYSTEM SYNC REPLICA `{database}`.plain")
    assert plain.value.code == 36
    with pytest.raises(DatabaseError) as no_uuid:
        client.command(f"CREATE TABLE `{database}`.u (k UInt64) ENGINE = ReplicatedMergeTree ORDER BY k")
    assert no_uuid.value.code == 36


def check_insert_statements(replicas: Replicas, database: str) -> None:
    """``INSERT ... VALUES``, ``INSERT ... SELECT`` and inserts in other formats replicate like Native inserts."""
    create_like_the_adapter(replicas, database, "t", "`a` UInt64, `s` String", "`a`")
    table = f"`{database}`.`t`"
    client = replicas.members[0]()
    client.command(f"INSERT INTO {table} VALUES (1, 'one'), (2, 'two')")
    client.command(f"INSERT INTO {table} (s, a) SELECT toString(number), number + 10 FROM numbers(5)")
    row_binary = client.raw_query("SELECT number + 100 AS a, 'rb' AS s FROM numbers(3)", fmt="RowBinary")
    replicas.members[-1]().raw_insert(table, ["a", "s"], row_binary, fmt="RowBinary")
    client.raw_insert(table, ["a", "s"], b"200,csv\n201,csv\n", fmt="CSV")
    assert_converged(replicas, table, 12)
    assert client.query(f"SELECT s FROM {table} WHERE a = 12").result_rows == [("2",)]
    assert client.command(f"SELECT countIf(s = 'rb') + countIf(s = 'csv') FROM {table}") == 5


CHECKS = (
    check_default_path_create,
    check_inserts_replicate,
    check_deduplication,
    check_exchange_rename_drop,
    check_explicit_path_and_errors,
    check_insert_statements,
)
"""Every check, in the order both suites run them."""
