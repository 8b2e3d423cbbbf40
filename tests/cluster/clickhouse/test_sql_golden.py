"""Golden text of every statement the publication adapters send (one module per phase renders them)."""

from __future__ import annotations

import pytest
from clickhouse_connect.driver._backend.httpcommon import embed_insert_query

from airflow_provider_dpone.cluster.clickhouse import (
    reference_digest,
    sql_authority,
    sql_catalog,
    sql_cluster_ddl,
    sql_digest,
    sql_member,
)
from airflow_provider_dpone.cluster.ports import (
    ColumnSpec,
    CreateReplicatedTable,
    DispatchSettings,
    DropTable,
    ExchangeTables,
    RenameTable,
    TableSpec,
)
from airflow_provider_dpone.cluster.values.authority.row import AuthorityRow
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.typed_digest import LogicalType, MultisetDigest, TypedColumn

pytestmark = pytest.mark.adapter

KEY = "ab" * 32
UUID = "00000000-0000-4000-8000-000000000001"
TOKEN = "0123456789abcdef" * 2
DIGEST = "e" * 64
AUTH = "`db`.`__dpone_cluster_publication_authority`"
COLUMNS_OF_T = (
    "(SELECT arrayMap(c -> (c.2, c.3, c.4), arraySort(c -> c.1, groupArray((position, name, type, default_kind))))"
    " FROM system.columns WHERE database = 'db' AND table = 't')"
)
COMMENT = '{"dpone":"cluster-external-full-refresh","epoch":1,"token":"' + TOKEN + '"}'
DISPATCH = DispatchSettings(correlation_token=TOKEN, query_digest=DIGEST, log_comment=COMMENT)
DDL_SETTINGS = (
    "SETTINGS distributed_ddl_output_mode = 'throw', distributed_ddl_task_timeout = 120, "
    f"skip_unavailable_shards = 0, log_comment = '{COMMENT}'"
)


def row(payload: str = '{"n":"it\'s"}') -> AuthorityRow:
    return AuthorityRow(
        target_key=KEY,
        operation_id="op",
        fence_token="fence",
        phase="LOCKED",
        dispatch_epoch=3,
        payload=payload,
        payload_sha256="a" * 64,
    )


# --- authority -------------------------------------------------------------------------------------------------


def test_authority_read() -> None:
    assert sql_authority.read_row("db", KEY) == (
        "SELECT `target_key`, `operation_id`, `fence_token`, `phase`, `dispatch_epoch`, `payload`,"
        f" toString(`payload_sha256`), `_version` FROM {AUTH} WHERE `target_key` = '{KEY}'"
        " SETTINGS keeper_map_strict_mode = 1"
    )


def test_authority_strict_insert() -> None:
    assert sql_authority.strict_insert("db", row()) == (
        f"INSERT INTO {AUTH} (`target_key`, `operation_id`, `fence_token`, `phase`, `dispatch_epoch`, `payload`,"
        " `payload_sha256`) SETTINGS keeper_map_strict_mode = 1, insert_keeper_max_retries = 0"
        f" VALUES ('{KEY}', 'op', 'fence', 'LOCKED', 3, '{{\"n\":\"it\\'s\"}}', '{'a' * 64}')"
    )


def test_authority_compare_and_set() -> None:
    assert sql_authority.compare_and_set("db", row(), 7) == (
        f"ALTER TABLE {AUTH} UPDATE `operation_id` = 'op', `fence_token` = 'fence', `phase` = 'LOCKED',"
        f" `dispatch_epoch` = 3, `payload` = '{{\"n\":\"it\\'s\"}}', `payload_sha256` = '{'a' * 64}'"
        f" WHERE `target_key` = '{KEY}' AND `_version` = 7"
        " SETTINGS keeper_map_strict_mode = 1, insert_keeper_max_retries = 0"
    )


def test_authority_compare_and_set_never_updates_the_key() -> None:
    assert "`target_key` =" not in sql_authority.compare_and_set("db", row(), 0).split(" WHERE ")[0]


# --- catalog ---------------------------------------------------------------------------------------------------


