"""Every fault control of the embedded cluster, observed through ordinary clients."""

from __future__ import annotations

import threading
import time

import clickhouse_connect
import pytest
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError
from dpone_embedded import EmbeddedCluster

pytestmark = pytest.mark.embedded


def _count(cluster: EmbeddedCluster, target: str, table: str) -> int:
    return int(cluster.client(target).command(f"SELECT count() FROM {table}"))


def test_fail_next_statement_has_no_effect_and_keeps_the_code(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    table = f"`{fresh_database}`.t"
    client = embedded_cluster.client("member1")
    client.command(f"CREATE TABLE {table} (a UInt64) ENGINE = MergeTree ORDER BY a")
    embedded_cluster.faults.fail_next_statement("member1", 241, match=r"INSERT INTO")
    with pytest.raises(DatabaseError) as error:
        client.insert(table, [(1,), (2,)], column_names=["a"])
    assert error.value.code == 241
    assert _count(embedded_cluster, "member1", table) == 0
    client.insert(table, [(1,), (2,)], column_names=["a"])  # one shot: the next one goes through
    assert _count(embedded_cluster, "member1", table) == 2


def test_lost_response_after_an_insert_took_effect(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    table = f"`{fresh_database}`.t"
    embedded_cluster.client("member2").command(f"CREATE TABLE {table} (a UInt64) ENGINE = MergeTree ORDER BY a")
    native = embedded_cluster.client("coordinator").raw_query("SELECT number AS a FROM numbers(1000)", fmt="Native")
    client = embedded_cluster.client("member2")

    embedded_cluster.faults.lose_response("member2", match="INSERT")
    with pytest.raises(OperationalError):
        # a non-replayable body: clickhouse-connect cannot resend it, so the loss reaches the caller
        client.raw_insert(table, ["a"], iter([native]), fmt="Native")
    assert _count(embedded_cluster, "member2", table) == 1000  # the insert took effect all the same

    embedded_cluster.faults.lose_response("member2", match="INSERT")
    client.raw_insert(table, ["a"], native, fmt="Native")
    # a bytes body is silently replayed by clickhouse-connect after a remote close: the rows arrive twice. This is
    # the client behaviour the product's one-shot transport must rule out (send mutations as non-replayable streams)
    assert _count(embedded_cluster, "member2", table) == 3000
    assert client.ping()


def test_lost_response_after_ddl_and_on_cluster_dispatch(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    db = f"`{fresh_database}`"
    embedded_cluster.faults.lose_response("member1", match="CREATE TABLE")
    with pytest.raises(OperationalError):  # commands are not replayed: the loss reaches the caller
        embedded_cluster.client("member1").command(f"CREATE TABLE {db}.local (a UInt8) ENGINE = Memory")
    assert embedded_cluster.client("member1").command(f"EXISTS TABLE {db}.local") == 1

    embedded_cluster.faults.lose_response("coordinator", match="ON CLUSTER")
    with pytest.raises(OperationalError):
        embedded_cluster.client("coordinator").command(
            f"CREATE TABLE {db}.everywhere ON CLUSTER {embedded_cluster.cluster_name} (a UInt8) ENGINE = Memory",
            settings={"log_comment": "lost-dispatch"},
        )
    statuses = (
        embedded_cluster.client("coordinator")
        .query("SELECT status FROM system.distributed_ddl_queue WHERE settings['log_comment'] = 'lost-dispatch'")
        .result_rows
    )
    assert statuses == [("Finished",), ("Finished",)]
    for member in embedded_cluster.members:
        assert embedded_cluster.client(member).command(f"EXISTS TABLE {db}.everywhere") == 1


def test_delayed_response_does_not_block_pings(embedded_cluster: EmbeddedCluster) -> None:
    embedded_cluster.faults.delay_response("member1", 1.5, match="sleepy")
    client = embedded_cluster.client("member1")
    outcome = {}

    def slow() -> None:
        started = time.monotonic()
        outcome["rows"] = client.query("SELECT 'sleepy'").result_rows
        outcome["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.3)
    endpoint = embedded_cluster.endpoint("member1")
    pinger = clickhouse_connect.get_client(host=endpoint.host, port=endpoint.port)
    started = time.monotonic()
    assert pinger.ping()
    assert pinger.command("SELECT 1") == 1
    assert time.monotonic() - started < 1.0
    thread.join()
    assert outcome["rows"] == [("sleepy",)]
    assert outcome["seconds"] >= 1.4


def test_kill_and_restart_member_keeps_its_tables(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    table = f"`{fresh_database}`.t"
    member = embedded_cluster.endpoint("member2")
    client = embedded_cluster.client(member)
    client.command(f"CREATE TABLE {table} (a UInt64) ENGINE = MergeTree ORDER BY a")
    client.insert(table, [(i,) for i in range(100)], column_names=["a"])
    uuid_before = client.command(f"SELECT uuid FROM system.tables WHERE database = '{fresh_database}'")
    old_pid = embedded_cluster.processes()["member2"]["pid"]

    embedded_cluster.faults.kill("member2")
    assert embedded_cluster.processes()["member2"]["alive"] is False
    assert embedded_cluster.faults.killed() == ["member2"]
    dead = clickhouse_connect.get_client  # a fresh client cannot even connect to a killed member
    with pytest.raises(OperationalError):
        dead(host=member.host, port=member.port, connect_timeout=1)

    embedded_cluster.faults.restart("member2")
    assert embedded_cluster.processes()["member2"]["pid"] != old_pid
    again = embedded_cluster.client(member)
    assert int(again.command(f"SELECT count() FROM {table}")) == 100
    assert again.command(f"SELECT uuid FROM system.tables WHERE database = '{fresh_database}'") == uuid_before
    assert embedded_cluster.faults.killed() == []


def test_reset_restarts_killed_members_and_disarms_everything(embedded_cluster: EmbeddedCluster) -> None:
    faults = embedded_cluster.faults
    faults.pause("member1")
    faults.fail_next_ddl("member2", 57)
    faults.lose_response("coordinator", match="nothing-matches-this")
    faults.kill("member1")
    assert {fault["kind"] for fault in faults.armed()} == {"pause", "fail_ddl", "lose_response"}
    faults.reset()
    assert faults.armed() == []
    assert faults.killed() == []
    assert embedded_cluster.client("member1").ping()


def test_unknown_targets_are_refused(embedded_cluster: EmbeddedCluster) -> None:
    with pytest.raises(ValueError):
        embedded_cluster.faults.pause("coordinator")
    with pytest.raises(ValueError):
        embedded_cluster.faults.fail_next_statement("member9", 1)
    with pytest.raises(ValueError):
        embedded_cluster.faults.lose_response(7)


def test_keeper_map_does_not_survive_a_restart_of_its_process(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    """Documented limit: chdb's Keeper is in-process, so a restarted process's KeeperMap tables fail (Code 668)."""
    table = f"`{fresh_database}`.kv"
    client = embedded_cluster.client("member1")
    client.command(f"CREATE TABLE {table} (k String, v String) ENGINE = KeeperMap('/{fresh_database}') PRIMARY KEY k")
    client.command(f"INSERT INTO {table} VALUES ('k', 'v')")
    embedded_cluster.faults.kill("member1")
    embedded_cluster.faults.restart("member1")
    with pytest.raises(DatabaseError) as error:
        embedded_cluster.client("member1").command(f"SELECT count() FROM {table}")
    assert error.value.code == 668
    embedded_cluster.client("member1").command(f"DROP TABLE {table} SYNC")


def test_uptime_counts_from_the_process_start_and_an_emulated_restart_sets_it_back(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    """chdb answers 0; the embedded server answers the seconds since it started, in any spelling and position, but
    never inside a string literal. An emulated restart keeps tables and the KeeperMap authority."""
    client = embedded_cluster.client("coordinator")
    table = f"`{fresh_database}`.kept"
    client.command(f"CREATE TABLE {table} (a UInt8) ENGINE = MergeTree ORDER BY a")
    time.sleep(1.1)
    up, text = client.query("SELECT UpTime( ), 'uptime()'").result_rows[0]
    assert int(up) >= 1 and text == "uptime()"
    embedded_cluster.faults.emulate_restart("coordinator")
    assert int(client.command("SELECT uptime()")) == 0
    assert int(client.command(f"EXISTS TABLE {table}")) == 1
