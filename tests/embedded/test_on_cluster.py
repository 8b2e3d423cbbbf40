"""Distributed DDL on the embedded cluster: the initiator's answers, the queue, and the worker's per-host status."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError
from dpone_embedded import EmbeddedCluster

pytestmark = pytest.mark.embedded

QUEUE_COLUMNS = [
    ("entry", "String"),
    ("entry_version", "Nullable(UInt8)"),
    ("initiator_host", "Nullable(String)"),
    ("initiator_port", "Nullable(UInt16)"),
    ("cluster", "String"),
    ("query", "String"),
    ("settings", "Map(String, String)"),
    ("query_create_time", "DateTime"),
    ("host", "Nullable(String)"),
    ("port", "Nullable(UInt16)"),
    ("status", "Nullable(Enum8('Inactive' = 0, 'Active' = 1, 'Finished' = 2, 'Removing' = 3, 'Unknown' = 4))"),
    ("exception_code", "Nullable(UInt16)"),
    ("exception_text", "Nullable(String)"),
    ("query_finish_time", "Nullable(DateTime)"),
    ("query_duration_ms", "Nullable(UInt64)"),
]


def _ddl(client, sql: str, **settings: object) -> list[tuple]:
    """Run an ON CLUSTER statement and return its typed result rows (JSONEachRow, 64-bit integers unquoted)."""
    raw = client.raw_query(
        sql + " FORMAT JSONEachRow", settings={**settings, "output_format_json_quote_64bit_integers": 0}
    )
    return [tuple(json.loads(line).values()) for line in raw.decode().splitlines()]


def _tables(cluster: EmbeddedCluster, database: str) -> dict[str, list[tuple[str, str]]]:
    found = {}
    for member in cluster.members:
        rows = cluster.client(member).query(
            "SELECT name, toString(uuid) FROM system.tables WHERE database = {db:String} ORDER BY name",
            parameters={"db": database},
        )
        found[member.name] = rows.result_rows
    return found


def _queue(cluster: EmbeddedCluster, comment: str, target: str = "coordinator") -> list[tuple]:
    return (
        cluster.client(target)
        .query(
            "SELECT entry, host, port, status, exception_code FROM system.distributed_ddl_queue"
            " WHERE settings['log_comment'] = {c:String} ORDER BY entry, port",
            parameters={"c": comment},
        )
        .result_rows
    )


def _member_ports(cluster: EmbeddedCluster) -> list[int]:
    return sorted(member.native_port for member in cluster.members)


def test_create_on_cluster_reaches_every_member_with_one_uuid(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    client = embedded_cluster.client("coordinator")
    raw = client.raw_query(
        f"CREATE TABLE `{fresh_database}`.t ON CLUSTER {embedded_cluster.cluster_name}"
        " (id UInt64) ENGINE = MergeTree ORDER BY id FORMAT JSONEachRow",
        settings={"log_comment": "create-1"},
    )
    rows = [json.loads(line) for line in raw.decode().splitlines()]
    assert [list(row) for row in rows] == [
        ["host", "port", "status", "error", "num_hosts_remaining", "num_hosts_active"]
    ] * 2
    assert sorted(row["port"] for row in rows) == _member_ports(embedded_cluster)
    assert all(int(row["status"]) == 0 and row["error"] == "" for row in rows)
    assert sorted(int(row["num_hosts_remaining"]) for row in rows) == [0, 1]
    plain = client.command(
        f"CREATE TABLE `{fresh_database}`.t2 ON CLUSTER {embedded_cluster.cluster_name} (id UInt64) ENGINE = Memory"
    )
    assert isinstance(plain, list) and len(plain) == 11  # TabSeparated: two rows of six columns, as a server sends
    tables = _tables(embedded_cluster, fresh_database)
    assert len({tuple(rows) for rows in tables.values()}) == 1, tables
    assert tables["member1"][0][0] == "t"
    queue = _queue(embedded_cluster, "create-1")
    assert [row[3] for row in queue] == ["Finished", "Finished"]
    assert {row[0] for row in queue} == {queue[0][0]} and queue[0][0].startswith("query-")


def test_queue_table_has_the_documented_columns_and_real_sql(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    client = embedded_cluster.client("member2")
    client.command(
        f"CREATE TABLE `{fresh_database}`.q ON CLUSTER {embedded_cluster.cluster_name} (a UInt8) ENGINE = Memory",
        settings={"log_comment": "columns-1"},
    )
    described = client.query("DESCRIBE TABLE system.distributed_ddl_queue").result_rows
    assert [(row[0], row[1]) for row in described] == QUEUE_COLUMNS
    row = client.query(
        "SELECT entry, entry_version, initiator_host, initiator_port, cluster, query, settings['log_comment'],"
        " host, port, status, exception_code, exception_text, query_finish_time >= query_create_time,"
        " query_duration_ms IS NOT NULL FROM system.distributed_ddl_queue WHERE settings['log_comment'] = 'columns-1'"
        " ORDER BY port DESC LIMIT 1"
    ).result_rows[0]
    assert row[4] == embedded_cluster.cluster_name
    assert row[3] == embedded_cluster.endpoint("member2").native_port  # initiated on member2
    assert f"{fresh_database}.q UUID '" in row[5] and "ON CLUSTER" in row[5]
    assert row[6] == "columns-1"
    assert row[8] == max(_member_ports(embedded_cluster))
    assert row[9:12] == ("Finished", 0, "")
    assert row[12] == 1 and row[13] == 1
    as_json = client.raw_query(
        "SELECT count() AS n FROM system.distributed_ddl_queue WHERE settings['log_comment'] = 'columns-1'"
        " FORMAT JSONEachRow"
    )
    assert int(json.loads(as_json)["n"]) == 2


def test_member_failure_throws_with_the_member_code(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    client = embedded_cluster.client("coordinator")
    embedded_cluster.faults.fail_next_ddl("member2", 241)
    with pytest.raises(DatabaseError) as error:
        client.command(
            f"CREATE TABLE `{fresh_database}`.f ON CLUSTER {embedded_cluster.cluster_name} (a UInt8) ENGINE = Memory",
            settings={"log_comment": "fail-1"},
        )
    assert error.value.code == 241
    assert "There was an error on [127.0.0.1:" in str(error.value)
    queue = {row[2]: row for row in _queue(embedded_cluster, "fail-1")}
    assert queue[embedded_cluster.endpoint("member2").native_port][3:] == ("Finished", 241)
    assert queue[embedded_cluster.endpoint("member1").native_port][3:] == ("Finished", 0)
    assert [table for table, _ in _tables(embedded_cluster, fresh_database)["member1"]] == ["f"]
    assert _tables(embedded_cluster, fresh_database)["member2"] == []


def test_real_error_on_one_member_and_never_throw(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    embedded_cluster.client("member1").command(f"CREATE TABLE `{fresh_database}`.dup (a UInt8) ENGINE = Memory")
    client = embedded_cluster.client("coordinator")
    rows = _ddl(
        client,
        f"CREATE TABLE `{fresh_database}`.dup ON CLUSTER {embedded_cluster.cluster_name} (a UInt8) ENGINE = Memory",
        distributed_ddl_output_mode="never_throw",
        log_comment="never-1",
    )
    by_port = {row[1]: row for row in rows}
    failed = by_port[embedded_cluster.endpoint("member1").native_port]
    assert failed[2] == 57 and "TABLE_ALREADY_EXISTS" in failed[3]
    assert by_port[embedded_cluster.endpoint("member2").native_port][2] == 0


def test_paused_member_partial_outcome_and_timeout_modes(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    client = embedded_cluster.client("coordinator")
    name = embedded_cluster.cluster_name
    member2 = embedded_cluster.endpoint("member2").native_port
    embedded_cluster.faults.pause("member2")

    with pytest.raises(DatabaseError) as timed_out:
        client.command(
            f"CREATE TABLE `{fresh_database}`.p1 ON CLUSTER {name} (a UInt8) ENGINE = Memory",
            settings={"distributed_ddl_task_timeout": 1, "log_comment": "pause-throw"},
        )
    assert timed_out.value.code == 159
    # DDLOnClusterQueryStatusSource::handleTimeoutExceeded, with the seconds as ClickHouse 26.9 formats them ({:.3f})
    assert re.search(
        r"Distributed DDL task /clickhouse/task_queue/ddl/query-\d{10} is not finished on 1 of 2 hosts "
        r"\(0 of them are currently executing the task, 0 are inactive\)\. They are going to execute the query in "
        r"background\. Was waiting for 1\.\d{3} seconds, which is longer than distributed_ddl_task_timeout",
        str(timed_out.value),
    ), str(timed_out.value)

    nulls = _ddl(
        client,
        f"CREATE TABLE `{fresh_database}`.p2 ON CLUSTER {name} (a UInt8) ENGINE = Memory",
        distributed_ddl_task_timeout=1,
        distributed_ddl_output_mode="null_status_on_timeout",
        log_comment="pause-null",
    )
    by_port = {row[1]: row for row in nulls}
    assert by_port[member2][2:4] == (None, None)
    assert by_port[embedded_cluster.endpoint("member1").native_port][2] == 0

    started = time.monotonic()
    asynchronous = client.command(
        f"CREATE TABLE `{fresh_database}`.p4 ON CLUSTER {name} (a UInt8) ENGINE = Memory",
        settings={"distributed_ddl_task_timeout": 0, "log_comment": "pause-async"},
    )
    assert time.monotonic() - started < 1.0
    assert not isinstance(asynchronous, list)  # no result set: the statement was only queued

    queue = _queue(embedded_cluster, "pause-throw") + _queue(embedded_cluster, "pause-null")
    assert {row[3] for row in queue if row[2] == member2} == {"Inactive"}
    member2_tables = [t for t, _ in _tables(embedded_cluster, fresh_database)["member2"]]
    assert member2_tables == []

    embedded_cluster.faults.resume("member2")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        member2_tables = [t for t, _ in _tables(embedded_cluster, fresh_database)["member2"]]
        if member2_tables == ["p1", "p2", "p4"]:
            break
        time.sleep(0.05)
    assert member2_tables == ["p1", "p2", "p4"]  # timed-out entries keep running, in queue order
    assert {row[3] for row in _queue(embedded_cluster, "pause-null")} == {"Finished"}


def test_none_mode_waits_and_returns_nothing(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    client = embedded_cluster.client("coordinator")
    answer = client.command(
        f"CREATE TABLE `{fresh_database}`.n ON CLUSTER {embedded_cluster.cluster_name} (a UInt8) ENGINE = Memory",
        settings={"distributed_ddl_output_mode": "none", "log_comment": "none-1"},
    )
    assert not isinstance(answer, list)
    assert {row[3] for row in _queue(embedded_cluster, "none-1")} == {"Finished"}
    embedded_cluster.faults.fail_next_ddl("member1", 60)
    with pytest.raises(DatabaseError) as error:
        client.command(
            f"DROP TABLE `{fresh_database}`.n ON CLUSTER {embedded_cluster.cluster_name} SYNC",
            settings={"distributed_ddl_output_mode": "none"},
        )
    assert error.value.code == 60


def test_exchange_rename_drop_on_cluster(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    client = embedded_cluster.client("coordinator")
    name = embedded_cluster.cluster_name
    db = f"`{fresh_database}`"
    client.command(f"CREATE TABLE {db}.a ON CLUSTER {name} (x UInt8) ENGINE = MergeTree ORDER BY x")
    client.command(f"CREATE TABLE {db}.b ON CLUSTER {name} (x UInt8) ENGINE = MergeTree ORDER BY x")
    before = _tables(embedded_cluster, fresh_database)
    client.command(f"EXCHANGE TABLES {db}.a AND {db}.b ON CLUSTER {name}")
    after = _tables(embedded_cluster, fresh_database)
    for member in embedded_cluster.members:
        assert dict(after[member.name]) == {"a": dict(before[member.name])["b"], "b": dict(before[member.name])["a"]}
    client.command(f"RENAME TABLE {db}.a TO {db}.c ON CLUSTER {name}")
    client.command(f"DROP TABLE {db}.b ON CLUSTER {name} SYNC")
    assert {m: [t for t, _ in rows] for m, rows in _tables(embedded_cluster, fresh_database).items()} == {
        "member1": ["c"],
        "member2": ["c"],
    }


def test_unknown_cluster_and_syntax_errors_fail_at_the_initiator(embedded_cluster: EmbeddedCluster) -> None:
    client = embedded_cluster.client("coordinator")
    with pytest.raises(DatabaseError) as readonly:
        client.command(
            f"CREATE DATABASE ro ON CLUSTER {embedded_cluster.cluster_name} ENGINE = Atomic", settings={"readonly": 1}
        )
    assert readonly.value.code == 164
    with pytest.raises(DatabaseError) as unknown:
        client.command("CREATE DATABASE nope ON CLUSTER no_such_cluster ENGINE = Atomic")
    assert unknown.value.code == 701
    with pytest.raises(DatabaseError) as syntax:
        client.command(f"CREATE TABLE x.y ON CLUSTER {embedded_cluster.cluster_name} (a UInt8 ENGINE = Memory")
    assert syntax.value.code == 62


def test_only_active_mode_stops_waiting_for_a_killed_member(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    client = embedded_cluster.client("coordinator")
    embedded_cluster.faults.kill("member2")
    time.sleep(2.5)  # the member's heartbeat goes stale: it is an offline host now
    started = time.monotonic()
    rows = _ddl(
        client,
        f"CREATE TABLE `{fresh_database}`.o ON CLUSTER {embedded_cluster.cluster_name} (a UInt8) ENGINE = Memory",
        distributed_ddl_output_mode="null_status_on_timeout_only_active",
        log_comment="active-1",
    )
    assert time.monotonic() - started < 5
    by_port = {row[1]: row for row in rows}
    assert by_port[embedded_cluster.endpoint("member2").native_port][2] is None
    embedded_cluster.faults.restart("member2")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and {r[3] for r in _queue(embedded_cluster, "active-1")} != {"Finished"}:
        time.sleep(0.05)
    assert {r[3] for r in _queue(embedded_cluster, "active-1")} == {"Finished"}  # durable across the restart
    assert [t for t, _ in _tables(embedded_cluster, fresh_database)["member2"]] == ["o"]


def _queued(cluster: EmbeddedCluster, comment: str) -> tuple[str, dict[str, str]]:
    """The one queue entry whose ``log_comment`` is ``comment``: its ``query`` and its ``settings`` map."""
    rows = (
        cluster.client("coordinator")
        .query(
            "SELECT DISTINCT entry, query, settings FROM system.distributed_ddl_queue"
            " WHERE settings['log_comment'] = {c:String}",
            parameters={"c": comment},
        )
        .result_rows
    )
    assert len(rows) == 1, rows
    return rows[0][1], dict(rows[0][2])


def test_a_statement_is_queued_without_its_settings_clause_which_fills_the_settings_map(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    """executeDDLQueryOnCluster queues the AST after ASTQueryWithOutput::resetOutputASTIfExist (no SETTINGS in
    ``query``); the clause's settings reach the entry's map through DDLLogEntry::setSettingsIfRequired."""
    client = embedded_cluster.client("coordinator")
    name = embedded_cluster.cluster_name
    for table in ("a", "b"):
        client.command(f"CREATE TABLE `{fresh_database}`.{table} ON CLUSTER {name} (x UInt8) ENGINE = Memory")
    client.command(
        f"EXCHANGE TABLES `{fresh_database}`.a AND `{fresh_database}`.b ON CLUSTER {name}"
        " SETTINGS log_comment = 'exchange-token-1', distributed_ddl_task_timeout = 60",
        settings={"max_execution_time": 30},
    )
    query, settings = _queued(embedded_cluster, "exchange-token-1")
    assert query.startswith("EXCHANGE TABLES") and "SETTINGS" not in query and "exchange-token-1" not in query
    assert settings["log_comment"] == "exchange-token-1"
    assert settings["distributed_ddl_task_timeout"] == "60"
    assert settings["max_execution_time"] == "30"  # the request's settings are the context's changes too

    client.command(
        f"DROP TABLE `{fresh_database}`.a ON CLUSTER {name} SYNC SETTINGS log_comment = 'drop-token-1'",
    )
    query, settings = _queued(embedded_cluster, "drop-token-1")
    assert query.endswith("SYNC") and "SETTINGS" not in query and settings["log_comment"] == "drop-token-1"


def test_a_create_keeps_its_engine_settings_and_queues_the_query_settings_apart(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    """InterpreterSetQuery::applySettingsFromQuery: a CREATE's one SETTINGS clause after the engine is split, each
    setting the engine does not know and the context does moving to the query's context."""
    client = embedded_cluster.client("coordinator")
    client.command(
        f"CREATE TABLE `{fresh_database}`.c ON CLUSTER {embedded_cluster.cluster_name} (x UInt8)"
        " ENGINE = MergeTree ORDER BY x SETTINGS index_granularity = 4096, log_comment = 'create-token-1'"
    )
    query, settings = _queued(embedded_cluster, "create-token-1")
    assert query.endswith("SETTINGS index_granularity = 4096") and "create-token-1" not in query
    assert settings["log_comment"] == "create-token-1" and "index_granularity" not in settings
    for member in embedded_cluster.members:
        created = embedded_cluster.client(member).command(f"SHOW CREATE TABLE `{fresh_database}`.c")
        assert "index_granularity = 4096" in str(created) and "log_comment" not in str(created)