def test_catalog_statements() -> None:
    assert sql_catalog.inventory("analytics") == (
        "SELECT cluster, shard_num, replica_num, toUInt8(internal_replication), host_name, port,"
        " toUInt64(getSetting('distributed_ddl_entry_format_version'))"
        " FROM system.clusters WHERE cluster = 'analytics' ORDER BY shard_num, replica_num"
        " SETTINGS skip_unavailable_shards = 0"
    )
    assert sql_catalog.admission_facts("analytics", "db", "t") == (
        "SELECT (SELECT groupArray(engine) FROM system.databases WHERE name = 'db'),"
        " (SELECT groupArray((engine, engine_full, primary_key)) FROM system.tables"
        f" WHERE database = 'db' AND name = 't'), {COLUMNS_OF_T},"
        " (SELECT groupArray((toUInt32(shard_num), toUInt32(replica_num))) FROM system.clusters"
        " WHERE cluster = 'analytics' AND is_local)"
    )


def test_catalog_positions_of_one_cluster_or_every_cluster_and_the_own_rows() -> None:
    assert sql_catalog.positions("analytics", local=True) == (
        "SELECT cluster, shard_num, replica_num, host_name, port FROM system.clusters"
        " WHERE cluster = 'analytics' AND is_local ORDER BY cluster, shard_num, replica_num"
        " SETTINGS skip_unavailable_shards = 0"
    )
    assert sql_catalog.positions(None, local=False) == (
        "SELECT cluster, shard_num, replica_num, host_name, port FROM system.clusters"
        " ORDER BY cluster, shard_num, replica_num SETTINGS skip_unavailable_shards = 0"
    )


def test_catalog_never_skips_unavailable_shards() -> None:
    assert "skip_unavailable_shards = 1" not in sql_catalog.inventory("c")


# --- member staging --------------------------------------------------------------------------------------------

SPEC = TableSpec(
    columns=(
        ColumnSpec(name="id", type="UInt64"),
        ColumnSpec(name="amount", type="Nullable(Decimal(18,4))"),
        ColumnSpec(name="at", type="DateTime64(3,'UTC')"),
    ),
    order_by=("id",),
)


def test_member_observation_statements() -> None:
    assert sql_member.observe_metadata("db", "t") == (
        f"SELECT toString(uuid), engine, {COLUMNS_OF_T} FROM system.tables WHERE database = 'db' AND name = 't'"
    )
    assert sql_member.observe_metadata("db", "t", with_parts=True) == (
        f"SELECT toString(uuid), engine, {COLUMNS_OF_T}, {sql_digest.active_parts('db', 't')}"
        " FROM system.tables WHERE database = 'db' AND name = 't'"
    )
    assert sql_member.uuid_probe("db", "t") == (
        "SELECT toString(uuid) FROM system.tables WHERE database = 'db' AND name = 't'"
    )


def test_member_create_with_exact_uuid_columns_engine_and_key() -> None:
    assert sql_member.create_table("db", "cand", UUID, SPEC) == (
        f"CREATE TABLE `db`.`cand` UUID '{UUID}' (`id` UInt64, `amount` Nullable(Decimal(18, 4)),"
        " `at` DateTime64(3, 'UTC')) ENGINE = MergeTree ORDER BY (`id`)"
    )
    keyless = SPEC.model_copy(update={"order_by": ()})
    assert sql_member.create_table("db", "cand", UUID, keyless).endswith("ENGINE = MergeTree ORDER BY tuple()")


def test_member_create_never_if_not_exists_or_replace() -> None:
    statement = sql_member.create_table("db", "cand", UUID, SPEC)
    assert "IF NOT EXISTS" not in statement and "OR REPLACE" not in statement


@pytest.mark.parametrize("engine", ["ReplicatedMergeTree", "Distributed", "Memory", "MergeTree()", "Log"])
def test_member_create_refuses_engines_other_than_direct_mergetree(engine: str) -> None:
    with pytest.raises(DponeError) as caught:
        sql_member.create_table("db", "cand", UUID, SPEC.model_copy(update={"engine": engine}))
    assert caught.value.code == "DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED"


def test_member_create_refuses_an_order_by_outside_the_columns() -> None:
    with pytest.raises(DponeError):
        sql_member.create_table("db", "cand", UUID, SPEC.model_copy(update={"order_by": ("missing",)}))


