"""The few SQL facts the endpoint finds before the engine parses a statement."""

from __future__ import annotations

import pytest
from dpone_embedded.sqltext import (
    insert_uuid,
    insert_with_data,
    kill_query,
    on_cluster,
    output_format,
    produces_result,
    replace_table_reference,
)

pytestmark = pytest.mark.embedded


def test_insert_data_offset_and_settings() -> None:
    text = "INSERT INTO db.t (a, `b c`) SETTINGS async_insert = 0 FORMAT Native\n\x00\x01FORMAT"
    shape = insert_with_data(text)
    assert shape is not None
    assert shape.head == "INSERT INTO db.t (a, `b c`)"
    assert shape.settings == "async_insert = 0"
    assert shape.fmt == "Native"
    assert text[shape.data_start :] == "\x00\x01FORMAT"
    assert insert_with_data("INSERT INTO t FORMAT TSV") is not None
    assert insert_with_data("INSERT INTO t VALUES (1, 'FORMAT Native')") is None
    assert insert_with_data("INSERT INTO t SELECT * FROM s") is None
    assert insert_with_data("SELECT 1 FORMAT Native") is None
    assert insert_with_data("-- FORMAT x\nINSERT INTO t FORMAT CSV\r\n1,2") is not None


def test_output_format_ignores_literals_functions_and_nesting() -> None:
    assert output_format("SELECT 'FORMAT JSON' FORMAT Native") == "Native"
    assert output_format("SELECT * FROM format(JSONEachRow, 'a UInt8', '{}')") is None
    assert output_format("SELECT (SELECT 1 FORMAT CSV)") is None
    assert output_format("SELECT 1 -- FORMAT JSON") is None
    assert produces_result("  (SELECT 1)") and produces_result("with x as (select 1) select * from x")
    assert not produces_result("CREATE TABLE t (a UInt8) ENGINE = Memory")


def test_on_cluster_clause() -> None:
    clause = on_cluster("CREATE TABLE db.t ON CLUSTER `my cluster` (a UInt8) ENGINE = Memory")
    assert clause is not None
    assert clause.cluster == "my cluster"
    assert clause.local_text == "CREATE TABLE db.t (a UInt8) ENGINE = Memory"
    assert on_cluster("DROP TABLE t ON CLUSTER 'c' SYNC").local_text == "DROP TABLE t SYNC"
    assert on_cluster("CREATE TABLE t (a String DEFAULT 'ON CLUSTER x') ENGINE = Memory") is None


def test_uuid_is_added_only_where_missing() -> None:
    uuid = "00000000-0000-4000-8000-000000000001"
    assert insert_uuid("CREATE TABLE IF NOT EXISTS db.t ON CLUSTER c (a UInt8)", uuid) == (
        f"CREATE TABLE IF NOT EXISTS db.t UUID '{uuid}' ON CLUSTER c (a UInt8)"
    )
    assert insert_uuid("CREATE DATABASE d ON CLUSTER c", uuid) == f"CREATE DATABASE d UUID '{uuid}' ON CLUSTER c"
    explicit = "CREATE TABLE db.t UUID 'x' ON CLUSTER c (a UInt8)"
    assert insert_uuid(explicit, uuid) == explicit
    assert insert_uuid("DROP TABLE db.t ON CLUSTER c", uuid) == "DROP TABLE db.t ON CLUSTER c"


def test_table_reference_rewrite() -> None:
    text = "SELECT * FROM `system`.distributed_ddl_queue AS q JOIN SYSTEM.distributed_ddl_queue r ON 1 WHERE x = 'system.distributed_ddl_queue'"
    assert replace_table_reference(text, "system", "distributed_ddl_queue", "T") == (
        "SELECT * FROM T AS q JOIN T r ON 1 WHERE x = 'system.distributed_ddl_queue'"
    )


def test_kill_query_parts() -> None:
    parsed = kill_query("KILL QUERY WHERE query_id = {id:String} ASYNC\n FORMAT Native")
    assert parsed is not None and (parsed.condition, parsed.mode, parsed.on_cluster) == (
        "query_id = {id:String}",
        "ASYNC",
        False,
    )
    parsed = kill_query("kill query on cluster c where (user = 'a' and query like '%SYNC') sync;")
    assert parsed is not None and parsed.condition == "(user = 'a' and query like '%SYNC')"
    assert (parsed.mode, parsed.on_cluster) == ("SYNC", True)
    parsed = kill_query("KILL QUERY WHERE 1")
    assert parsed is not None and (parsed.condition, parsed.mode) == ("1", "ASYNC")
    assert kill_query("KILL MUTATION WHERE mutation_id = 'x'") is None
    assert kill_query("KILL QUERY") is None
    assert kill_query("SELECT 'KILL QUERY WHERE 1'") is None
