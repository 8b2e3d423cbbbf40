"""The statement shapes replication acts on, the Keeper path rules and the ``system.tables`` presentation (no engine)."""

from __future__ import annotations

import pytest
from dpone_embedded import macros
from dpone_embedded.replica_views import replicated_text
from dpone_embedded.replicated_sql import (
    changed_table,
    column_names,
    create_statement,
    drop_statement,
    insert_statement,
    insert_target,
    replicated_engine,
    sync_replica,
)
from dpone_embedded.replication import Replica
from dpone_embedded.sqltext import QualifiedName, insert_uuid

pytestmark = pytest.mark.embedded

ADAPTER_CREATE = (
    "CREATE TABLE `db`.`cand` UUID '6f1c0d1e-0000-4000-8000-000000000001' (`a` UInt64, `b` String)"
    " ENGINE = ReplicatedMergeTree ORDER BY (`a`) SETTINGS distributed_ddl_output_mode = 'throw',"
    " distributed_ddl_task_timeout = 120, skip_unavailable_shards = 0, log_comment = 'x'"
)


class RefusedError(Exception):
    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code


def test_create_statement_finds_the_engine_its_arguments_and_where_settings_go() -> None:
    statement = create_statement(ADAPTER_CREATE)
    assert statement is not None and statement.engine is not None
    assert statement.head.target == QualifiedName("db", "cand")
    assert statement.head.uuid == "6f1c0d1e-0000-4000-8000-000000000001"
    assert (statement.engine.name, statement.engine.args, statement.engine.fills) == ("ReplicatedMergeTree", (), False)
    assert ADAPTER_CREATE[statement.engine.settings_at :].startswith(" distributed_ddl_output_mode")

    text = "CREATE TABLE t (k UInt64, v UInt64) ENGINE = ReplicatedReplacingMergeTree('/p/{shard}', '{replica}', v)"
    engine = create_statement(text + " ORDER BY k COMMENT 'c'")
    assert engine is not None and engine.engine is not None
    assert [(a.text, a.constant, a.literal) for a in engine.engine.args] == [
        ("'/p/{shard}'", True, "/p/{shard}"),
        ("'{replica}'", True, "{replica}"),
        ("v", False, None),
    ]
    assert engine.engine.settings_at is None
    assert (text + " ORDER BY k COMMENT 'c'")[engine.engine.tail_at :] == "COMMENT 'c'"
    filled = create_statement("CREATE TABLE t ENGINE = ReplicatedMergeTree ORDER BY a AS SELECT 1 AS a")
    assert filled is not None and filled.engine is not None and filled.engine.fills
    empty = create_statement("CREATE TABLE t ENGINE = ReplicatedMergeTree ORDER BY a EMPTY AS SELECT 1 AS a")
    assert empty is not None and empty.engine is not None and not empty.engine.fills
    assert replicated_engine(ADAPTER_CREATE) == "ReplicatedMergeTree"
    assert replicated_engine("CREATE TABLE t (s String DEFAULT 'Replicated') ENGINE = MergeTree ORDER BY s") is None
    assert replicated_engine("SELECT 'CREATE TABLE t ENGINE = ReplicatedMergeTree'") is None
    assert insert_uuid("CREATE TABLE IF NOT EXISTS d.t (a UInt8) ENGINE = Memory", "u") == (
        "CREATE TABLE IF NOT EXISTS d.t UUID 'u' (a UInt8) ENGINE = Memory"
    )


def test_statements_that_name_a_table() -> None:
    values = insert_statement("INSERT INTO db.t (a, `b`) SETTINGS x = 1 VALUES (1, 'VALUES'), (2, 'b')")
    assert values is not None
    assert (values.table, values.columns, values.settings, values.kind) == (
        QualifiedName("db", "t"),
        "(a, `b`)",
        "x = 1",
        "values",
    )
    select = insert_statement("INSERT INTO TABLE t WITH 1 AS x SELECT x")
    assert select is not None and (select.table, select.kind) == (QualifiedName(None, "t"), "select")
    assert insert_statement("INSERT INTO FUNCTION file('x') SELECT 1") is None
    infile = insert_statement("INSERT INTO t FROM INFILE 'f' FORMAT CSV")
    assert infile is not None and infile.kind == "infile"
    assert insert_target("INSERT INTO `db`.`t` (`a`, `b`)") == (QualifiedName("db", "t"), "(`a`, `b`)")
    dropped = drop_statement("DROP TABLE IF EXISTS db.a, b ON CLUSTER c SYNC")
    assert dropped is not None and dropped.tables == (QualifiedName("db", "a"), QualifiedName(None, "b"))
    database = drop_statement("DROP DATABASE IF EXISTS `x` SYNC")
    assert database is not None and database.database == "x"
    assert drop_statement("DROP VIEW v") is None
    assert changed_table("TRUNCATE TABLE IF EXISTS db.t") == QualifiedName("db", "t")
    assert changed_table("ALTER TABLE t DELETE WHERE 1") == QualifiedName(None, "t")
    assert changed_table("DELETE FROM db.t WHERE 1") == QualifiedName("db", "t")
    assert changed_table("ALTER USER u") is None
    assert column_names("(a, `b c`)") == ["a", "b c"]
    assert column_names("(* EXCEPT a)") is None