def test_the_initiator_applies_the_settings_of_the_statement_clause(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    """The clause is applied to the query's context before the initiator reads ``distributed_ddl_output_mode``: with
    ``none`` in the clause the answer has no rows, as with ``none`` sent as a request setting."""
    client = embedded_cluster.client("coordinator")
    rows = _ddl(
        client,
        f"CREATE TABLE `{fresh_database}`.n ON CLUSTER {embedded_cluster.cluster_name} (x UInt8) ENGINE = Memory"
        " SETTINGS distributed_ddl_output_mode = 'none', log_comment = 'none-clause-1'",
    )
    assert rows == []
    _, settings = _queued(embedded_cluster, "none-clause-1")
    assert settings["distributed_ddl_output_mode"] == "none"


def test_a_negative_timeout_waits_for_every_host(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    """DistributedQueryStatusSource::generate checks the timeout only when distributed_ddl_task_timeout >= 0."""
    client = embedded_cluster.client("coordinator")
    embedded_cluster.faults.pause("member2")
    answers: list[list[tuple]] = []
    waiting = threading.Thread(
        target=lambda: answers.append(
            _ddl(
                client,
                f"CREATE TABLE `{fresh_database}`.w ON CLUSTER {embedded_cluster.cluster_name} (a UInt8) ENGINE = Memory",
                distributed_ddl_task_timeout=-1,
            )
        )
    )
    waiting.start()
    try:
        waiting.join(timeout=2.0)
        assert waiting.is_alive()  # a finite timeout of 1 s would have ended it by now
    finally:
        embedded_cluster.faults.resume("member2")
    waiting.join(timeout=20)
    assert not waiting.is_alive()
    assert sorted(row[1] for row in answers[0]) == _member_ports(embedded_cluster)