@pytest.mark.parametrize(
    ("partition_by", "rendered"), [("at", "`at`"), ("toYYYYMM(at)", "toYYYYMM(`at`)"), ("toDate(id)", "toDate(`id`)")]
)
def test_the_partition_key_reaches_the_candidate_definition(partition_by: str, rendered: str) -> None:
    spec = SPEC.model_copy(update={"partition_by": partition_by})
    assert sql_member.table_definition(spec).endswith(f"ENGINE = MergeTree PARTITION BY {rendered} ORDER BY (`id`)")
    replicated = spec.model_copy(update={"engine": "ReplicatedMergeTree"})
    create = CreateReplicatedTable(cluster="c", database="db", table="cand", uuid=UUID, spec=replicated)
    assert f"ENGINE = ReplicatedMergeTree PARTITION BY {rendered} ORDER BY (`id`) SETTINGS" in (
        sql_cluster_ddl.render(create, DISPATCH)
    )


@pytest.mark.parametrize("partition_by", ["missing", "toYYYYMM(missing)", "cityHash64(id)", "toYYYYMM(at) % 2", "`at`"])
def test_a_partition_key_outside_the_columns_or_functions_is_refused(partition_by: str) -> None:
    with pytest.raises(DponeError) as error:
        sql_member.table_definition(SPEC.model_copy(update={"partition_by": partition_by}))
    assert error.value.code == "DPONE_IDENTIFIER_INVALID"


def test_member_load_statement_is_what_clickhouse_connect_sends() -> None:
    expected = "INSERT INTO `db`.`cand` (`id`, `amount`) FORMAT Native"
    assert sql_member.load_statement("db", "cand", ["id", "amount"]) == expected
    _body, query = embed_insert_query(sql_member.load_target("db", "cand"), ["id", "amount"], "Native", None, iter(()))
    assert query == expected


def test_member_load_settings() -> None:
    assert sql_member.load_settings(query_id="dpone-load-1", dedup_token="tok") == {
        "query_id": "dpone-load-1",
        "insert_deduplication_token": "tok",
        "insert_deduplicate": 1,
        "async_insert": 0,
        "input_format_skip_unknown_fields": 0,
        "input_format_native_allow_types_conversion": 0,
        "min_insert_block_size_rows": 0,
    }


def test_member_drop_names_the_uuid_it_is_meant_for() -> None:
    assert sql_member.drop_table("db", "cand", UUID) == (
        f"DROP TABLE `db`.`cand` SYNC SETTINGS log_comment = 'dpone:drop:{UUID}'"
    )
    with pytest.raises(ValueError):
        sql_member.drop_table("db", "cand", "not-a-uuid")


def test_member_exchange_probe_is_one_members_exchange_of_two_validated_names() -> None:
    assert sql_member.exchange_tables(
        "db", "__dpone_xprobe_0123456789abcdef_a", "__dpone_xprobe_0123456789abcdef_b"
    ) == ("EXCHANGE TABLES `db`.`__dpone_xprobe_0123456789abcdef_a` AND `db`.`__dpone_xprobe_0123456789abcdef_b`")
    with pytest.raises(DponeError):
        sql_member.exchange_tables("db", "a`; DROP", "b")


# --- content digest --------------------------------------------------------------------------------------------


def test_digest_statements() -> None:
    uuid_of_t = "(SELECT toString(uuid) FROM system.tables WHERE database = 'db' AND name = 't')"
    assert sql_digest.table_content("db", "t", None, 2) == f"SELECT count(), {uuid_of_t} FROM `db`.`t`"
    row = (
        "SHA256(concat('dpone.typed-row.v1\\0', reverse(reinterpretAsFixedString(toUInt32(length(toString(`id`)) + 1))),"
        " '\\x01', toString(`id`), reverse(reinterpretAsFixedString(toUInt32(length(if(isNull(`s`), '',"
        " assumeNotNull(`s`))) + 1))), char(isNotNull(`s`)), if(isNull(`s`), '', assumeNotNull(`s`))))"
    )
    columns = (("id", "UInt64"), ("s", "Nullable(String)"))
    assert sql_digest.table_content("db", "t", columns, 2) == (
        f"SELECT count(), toString(sum(reinterpretAsUInt256(reverse({row})))), {uuid_of_t} FROM `db`.`t`"
    )
    assert sql_digest.active_parts("db", "t") == (
        f"(SELECT (groupArray((name, hash_of_all_files)), sum(rows), {uuid_of_t}) FROM (SELECT name,"
        " hash_of_all_files, rows FROM system.parts WHERE database = 'db' AND table = 't' AND active ORDER BY name))"
    )
    assert sql_digest.listed_parts("db", "t") == f"SELECT {sql_digest.active_parts('db', 't')}"
    assert sql_digest.part_content("db", "t", columns, 2, ("all_1_1_0", "it's")) == (
        f"SELECT groupArray((p, c, s)), {uuid_of_t} FROM (SELECT _part AS p, count() AS c,"
        f" toString(sum(reinterpretAsUInt256(reverse({row})))) AS s FROM `db`.`t`"
        " WHERE _part IN ('all_1_1_0', 'it\\'s') GROUP BY _part)"
    )
    assert sql_digest.source_content("SELECT * FROM src", columns, 2) == (
        f"SELECT count(), toString(sum(reinterpretAsUInt256(reverse({row})))) FROM (\nSELECT * FROM src\n)"
    )
    assert sql_digest.temporary_content("tmp", columns, 2) == (
        f"SELECT count(), toString(sum(reinterpretAsUInt256(reverse({row})))) FROM `tmp`"
    )


