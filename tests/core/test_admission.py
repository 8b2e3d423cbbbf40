"""Static admission: every blocker of seed 000 §1 and seed 002/003 static rules, with its code, all collected."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from airflow_provider_dpone.admission import (
    AdmissionResult,
    Blocker,
    ReplicationDecision,
    TransferDecision,
    admit_static,
)
from airflow_provider_dpone.cluster.values.clickhouse_engines import MERGE_TREE_FAMILY, EngineClass, classify_engine
from airflow_provider_dpone.core.errors import DponeError
from tests.support.manifest_samples import cluster_of, external, internal, load, storage_of, transfer

pytestmark = pytest.mark.unit

Edit = Callable[[dict[str, Any]], object]


def _admit(base: Callable[[], dict[str, Any]], *edits: Edit) -> AdmissionResult:
    raw = base()
    for edit in edits:
        edit(raw)
    return admit_static(load(raw))


def _only(result: AdmissionResult, code: str, field: str) -> Blocker:
    assert result.codes == (code,), [b.as_dict() for b in result.blockers]
    assert result.blockers[0].field == field
    assert not result.admissible
    assert result.decision.selected is None
    return result.blockers[0]


# ------------------------------------------------------------------------------------------ decisions (seed) --
def test_external_decision_is_exactly_the_published_contract() -> None:
    result = _admit(external)
    assert result.admissible and result.route == "clickhouse_cluster_full_refresh"
    decision = result.decision.as_dict()
    assert list(decision.items()) == [
        ("requested", "cluster"),
        ("selected", "cluster_external"),
        ("replication_mode", "external"),
        ("runtime_admission_required", True),
        ("no_fallback", True),
    ]


@pytest.mark.parametrize("spelled", [True, False])
def test_internal_decision_with_and_without_the_mode_field(spelled: bool) -> None:
    result = _admit(internal, (lambda r: None) if spelled else (lambda r: cluster_of(r).pop("replication_mode")))
    assert result.admissible
    assert result.decision == ReplicationDecision("cluster", "cluster_internal", "internal", True, True)


def test_transfer_decisions() -> None:
    assert _admit(transfer).decision == TransferDecision(
        "native_transfer", "native_transfer_mssql", "exact_raw_rows", "single_server", True, True
    )
    omitted = _admit(lambda: transfer("postgres"), lambda r: r["source"].pop("options"))
    assert omitted.admissible and omitted.route == "native_transfer"
    assert omitted.decision == TransferDecision(
        "native_transfer", "native_transfer_postgres", "query_visible", "single_server", True, True
    )
    replica = _admit(
        transfer,
        lambda r: r["source"]["options"]["native_transfer"]["source_snapshot"].update(
            replica_scope="connected_replica"
        ),
    )
    assert replica.admissible and isinstance(replica.decision, TransferDecision)
    assert replica.decision.replica_scope == "connected_replica"


# --------------------------------------------------------------------------------------- cluster blockers --
def test_no_cluster_requests_local_publication_which_is_never_selected() -> None:
    result = _admit(external, lambda r: storage_of(r).pop("cluster"))
    _only(result, "DPONE_CLICKHOUSE_CLUSTER_REQUIRED", "physical_design.storage.clickhouse.cluster")
    assert result.decision == ReplicationDecision("local", None, None, True, True)


@pytest.mark.parametrize(
    "edit", [lambda r: cluster_of(r).update(ddl_scope="local"), lambda r: cluster_of(r).pop("ddl_scope")]
)
def test_ddl_scope_must_be_cluster(edit: Edit) -> None:
    blocker = _only(
        _admit(external, edit),
        "DPONE_CLICKHOUSE_CLUSTER_DDL_SCOPE_REQUIRED",
        "physical_design.storage.clickhouse.cluster.ddl_scope",
    )
    assert blocker.detail in ("local", "omitted")


def test_staging_database_must_equal_target_database() -> None:
    _only(
        _admit(external, lambda r: r["sink"].update(staging_database="staging")),
        "DPONE_CLICKHOUSE_CLUSTER_STAGING_DATABASE_MISMATCH",
        "sink.staging_database",
    )


@pytest.mark.parametrize("bound", [None, 0, -1])
def test_source_byte_bound_must_be_positive(bound: int | None) -> None:
    def edit(raw: dict[str, Any]) -> None:
        if bound is None:
            raw["load"].pop("max_source_bytes")
        else:
            raw["load"]["max_source_bytes"] = bound

    _only(_admit(external, edit), "DPONE_CLICKHOUSE_CLUSTER_SOURCE_BYTES_UNBOUNDED", "load.max_source_bytes")


def test_cluster_publication_is_full_refresh_only() -> None:
    window = {"column": "ts", "start": "2026-09-01T00:00:00Z", "end": "2026-09-02T00:00:00Z"}
    _only(
        _admit(external, lambda r: r["load"].update(strategy="partition_replace", window=window)),
        "DPONE_CLICKHOUSE_CLUSTER_LOAD_STRATEGY_UNSUPPORTED",
        "load.strategy",
    )


@pytest.mark.parametrize("base", [external, internal])
def test_distributed_target_is_refused_in_both_modes(base: Callable[[], dict[str, Any]]) -> None:
    _only(
        _admit(base, lambda r: storage_of(r).update(engine="Distributed")),
        "DPONE_CLICKHOUSE_CLUSTER_DISTRIBUTED_TARGET",
        "physical_design.storage.clickhouse.engine",
    )


@pytest.mark.parametrize(
    "engine",
    [
        "SharedMergeTree",
        "SharedReplacingMergeTree",
        "Merge",
        "View",
        "MaterializedView",
        "Memory",
        "Log",
        "TinyLog",
        "KeeperMap",
        "Buffer",
        "Null",
        "Dictionary",
        "mergetree",
        "MergeTreeX",
        "FooMergeTree",
        "ReplicatedReplicatedMergeTree",
    ],
)
@pytest.mark.parametrize("base", [external, internal])
def test_non_merge_tree_and_unknown_engines_are_unsupported(base: Callable[[], dict[str, Any]], engine: str) -> None:
    _only(
        _admit(base, lambda r: storage_of(r).update(engine=engine)),
        "DPONE_CLICKHOUSE_CLUSTER_ENGINE_UNSUPPORTED",
        "physical_design.storage.clickhouse.engine",
    )


@pytest.mark.parametrize("family", sorted(MERGE_TREE_FAMILY))
def test_engine_mode_matrix(family: str) -> None:
    def engine(name: str) -> Edit:
        return lambda r: storage_of(r).update(engine=name)

    replicated = "Replicated" + family
    assert _admit(external, engine(family)).admissible
    assert _admit(internal, engine(replicated)).admissible
    for result in (_admit(external, engine(replicated)), _admit(internal, engine(family))):
        _only(result, "DPONE_CLICKHOUSE_CLUSTER_ENGINE_MODE_MISMATCH", "physical_design.storage.clickhouse.engine")
    # omission means internal, so a non-replicated engine without an explicit mode is a mismatch, never external
    omitted = _admit(external, engine(family), lambda r: cluster_of(r).pop("replication_mode"))
    _only(omitted, "DPONE_CLICKHOUSE_CLUSTER_ENGINE_MODE_MISMATCH", "physical_design.storage.clickhouse.engine")
    assert omitted.decision.as_dict()["replication_mode"] == "internal"


def test_access_table_is_not_a_publication_target() -> None:
    _only(
        _admit(external, lambda r: cluster_of(r).update(access_table="target_table_all")),
        "DPONE_CLICKHOUSE_CLUSTER_ACCESS_TABLE_UNSUPPORTED",
        "physical_design.storage.clickhouse.cluster.access_table",
    )


@pytest.mark.parametrize("table", ["__dpone_cluster_publication_authority", "t__dpone_ext_0123", "X__DPONE_y"])
def test_reserved_names_cannot_be_targets(table: str) -> None:
    _only(
        _admit(external, lambda r: r["sink"].update(table=table)),
        "DPONE_CLICKHOUSE_CLUSTER_TARGET_NAME_RESERVED",
        "sink.table",
    )


# ---------------------------------------------------------------------------------- durable quality replay --
def _replay(raw: dict[str, Any]) -> None:
    raw["sink"]["options"] = {"durable_quality_replay": True}


def test_replay_on_internal_full_refresh_is_admitted() -> None:
    """Seed 002: the internal replicated full refresh is the one route that records durable quality evidence."""
    result = _admit(internal, _replay)
    assert result.codes == ()
    assert result.decision.selected == "cluster_internal"


def test_a_quality_policy_without_the_selector_is_refused_not_ignored() -> None:
    result = _admit(internal, lambda r: r.update(quality={"min_rows": 5}))
    _only(result, "DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED", "quality")


@pytest.mark.parametrize("metric", ["null_count", "distinct_count"])
def test_null_and_distinct_target_metrics_are_admitted(metric: str) -> None:
    result = _admit(internal, _replay, lambda r: r.update(quality={"target_metrics": ["row_count", metric]}))
    assert result.codes == ()


@pytest.mark.parametrize(
    "quality",
    [
        {"target_metrics": ["row_count"], "target_columns": ["id"]},  # no per-column metric to select for
        {"target_metrics": ["null_count"], "target_columns": ["id", "id"]},
        {"target_metrics": ["null_count"], "target_columns": []},
        {"target_metrics": ["null_count"], "target_columns": [f"c{index}" for index in range(257)]},
    ],
)
def test_a_target_column_selection_is_refused_unless_bounded_unique_and_used(quality: dict[str, Any]) -> None:
    with pytest.raises(DponeError) as raised:
        _admit(internal, _replay, lambda r: r.update(quality=quality))
    assert raised.value.code == "DPONE_MANIFEST_FIELD_INVALID"


@pytest.mark.parametrize(
    "route",
    [
        lambda: _admit(external, _replay),
        lambda: _admit(internal, _replay, lambda r: storage_of(r).pop("cluster")),
        lambda: _admit(transfer, _replay),
        lambda: _admit(lambda: transfer("postgres"), _replay),
    ],
)
def test_replay_elsewhere_is_unsupported(route: Callable[[], AdmissionResult]) -> None:
    result = route()
    assert "DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED" in result.codes
    blocker = next(b for b in result.blockers if b.code == "DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED")
    assert blocker.field == "sink.options.durable_quality_replay"
    assert result.decision.selected is None


def test_replay_on_internal_partition_replace_is_unsupported() -> None:
    window = {"column": "ts", "start": "2026-09-01T00:00:00Z", "end": "2026-09-02T00:00:00Z"}
    result = _admit(internal, _replay, lambda r: r["load"].update(strategy="partition_replace", window=window))
    assert set(result.codes) == {
        "DPONE_CLICKHOUSE_CLUSTER_LOAD_STRATEGY_UNSUPPORTED",
        "DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED",
    }


# ------------------------------------------------------------------------------------------ all collected --
def test_every_blocker_is_collected_in_one_pass() -> None:
    result = _admit(
        external,
        _replay,
        lambda r: cluster_of(r).update(ddl_scope="local", access_table="facade"),
        lambda r: storage_of(r).update(engine="ReplicatedMergeTree"),
        lambda r: r["sink"].update(staging_database="other", table="t__dpone_x"),
        lambda r: r["load"].pop("max_source_bytes"),
    )
    assert result.codes == (
        "DPONE_CLICKHOUSE_CLUSTER_DDL_SCOPE_REQUIRED",
        "DPONE_CLICKHOUSE_CLUSTER_ACCESS_TABLE_UNSUPPORTED",
        "DPONE_CLICKHOUSE_CLUSTER_ENGINE_MODE_MISMATCH",
        "DPONE_CLICKHOUSE_CLUSTER_STAGING_DATABASE_MISMATCH",
        "DPONE_CLICKHOUSE_CLUSTER_TARGET_NAME_RESERVED",
        "DPONE_CLICKHOUSE_CLUSTER_SOURCE_BYTES_UNBOUNDED",
        "DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED",
    )
    assert result.decision == ReplicationDecision("cluster", None, "external", True, True)
    for blocker in result.blockers:
        rendered = blocker.as_dict()
        assert rendered["cause"] and rendered["action"] and rendered["field"]


# --------------------------------------------------------------------------------------- transfer blockers --
def test_query_visible_has_no_connected_replica_form() -> None:
    result = _admit(
        transfer,
        lambda r: r["source"]["options"]["native_transfer"].update(
            source_snapshot={"mode": "query_visible", "replica_scope": "connected_replica"}
        ),
    )
    _only(
        result,
        "native_transfer.source_snapshot_mode_invalid",
        "source.options.native_transfer.source_snapshot.replica_scope",
    )
    assert isinstance(result.decision, TransferDecision)
    assert (result.decision.source_snapshot, result.decision.replica_scope) == ("query_visible", "connected_replica")


def test_blocker_codes_must_be_registered() -> None:
    with pytest.raises(KeyError):
        Blocker("DPONE_CLICKHOUSE_CLUSTER_NOT_A_CODE", "x", "y")


# ------------------------------------------------------------------------------------------- engine parser --
def test_engine_classification_is_exact() -> None:
    assert classify_engine("MergeTree") is EngineClass.MERGE_TREE
    assert classify_engine("ReplicatedVersionedCollapsingMergeTree") is EngineClass.REPLICATED_MERGE_TREE
    assert classify_engine("SharedMergeTree") is EngineClass.SHARED_MERGE_TREE
    assert classify_engine("Distributed") is EngineClass.DISTRIBUTED
    for name in ("", "Replicated", "ReplicatedMergeTree(", "MergeTree ", "replicatedmergetree", "Shared"):
        assert classify_engine(name) is EngineClass.OTHER


# ------------------------------------------------------------------- query-level settings of the extraction --
def _with_query(query: str) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        raw["source"]["query"] = query

    return edit


@pytest.mark.parametrize(
    "query",
    [
        "SELECT id, name FROM analytics.source_table SETTINGS max_execution_time = 0",
        "SELECT id, name FROM analytics.source_table SETTINGS max_memory_usage=0, max_threads = 64",
        "SELECT id, name FROM analytics.source_table settings readonly = 0",
        "SELECT * FROM (SELECT id, name FROM analytics.source_table SETTINGS max_execution_time = 0)",
        "SELECT id, name FROM analytics.source_table SETTINGS /* a /* nested */ comment */ `readonly` = 0",
        'SELECT id, name FROM analytics.source_table SETTINGS "max_bytes_to_read" = 0',
        "SELECT 'it''s', name FROM analytics.source_table SETTINGS max_execution_time = 0",
    ],
)
def test_a_query_level_settings_clause_is_refused_before_any_connection(query: str) -> None:
    blocker = _only(
        _admit(external, _with_query(query)), "DPONE_CLICKHOUSE_CLUSTER_QUERY_SETTINGS_REFUSED", "source.query"
    )
    assert blocker.detail.endswith("SETTINGS clause(s)")  # counted, never quoted: the detail carries no query text
    assert not any(name in blocker.detail for name in ("readonly", "max_", "'"))


@pytest.mark.parametrize(
    "query",
    [
        "SELECT settings, name FROM analytics.source_table",
        "SELECT id, name FROM analytics.source_table WHERE settings = 1",
        "SELECT 'SETTINGS max_execution_time = 0' AS id, name FROM analytics.source_table",
        "SELECT id, name FROM analytics.source_table -- SETTINGS max_execution_time = 0",
        "SELECT id, name FROM analytics.source_table /* SETTINGS readonly = 0 */",
        "SELECT `settings` AS id, name FROM analytics.source_table",
    ],
)
def test_the_word_settings_outside_a_clause_is_not_one(query: str) -> None:
    assert _admit(external, _with_query(query)).admissible