def test_sync_replica_modes() -> None:
    plain = sync_replica("SYSTEM SYNC REPLICA db.t")
    assert plain is not None and (plain.table, plain.mode, plain.sources) == (QualifiedName("db", "t"), "DEFAULT", ())
    light = sync_replica("SYSTEM SYNC REPLICA IF EXISTS t LIGHTWEIGHT FROM 'r1', 'r2'")
    assert light is not None and (light.if_exists, light.mode, light.sources) == (True, "LIGHTWEIGHT", ("r1", "r2"))
    for mode in ("STRICT", "PULL"):
        parsed = sync_replica(f"SYSTEM SYNC REPLICA t {mode}")
        assert parsed is not None and parsed.mode == mode
    assert sync_replica("SYSTEM SYNC REPLICA t SOMETIMES") is None  # the engine answers with its syntax error
    assert sync_replica("SYSTEM SYNC FILE CACHE") is None


def _fail(code: int, text: str) -> Exception:
    return RefusedError(code, text)


def test_keeper_path_and_replica_name_as_clickhouse_resolves_them() -> None:
    defaults = ("/clickhouse/tables/{uuid}/{shard}", "{replica}")
    statement = create_statement("CREATE TABLE t (k UInt64, v UInt64) ENGINE = ReplicatedReplacingMergeTree(v)")
    assert statement is not None and statement.engine is not None
    path, name, rest = macros.engine_arguments(_fail, statement.engine.args, *defaults)
    assert (path, name, [a.text for a in rest]) == (*defaults, ["v"])
    for wrong, code in (("('/p')", 36), ("('/p', 1)", 36), ("(1, 'r')", 36)):
        bad = create_statement(f"CREATE TABLE t (k UInt64) ENGINE = ReplicatedMergeTree{wrong}")
        assert bad is not None and bad.engine is not None
        with pytest.raises(RefusedError) as refused:
            macros.engine_arguments(_fail, bad.engine.args, *defaults)
        assert refused.value.code == code

    known = {"shard": "1", "replica": "r2", "layer": "{shard}-x"}
    metadata = macros.expand_special("/t/{layer}/{database}/{table}/{uuid}", "db", "t")
    assert metadata == "/t/{layer}/db/t/{uuid}"
    assert macros.expand(_fail, metadata, known, "db", "t", "u-1") == "/t/1-x/db/t/u-1"
    with pytest.raises(RefusedError) as no_uuid:
        macros.expand(_fail, metadata, known, "db", "t", None)
    assert no_uuid.value.code == 36
    with pytest.raises(RefusedError) as unknown:
        macros.expand(_fail, "/tables/{nope}", known, "db", "t", None)
    assert unknown.value.code == 139
    assert str(unknown.value) == (
        "No macro 'nope' in config while processing substitutions in '/tables/{nope}' at '9'"
        " or macro is not supported here"
    )
    assert macros.zookeeper_path(_fail, "/a/b/") == "/a/b"
    with pytest.raises(RefusedError):
        macros.zookeeper_path(_fail, "a/b")


def test_system_tables_shows_the_replicated_engine_without_the_local_setting() -> None:
    replica = Replica(
        path="/clickhouse/tables/u/1",
        replica_name="r1",
        member="member1",
        uuid="u",
        engine="ReplicatedReplacingMergeTree",
        path_template="/clickhouse/tables/{uuid}/{shard}",
        replica_template="{replica}",
        local_setting="non_replicated_deduplication_window = 100",
        dedup_window=10000,
        dedup_window_seconds=3600,
    )
    local = "ReplacingMergeTree(ver) ORDER BY k SETTINGS non_replicated_deduplication_window = 100, index_granularity = 8192"
    assert replicated_text(local, replica) == (
        "ReplicatedReplacingMergeTree('/clickhouse/tables/{uuid}/{shard}', '{replica}', ver) ORDER BY k"
        " SETTINGS index_granularity = 8192"
    )
    query = "CREATE TABLE db.t (`k` UInt64, `ver` UInt64) ENGINE = " + local
    assert replicated_text(query, replica) == (
        "CREATE TABLE db.t (`k` UInt64, `ver` UInt64) ENGINE = ReplicatedReplacingMergeTree("
        "'/clickhouse/tables/{uuid}/{shard}', '{replica}', ver) ORDER BY k SETTINGS index_granularity = 8192"
    )