def test_digest_never_uses_null_skipping_or_cancelling_aggregates() -> None:
    text = sql_digest.table_content("db", "t", (("id", "UInt64"), ("s", "Nullable(String)")), 2)
    assert "sipHash64(*)" not in text and "groupBitXor" not in text and "sum(" in text
    assert "tuple(*)" not in text and "isNull(`s`)" in text


def test_canonical_digest_binds_count_and_sum() -> None:
    base = sql_digest.content_digest(2, 5, 2)
    assert len(base) == 64
    assert base != sql_digest.content_digest(3, 5, 2)
    assert base != sql_digest.content_digest(2, 6, 2)
    with pytest.raises(ValueError):
        sql_digest.content_digest(1, 2**256, 2)


def test_version_2_is_the_typed_multiset_digest() -> None:
    acc = MultisetDigest([TypedColumn(name="id", logical=LogicalType.INTEGER)])
    acc.add_rows([(1,), (2,), (2,)])
    assert sql_digest.content_digest(3, acc.total, 2) == acc.hexdigest


def test_reference_table_fails_loudly_on_a_missing_column() -> None:
    assert reference_digest.create_reference_table("tmp", [("id", "UInt64"), ("at", "DateTime64(3,'UTC')")]) == (
        "CREATE TEMPORARY TABLE `tmp` ("
        "`id` UInt64 DEFAULT if(throwIf(1, 'dpone: a declared column is missing from the artifact') = 0,"
        " defaultValueOfTypeName('UInt64'), defaultValueOfTypeName('UInt64')), "
        "`at` DateTime64(3, 'UTC') DEFAULT if(throwIf(1, 'dpone: a declared column is missing from the artifact')"
        " = 0, defaultValueOfTypeName('DateTime64(3, \\'UTC\\')'), defaultValueOfTypeName('DateTime64(3, \\'UTC\\')'))"
        ") ENGINE = MergeTree ORDER BY tuple()"
    )


# --- cluster DDL -----------------------------------------------------------------------------------------------


def test_cluster_ddl_statements() -> None:
    exchange = ExchangeTables(cluster="c", database="db", left="t", right="cand")
    rename = RenameTable(cluster="c", database="db", source="cand", target="t")
    drop = DropTable(cluster="c", database="db", table="cand")
    render = sql_cluster_ddl.render
    assert render(exchange, DISPATCH) == f"EXCHANGE TABLES `db`.`t` AND `db`.`cand` ON CLUSTER `c` {DDL_SETTINGS}"
    assert render(rename, DISPATCH) == f"RENAME TABLE `db`.`cand` TO `db`.`t` ON CLUSTER `c` {DDL_SETTINGS}"
    assert render(drop, DISPATCH) == f"DROP TABLE `db`.`cand` ON CLUSTER `c` SYNC {DDL_SETTINGS}"


def test_cluster_ddl_creates_the_replicated_candidate_with_the_intended_uuid() -> None:
    spec = TableSpec(
        columns=(ColumnSpec(name="id", type="UInt64"), ColumnSpec(name="name", type="String")),
        engine="ReplicatedMergeTree",
        order_by=("id",),
    )
    create = CreateReplicatedTable(cluster="c", database="db", table="cand", uuid=UUID, spec=spec)
    assert sql_cluster_ddl.render(create, DISPATCH) == (
        f"CREATE TABLE `db`.`cand` UUID '{UUID}' ON CLUSTER `c` (`id` UInt64, `name` String)"
        f" ENGINE = ReplicatedMergeTree ORDER BY (`id`) {DDL_SETTINGS}"
    )


