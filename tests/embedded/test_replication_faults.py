"""Replication under faults on the embedded cluster: paused, stalled and lagging replicas, crashed members, and the
crash windows of the writer and of the replication worker. Every outcome is read back from the member engines."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError
from dpone_embedded import EmbeddedCluster
from dpone_embedded.replication import Block, Claim, ReplicationLog
from dpone_embedded.store import Store

from tests.support.embedded.replication_checks import digest, status

pytestmark = [pytest.mark.embedded, pytest.mark.embedded_cluster(members=3, internal_replication=True)]


def _create(cluster: EmbeddedCluster, database: str, name: str = "t", **settings: object) -> str:
    table_uuid = str(uuid.uuid4())
    cluster.client("coordinator").command(
        f"CREATE TABLE `{database}`.{name} UUID '{table_uuid}' ON CLUSTER {cluster.cluster_name} (a UInt64, s String)"
        " ENGINE = ReplicatedMergeTree ORDER BY a",
        settings=settings,
    )
    return table_uuid


def _insert(cluster: EmbeddedCluster, member: str, table: str, start: int, rows: int) -> None:
    cluster.client(member).insert(table, [(i, f"s{i}") for i in range(start, start + rows)], column_names=["a", "s"])


def _sync(cluster: EmbeddedCluster, member: str, table: str, timeout: float = 30) -> float:
    started = time.monotonic()
    cluster.client(member).command(f"SYSTEM SYNC REPLICA {table}", settings={"receive_timeout": timeout})
    return time.monotonic() - started


def _digests(cluster: EmbeddedCluster, table: str) -> set[tuple[int, int]]:
    return {digest(cluster.client(member), table) for member in cluster.members}


def _log(cluster: EmbeddedCluster) -> ReplicationLog:
    return ReplicationLog(Store(cluster.directory / "state.sqlite"), cluster.directory / "replication")


def test_sync_replica_times_out_while_paused_then_converges(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    table_uuid = _create(embedded_cluster, fresh_database)
    table = f"{fresh_database}.t"
    embedded_cluster.faults.pause_replication("member2")
    _insert(embedded_cluster, "member1", table, 0, 100)
    _insert(embedded_cluster, "member1", table, 100, 50)
    lagging = embedded_cluster.client("member2")
    started = time.monotonic()
    with pytest.raises(DatabaseError) as timed_out:
        lagging.command(f"SYSTEM SYNC REPLICA {table}", settings={"receive_timeout": 1})
    assert time.monotonic() - started >= 1.0
    assert timed_out.value.code == 159
    assert f"SYNC REPLICA {table} ({table_uuid}): command timed out. See the 'receive_timeout' setting" in str(
        timed_out.value
    )
    row = status(lagging, fresh_database, "t")
    assert (row["queue_size"], row["inserts_in_queue"], row["log_max_index"], row["log_pointer"]) == (2, 2, 1, 2)
    assert digest(lagging, table) == (0, 0)
    lagging.command(f"SYSTEM SYNC REPLICA {table} PULL", settings={"receive_timeout": 1})  # pulling is not paused
    embedded_cluster.faults.resume_replication("member2")
    _sync(embedded_cluster, "member2", table)
    _sync(embedded_cluster, "member3", table)
    assert _digests(embedded_cluster, table) == {digest(embedded_cluster.client("member1"), table)}
    assert digest(lagging, table)[0] == 150
    row = status(lagging, fresh_database, "t")
    assert (row["queue_size"], row["log_max_index"], row["log_pointer"], row["absolute_delay"]) == (0, 1, 2, 0)


def test_stalled_replica_never_converges_until_reset(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    _create(embedded_cluster, fresh_database)
    table = f"{fresh_database}.t"
    embedded_cluster.faults.stall_replication("member3")
    embedded_cluster.faults.resume_replication("member3")  # resuming does not undo a stall
    stalled = embedded_cluster.client("member3")
    sizes = []
    for block in range(3):
        _insert(embedded_cluster, "member1", table, block * 10, 10)
        stalled.command(f"SYSTEM SYNC REPLICA {table} PULL")
        sizes.append(status(stalled, fresh_database, "t")["queue_size"])
    assert sizes == [1, 2, 3]
    _sync(embedded_cluster, "member2", table)
    with pytest.raises(DatabaseError) as timed_out:
        stalled.command(f"SYSTEM SYNC REPLICA {table}", settings={"receive_timeout": 1})
    assert timed_out.value.code == 159
    row = status(stalled, fresh_database, "t")
    assert stalled.command("SELECT oldest_part_to_get FROM system.replicas") == "all_0_0_0"
    assert row["log_pointer"] > row["log_max_index"]  # pulled, not executed: caught up needs queue_size 0 too
    embedded_cluster.faults.reset()
    _sync(embedded_cluster, "member3", table)
    assert len(_digests(embedded_cluster, table)) == 1
    assert digest(stalled, table)[0] == 30


def test_lagging_replica_executes_entries_once_they_are_old_enough(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    _create(embedded_cluster, fresh_database)
    table = f"{fresh_database}.t"
    embedded_cluster.faults.lag_replication("member2", 1.5)
    inserted = time.monotonic()
    _insert(embedded_cluster, "member1", table, 0, 100)
    time.sleep(0.5)
    lagging = embedded_cluster.client("member2")
    assert digest(lagging, table)[0] == 0
    assert status(lagging, fresh_database, "t")["queue_size"] == 1
    _sync(embedded_cluster, "member2", table)
    assert time.monotonic() - inserted >= 1.4
    _sync(embedded_cluster, "member3", table)
    assert len(_digests(embedded_cluster, table)) == 1


def test_member_killed_mid_replication_converges_after_restart(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    _create(embedded_cluster, fresh_database)
    table = f"{fresh_database}.t"
    embedded_cluster.faults.lag_replication("member2", 0.2)
    for block in range(12):
        _insert(embedded_cluster, "member1", table, block * 20_000, 20_000)
        if block == 8:
            embedded_cluster.faults.kill("member2")  # while it executes the first blocks
    embedded_cluster.faults.restart("member2")  # the lag survives the restart; the replica resumes its log
    _sync(embedded_cluster, "member2", table)
    _sync(embedded_cluster, "member3", table)
    assert _digests(embedded_cluster, table) == {digest(embedded_cluster.client("member1"), table)}
    assert digest(embedded_cluster.client("member2"), table)[0] == 240_000


def test_block_waits_for_a_running_replica_that_has_it(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    """A replica fetches a part from a replica that has it: while the only holder is down, the entry waits."""
    _create(embedded_cluster, fresh_database)
    table = f"{fresh_database}.t"
    for member in ("member2", "member3"):
        embedded_cluster.faults.pause_replication(member)
    _insert(embedded_cluster, "member1", table, 0, 100)
    embedded_cluster.faults.kill("member1")
    time.sleep(2.5)  # member1's heartbeat is stale: it is no longer an active replica
    embedded_cluster.faults.resume_replication("member3")
    waiting = embedded_cluster.client("member3")
    row = status(waiting, fresh_database, "t")
    assert (row["total_replicas"], row["active_replicas"]) == (3, 2)
    with pytest.raises(DatabaseError) as timed_out:
        waiting.command(f"SYSTEM SYNC REPLICA {table}", settings={"receive_timeout": 1})
    assert timed_out.value.code == 159
    embedded_cluster.faults.restart("member1")
    _sync(embedded_cluster, "member3", table)
    assert digest(waiting, table)[0] == 100


def test_entry_executed_again_after_a_lost_pointer_update_inserts_once(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    """The worker's crash window: the block is inserted, the pointer update is lost. Executing the entry again
    inserts nothing (each replica inserts a block with the block's own deduplication token)."""
    _create(embedded_cluster, fresh_database)
    table = f"{fresh_database}.t"
    _insert(embedded_cluster, "member1", table, 0, 100)
    _insert(embedded_cluster, "member1", table, 100, 100)
    _sync(embedded_cluster, "member2", table)
    before = digest(embedded_cluster.client("member2"), table)
    with Store(embedded_cluster.directory / "state.sqlite").transaction() as db:
        db.execute("UPDATE replicas SET applied = 0 WHERE member = 'member2'")
    _sync(embedded_cluster, "member2", table)
    assert digest(embedded_cluster.client("member2"), table) == before == (200, before[1])


def test_claim_of_a_writer_that_died_is_finished_by_its_restart(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    """The writer's crash window: the block is claimed and spooled, the process dies before logging it. The
    restarted process inserts it (idempotently) and logs it; the other replicas then receive it."""
    table_uuid = _create(embedded_cluster, fresh_database)
    table = f"{fresh_database}.t"
    log = _log(embedded_cluster)
    path = f"/clickhouse/tables/{table_uuid}/1"
    token = uuid.uuid4().hex
    spool = log.spool_file(path, token, "Native")
    native = embedded_cluster.client("coordinator").raw_query(
        "SELECT number AS a, toString(number) AS s FROM numbers(100)", fmt="Native"
    )
    Path(spool).write_bytes(native)
    block = Block("all_orphan", token, str(spool), "Native", "(a, s)", {})
    dead = Claim(path, "r1", "member1", table_uuid, 2**22 + 7, time.time(), block)
    assert log.claim(dead, 10_000, 3600)
    embedded_cluster.faults.restart("member1")
    for member in ("member1", "member2", "member3"):
        _sync(embedded_cluster, member, table)
    assert _digests(embedded_cluster, table) == {
        digest(embedded_cluster.client("coordinator"), "(SELECT number AS a, toString(number) AS s FROM numbers(100))")
    }
    assert log.orphan_claims("member1") == []


def test_replica_created_later_replays_the_log(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    """A member whose DDL worker was down creates its replica late; ClickHouse clones the existing parts, the
    emulation replays the path's log from its first entry: no row is lost."""
    embedded_cluster.faults.pause("member3")
    _create(embedded_cluster, fresh_database, distributed_ddl_task_timeout=0)
    table = f"{fresh_database}.t"
    deadline = time.monotonic() + 30
    while embedded_cluster.client("member2").command(f"EXISTS TABLE {table}") != 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    _insert(embedded_cluster, "member1", table, 0, 100)
    _insert(embedded_cluster, "member2", table, 100, 100)
    embedded_cluster.faults.resume("member3")
    while embedded_cluster.client("member3").command(f"EXISTS TABLE {table}") != 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    for member in ("member1", "member2", "member3"):
        _sync(embedded_cluster, member, table)
    assert len(_digests(embedded_cluster, table)) == 1
    assert digest(embedded_cluster.client("member3"), table)[0] == 200


def test_deduplication_window_is_the_last_blocks_of_the_path(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    embedded_cluster.client("coordinator").command(
        f"CREATE TABLE {fresh_database}.w ON CLUSTER {embedded_cluster.cluster_name} (a UInt64)"
        " ENGINE = ReplicatedMergeTree ORDER BY a SETTINGS replicated_deduplication_window = 2"
    )
    table = f"{fresh_database}.w"
    client = embedded_cluster.client("member1")
    for block in (1, 2, 1, 3, 4, 1):
        client.insert(table, [(block,)], column_names=["a"])
    # 1 is a duplicate while among the last two blocks, and new again once two other blocks followed it
    for member in embedded_cluster.members:
        _sync(embedded_cluster, member.name, table)
    assert _digests(embedded_cluster, table) == {digest(client, table)}
    assert sorted(row[0] for row in client.query(f"SELECT a FROM {table}").result_rows) == [1, 1, 2, 3, 4]
    engine_full = client.query(
        f"SELECT engine_full FROM system.tables WHERE database = '{fresh_database}' AND name = 'w'"
    ).result_rows[0][0]
    assert "replicated_deduplication_window = 2" in engine_full


def test_changes_replication_does_not_carry_are_refused(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    _create(embedded_cluster, fresh_database)
    table = f"{fresh_database}.t"
    _insert(embedded_cluster, "member1", table, 0, 10)
    client = embedded_cluster.client("member1")
    for statement in (f"ALTER TABLE {table} DELETE WHERE 1", f"TRUNCATE TABLE {table}", f"DELETE FROM {table} WHERE 1"):
        with pytest.raises(DatabaseError) as refused:
            client.command(statement)
        assert refused.value.code == 48
    assert digest(client, table)[0] == 10


def test_system_replicas_has_the_engines_columns(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    _create(embedded_cluster, fresh_database)
    described = embedded_cluster.client("member1").query("DESCRIBE TABLE system.replicas").result_rows
    engine_own = embedded_cluster.client("coordinator").query("DESCRIBE TABLE system.replicas").result_rows
    assert [(r[0], r[1]) for r in described] == [(r[0], r[1]) for r in engine_own]
    count = embedded_cluster.client("member1").command(
        f"SELECT count() FROM system.replicas WHERE database = '{fresh_database}' AND is_readonly = 0"
    )
    assert count == 1


def test_replayed_insert_after_a_lost_response_is_deduplicated(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    """clickhouse-connect replays a bytes body after a remote close (see test_faults.py: a plain table gets the rows
    twice); into a replicated table the replay is the same block, and it is ignored."""
    _create(embedded_cluster, fresh_database)
    table = f"{fresh_database}.t"
    native = embedded_cluster.client("coordinator").raw_query(
        "SELECT number AS a, toString(number) AS s FROM numbers(1000)", fmt="Native"
    )
    embedded_cluster.faults.lose_response("member1", match="INSERT")
    embedded_cluster.client("member1").raw_insert(table, ["a", "s"], native, fmt="Native")
    assert embedded_cluster.faults.armed() == []  # the response was lost once, and the body sent again
    for member in embedded_cluster.members:
        _sync(embedded_cluster, member.name, table)
    assert {count for count, _ in _digests(embedded_cluster, table)} == {1000}
    assert status(embedded_cluster.client("member2"), fresh_database, "t")["log_max_index"] == 0


def test_create_as_select_is_refused(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    client = embedded_cluster.client("member1")
    with pytest.raises(DatabaseError) as refused:
        client.command(
            f"CREATE TABLE {fresh_database}.t (a UInt64) ENGINE = ReplicatedMergeTree('/x/{{database}}/t', '{{replica}}')"
            " ORDER BY a AS SELECT number FROM numbers(3)"
        )
    assert refused.value.code == 48
    assert client.command(f"EXISTS TABLE {fresh_database}.t") == 0
    client.command(
        f"CREATE TABLE {fresh_database}.t (a UInt64) ENGINE = ReplicatedMergeTree('/x/{{database}}/t', '{{replica}}')"
        " ORDER BY a"
    )  # the refused statement left no replica behind


def test_replica_created_again_under_its_name_receives_its_old_blocks(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    """A replica dropped and created again (same path, same name) is a new replica: it gets every block of the
    path back, also those its previous incarnation wrote."""
    ddl = (
        f"CREATE TABLE {fresh_database}.t (a UInt64, s String)"
        f" ENGINE = ReplicatedMergeTree('/again/{{database}}/t', '{{replica}}') ORDER BY a"
    )
    table = f"{fresh_database}.t"
    for member in ("member1", "member2"):
        embedded_cluster.client(member).command(ddl)
    _insert(embedded_cluster, "member1", table, 0, 100)
    _insert(embedded_cluster, "member2", table, 100, 10)
    _sync(embedded_cluster, "member2", table)
    embedded_cluster.client("member1").command(f"DROP TABLE {table} SYNC")
    embedded_cluster.client("member1").command(ddl)
    _sync(embedded_cluster, "member1", table)
    assert digest(embedded_cluster.client("member1"), table) == digest(embedded_cluster.client("member2"), table)
    assert digest(embedded_cluster.client("member1"), table)[0] == 110
    for member in ("member1", "member2"):  # the last replica takes the path with it: a new table starts empty
        embedded_cluster.client(member).command(f"DROP TABLE {table} SYNC")
    embedded_cluster.client("member2").command(ddl)
    _sync(embedded_cluster, "member2", table)
    assert digest(embedded_cluster.client("member2"), table) == (0, 0)
    assert status(embedded_cluster.client("member2"), fresh_database, "t")["log_max_index"] == 0