@pytest.mark.parametrize("engine", ["MergeTree", "SharedMergeTree", "Distributed", "replicatedmergetree"])
def test_cluster_ddl_creates_only_replicated_candidates(engine: str) -> None:
    spec = TableSpec(columns=(ColumnSpec(name="id", type="UInt64"),), engine=engine)
    create = CreateReplicatedTable(cluster="c", database="db", table="cand", uuid=UUID, spec=spec)
    with pytest.raises(DponeError) as error:
        sql_cluster_ddl.render(create, DISPATCH)
    assert error.value.code == "DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED"


def test_cluster_ddl_refuses_a_log_comment_without_the_token() -> None:
    settings = DISPATCH.model_copy(update={"log_comment": "{}"})
    with pytest.raises(ValueError):
        sql_cluster_ddl.render(DropTable(cluster="c", database="db", table="cand"), settings)


def test_queue_observation_statement() -> None:
    assert sql_cluster_ddl.queue_entry("c", TOKEN) == (
        "SELECT entry, host, port, toString(status), exception_code FROM system.distributed_ddl_queue"
        f" WHERE cluster = 'c' AND position(settings['log_comment'], '{TOKEN}') > 0 ORDER BY entry, host, port"
    )


@pytest.mark.parametrize("token", ["", "0" * 31, "G" * 32, "0" * 32 + "'"])
def test_correlation_token_is_validated(token: str) -> None:
    with pytest.raises(ValueError):
        sql_cluster_ddl.queue_entry("c", token)


# --- identifiers -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a`b", "a b", "a;DROP", "t\u0430ble", ""])
def test_every_statement_validates_names(name: str) -> None:
    renderers = [
        lambda: sql_authority.read_row(name, KEY),
        lambda: sql_catalog.inventory(name),
        lambda: sql_catalog.positions(name, local=True),
        lambda: sql_catalog.admission_facts("c", "db", name),
        lambda: sql_catalog.admission_facts(name, "db", "t"),
        lambda: sql_member.observe_metadata(name, "t"),
        lambda: sql_member.create_table("db", name, UUID, SPEC),
        lambda: sql_member.drop_table(name, "t", UUID),
        lambda: sql_digest.table_content("db", name, None, 2),
        lambda: sql_cluster_ddl.render(DropTable(cluster=name, database="db", table="t"), DISPATCH),
        lambda: sql_cluster_ddl.queue_entry(name, TOKEN),
    ]
    for render in renderers:
        with pytest.raises(DponeError) as caught:
            render()
        assert caught.value.code == "DPONE_IDENTIFIER_INVALID"


def test_acceptance_counts_are_one_aggregate_statement_with_positional_aliases() -> None:
    from airflow_provider_dpone.cluster.clickhouse import sql_acceptance
    from airflow_provider_dpone.cluster.values.quality_read import TargetReadPlan

    schema = (("id", "UInt64"), ("name", "Nullable(String)"))
    plan = TargetReadPlan(
        database="db",
        table="t",
        generation_uuid=UUID,
        scan="m" + "0" * 16,
        metrics=("row_count", "null_count", "distinct_count"),
        columns=("id", "name"),
        digest_version=2,
        schema_columns=schema,
    )
    rest = (
        " (SELECT toString(uuid) FROM system.tables WHERE database = 'db' AND name = 't') AS generation_uuid,"
        " countIf(isNull(`id`)) AS null_0, uniqExact(`id`) AS distinct_0,"
        " countIf(isNull(`name`)) AS null_1, uniqExact(`name`) AS distinct_1 FROM `db`.`t`"
    )
    # the typed row SHA-256 of the whole schema, summed
    assert sql_acceptance.target_counts(plan) == f"SELECT {sql_digest.aggregates(schema, 2)}," + rest
    assert sql_digest.aggregates(schema, 2).startswith("count(), toString(sum(reinterpretAsUInt256(reverse(")
    assert sql_acceptance.aliases(plan) == ("null_0", "distinct_0", "null_1", "distinct_1")
    assert sql_acceptance.read_settings(0) == {"max_execution_time": 1, "timeout_overflow_mode": "throw"}
    with pytest.raises(DponeError):
        TargetReadPlan(
            database="db",
            table="t",
            generation_uuid=UUID,
            scan="m" + "0" * 16,
            metrics=("null_count",),
            columns=("a`b",),
            digest_version=2,
            schema_columns=(("a`b", "UInt64"),),
        )
