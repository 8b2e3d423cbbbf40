"""Admission policy of the native transfer source: selector, engine, schema/types, read profile, access, transport.

Pure decisions on observation values: no connector I/O.
"""

from __future__ import annotations

import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer_options import NativeTransferOptions, ReplicaScope
from airflow_provider_dpone.core.typed_digest import LogicalType
from airflow_provider_dpone.transfer.route.admission import check_transport
from airflow_provider_dpone.transfer.route.engine_admission import (
    admit_legacy_engine,
    admit_raw_engine,
    parse_engine_full,
)
from airflow_provider_dpone.transfer.route.read_profile import admit_access, admit_settings, frozen_settings
from airflow_provider_dpone.transfer.route.schema_admission import admit_columns, map_type
from airflow_provider_dpone.transfer.route.selector import RouteMode, resolve_selector
from airflow_provider_dpone.transfer.values.source_observation import (
    AccessObservation,
    ColumnObservation,
    RelationObservation,
    ReplicaObservation,
    RowPolicyObservation,
    SettingsObservation,
    TransportObservation,
)

pytestmark = pytest.mark.unit

UUID = "5f0c3f0e-8a7c-4f4e-9f5e-1a2b3c4d5e6f"
NO_REPLICA = ReplicaObservation(present=False)
A_REPLICA = ReplicaObservation(present=True, replica_name="r1", zookeeper_path="/ch/t/events", replica_path="/x")


def code_of(call, *args, **kwargs) -> str:
    with pytest.raises(DponeError) as info:
        call(*args, **kwargs)
    return info.value.code


def column(name: str, type_: str, default_kind: str = "") -> ColumnObservation:
    return ColumnObservation(
        name=name,
        type=type_,
        default_kind=default_kind,
        default_expression="",
        in_partition_key=False,
        in_sorting_key=False,
        in_primary_key=False,
    )


def relation(engine: str, engine_full: str, **overrides) -> RelationObservation:
    values = {
        "exists": True,
        "database_engine": "Atomic",
        "engine": engine,
        "engine_full": engine_full,
        "uuid": UUID,
        "columns": (column("id", "UInt64"), column("ver", "UInt64"), column("is_deleted", "UInt8")),
    }
    values.update(overrides)
    return RelationObservation(**values)


def requirement(mode: str | None = "exact_raw_rows", scope: str = "single_server"):
    snapshot = None if mode is None else {"mode": mode, "replica_scope": scope}
    return resolve_selector(NativeTransferOptions.model_validate({"source_snapshot": snapshot}))


# --- selector ---------------------------------------------------------------------------------------------------


def test_omission_and_query_visible_are_the_legacy_route() -> None:
    assert requirement(None).mode is RouteMode.LEGACY and requirement(None).declared is None
    explicit = requirement("query_visible")
    assert explicit.mode is RouteMode.LEGACY and explicit.declared is None  # one normalized form, bound everywhere
    assert code_of(requirement, "query_visible", "connected_replica") == "native_transfer.source_snapshot_mode_invalid"
    assert requirement("exact_raw_rows", "connected_replica").replica_scope is ReplicaScope.CONNECTED_REPLICA


# --- engine -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "engine_full", "expected"),
    [
        ("ReplacingMergeTree", "ReplacingMergeTree ORDER BY id", []),
        ("ReplacingMergeTree", "ReplacingMergeTree() ORDER BY id", []),
        ("ReplacingMergeTree", "ReplacingMergeTree(ver) ORDER BY id", [("identifier", "ver")]),
        (
            "ReplacingMergeTree",
            "ReplacingMergeTree(`ver`, is_deleted) PARTITION BY toYYYYMM(ts) ORDER BY id SETTINGS x = 1",
            [("identifier", "ver"), ("identifier", "is_deleted")],
        ),
        (
            "ReplicatedReplacingMergeTree",
            "ReplicatedReplacingMergeTree('/ch/{shard}/t(1)', '{replica}', ver) ORDER BY id",
            [("string", "'/ch/{shard}/t(1)'"), ("string", "'{replica}'"), ("identifier", "ver")],
        ),
    ],
)
def test_engine_arguments_are_parsed_exactly(engine: str, engine_full: str, expected) -> None:
    assert [(a.kind, a.text) for a in parse_engine_full(engine, engine_full)] == expected


@pytest.mark.parametrize(
    "engine_full",
    [
        "ReplacingMergeTreeX(ver) ORDER BY id",
        "ReplacingMergeTree(ver ORDER BY id",
        "ReplacingMergeTree(ver,) ORDER BY id",
        "ReplacingMergeTree(ver) FINAL",
    ],
)
def test_unparsed_engine_text_is_refused(engine_full: str) -> None:
    assert code_of(parse_engine_full, "ReplacingMergeTree", engine_full) == "native_transfer.source_engine_unsupported"


def test_raw_engine_signature_binds_version_and_delete_columns() -> None:
    signature = admit_raw_engine(
        requirement(), relation("ReplacingMergeTree", "ReplacingMergeTree(ver, is_deleted) ORDER BY id"), NO_REPLICA
    )
    assert (signature.version_column, signature.is_deleted_column, signature.replicated) == ("ver", "is_deleted", False)
    replicated = admit_raw_engine(
        requirement("exact_raw_rows", "connected_replica"),
        relation("ReplicatedReplacingMergeTree", "ReplicatedReplacingMergeTree('/p', 'r', ver) ORDER BY id"),
        A_REPLICA,
    )
    assert replicated.replicated and replicated.replication_path_sha256 and replicated.is_deleted_column is None


@pytest.mark.parametrize(
    ("scope", "engine", "engine_full", "replica", "code"),
    [
        ("single_server", "MergeTree", "MergeTree ORDER BY id", NO_REPLICA, "replacing_raw_snapshot_required"),
        (
            "single_server",
            "SharedReplacingMergeTree",
            "SharedReplacingMergeTree ORDER BY id",
            NO_REPLICA,
            "source_engine_unsupported",
        ),
        ("single_server", "Distributed", "Distributed(c, db, t)", NO_REPLICA, "source_engine_unsupported"),
        ("single_server", "View", "View", NO_REPLICA, "source_engine_unsupported"),
        ("single_server", "Alias", "Alias(db, t)", NO_REPLICA, "source_engine_unsupported"),
        (
            "connected_replica",
            "ReplacingMergeTree",
            "ReplacingMergeTree(ver) ORDER BY id",
            NO_REPLICA,
            "replica_scope_unproven",
        ),
        (
            "single_server",
            "ReplicatedReplacingMergeTree",
            "ReplicatedReplacingMergeTree('/p', 'r') ORDER BY id",
            A_REPLICA,
            "replica_scope_unproven",
        ),
        (
            "connected_replica",
            "ReplicatedReplacingMergeTree",
            "ReplicatedReplacingMergeTree('/p', 'r') ORDER BY id",
            NO_REPLICA,
            "replica_scope_unproven",
        ),
        (
            "connected_replica",
            "ReplicatedReplacingMergeTree",
            "ReplicatedReplacingMergeTree('/p') ORDER BY id",
            A_REPLICA,
            "source_engine_unsupported",
        ),
        (
            "single_server",
            "ReplacingMergeTree",
            "ReplacingMergeTree(ver + 1) ORDER BY id",
            NO_REPLICA,
            "source_engine_unsupported",
        ),
        (
            "single_server",
            "ReplacingMergeTree",
            "ReplacingMergeTree(ver, is_deleted, id) ORDER BY id",
            NO_REPLICA,
            "source_engine_unsupported",
        ),
        (
            "single_server",
            "ReplacingMergeTree",
            "ReplacingMergeTree(missing) ORDER BY id",
            NO_REPLICA,
            "source_engine_unsupported",
        ),
        (
            "single_server",
            "ReplacingMergeTree",
            "ReplacingMergeTree(ver, ver) ORDER BY id",
            NO_REPLICA,
            "source_engine_unsupported",
        ),
    ],
)
def test_raw_engine_refusals(scope, engine, engine_full, replica, code) -> None:
    assert code_of(admit_raw_engine, requirement("exact_raw_rows", scope), relation(engine, engine_full), replica) == (
        "native_transfer." + code
    )


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"database_engine": "Ordinary"}, "source_engine_unsupported"),
        ({"uuid": "00000000-0000-0000-0000-000000000000"}, "source_engine_unsupported"),
        ({"is_temporary": True}, "source_engine_unsupported"),
        ({"exists": False}, "source_relation_not_found"),
    ],
)
def test_relation_refusals(overrides, code) -> None:
    observed = relation("ReplacingMergeTree", "ReplacingMergeTree(ver) ORDER BY id", **overrides)
    assert code_of(admit_raw_engine, requirement(), observed, NO_REPLICA) == "native_transfer." + code


def test_legacy_admits_plain_merge_tree_only() -> None:
    admit_legacy_engine(relation("MergeTree", "MergeTree ORDER BY id"))
    replacing = relation("ReplacingMergeTree", "ReplacingMergeTree(ver) ORDER BY id")
    assert code_of(admit_legacy_engine, replacing) == "native_transfer.replacing_raw_snapshot_required"
    assert code_of(admit_legacy_engine, relation("Log", "Log")) == "native_transfer.source_engine_unsupported"


# --- schema and types ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_", "logical", "nullable", "scale"),
    [
        ("UInt64", LogicalType.INTEGER, False, 0),
        ("Int8", LogicalType.INTEGER, False, 0),
        ("Nullable(Int32)", LogicalType.INTEGER, True, 0),
        ("Bool", LogicalType.BOOLEAN, False, 0),
        ("Decimal(38, 10)", LogicalType.DECIMAL, False, 10),
        ("Nullable(Decimal64(4))", LogicalType.DECIMAL, True, 4),
        ("String", LogicalType.STRING, False, 0),
        ("LowCardinality(Nullable(String))", LogicalType.STRING, True, 0),
        ("FixedString(16)", LogicalType.STRING, False, 0),
        ("UUID", LogicalType.UUID, False, 0),
        ("Date32", LogicalType.DATE, False, 0),
        ("DateTime('UTC')", LogicalType.DATETIME, False, 0),
        ("DateTime64(6, 'UTC')", LogicalType.DATETIME, False, 6),
        ("Nullable(DateTime64(3, 'Etc/UTC'))", LogicalType.DATETIME, True, 3),
    ],
)
def test_admitted_types(type_: str, logical: LogicalType, nullable: bool, scale: int) -> None:
    mapped = map_type("c", type_, implicit_utc=False)
    assert (mapped.logical, mapped.nullable, mapped.scale, mapped.source_type) == (logical, nullable, scale, type_)


@pytest.mark.parametrize(
    "type_",
    [
        "Float64",
        "Nullable(Float32)",
        "Int128",
        "UInt256",
        "Decimal(40, 2)",
        "Decimal256(2)",
        "DateTime64(9, 'UTC')",
        "DateTime('Europe/Berlin')",
        "DateTime",
        "Array(UInt8)",
        "Map(String, UInt8)",
        "Tuple(a UInt8)",
        "JSON",
        "Dynamic",
        "Variant(String, UInt8)",
        "AggregateFunction(sum, UInt64)",
        "LowCardinality(UInt8)",
        "Enum8('a' = 1)",
        "IPv4",
    ],
)
def test_refused_types(type_: str) -> None:
    assert code_of(map_type, "c", type_, implicit_utc=False) == "native_transfer.source_schema_unsupported"


def test_implicit_datetime_needs_proven_utc_calendars() -> None:
    assert map_type("c", "DateTime", implicit_utc=True).logical is LogicalType.DATETIME


@pytest.mark.parametrize("kind", ["DEFAULT", "MATERIALIZED", "ALIAS", "EPHEMERAL"])
def test_computed_columns_are_refused(kind: str) -> None:
    columns = (column("id", "UInt64"), column("x", "UInt8", kind))
    assert code_of(admit_columns, columns, raw=True, implicit_utc=True) == "native_transfer.source_schema_unsupported"


@pytest.mark.parametrize("name", ["_part", "_part_offset"])
def test_provenance_names_are_reserved_in_raw_mode_only(name: str) -> None:
    columns = (column("id", "UInt64"), column(name, "String"))
    assert code_of(admit_columns, columns, raw=True, implicit_utc=True) == "native_transfer.source_schema_unsupported"
    projection, _ = admit_columns(columns, raw=False, implicit_utc=True)
    assert [c.name for c in projection] == ["id", name]


# --- read profile and access --------------------------------------------------------------------------------------


def effective(**changes: str) -> SettingsObservation:
    values = {**frozen_settings(3600), "additional_table_filters": "{}", "additional_result_filter": ""}
    values.update(changes)
    return SettingsObservation(values=values)


def test_frozen_settings_are_bound_sorted_with_filter_state() -> None:
    records, filters = admit_settings(effective(), frozen_settings(3600))
    assert [r.name for r in records] == sorted(frozen_settings(3600))
    assert {r.name: r.value for r in records}["final"] == "0"
    assert (filters.additional_table_filters, filters.additional_result_filter) == ("empty", "empty")
    absent = effective()
    del absent.values["additional_result_filter"]
    assert admit_settings(absent, frozen_settings(3600))[1].additional_result_filter == "absent"


@pytest.mark.parametrize(
    "observed",
    [
        effective(final="1"),
        effective(max_parallel_replicas="4"),
        effective(apply_deleted_mask="0"),
        effective(additional_table_filters="{'db.t': 'id > 1'}"),
        effective(additional_result_filter="id > 1"),
    ],
)
def test_overridden_or_filtered_profiles_are_refused(observed: SettingsObservation) -> None:
    assert code_of(admit_settings, observed, frozen_settings(3600)) == "native_transfer.source_read_profile_unsupported"


def test_missing_frozen_setting_is_refused() -> None:
    observed = effective()
    del observed.values["apply_patch_parts"]
    assert code_of(admit_settings, observed, frozen_settings(3600)) == "native_transfer.source_read_profile_unsupported"
    assert code_of(frozen_settings, 0) == "native_transfer.source_read_profile_unsupported"


def policy(
    select_filter: str, *, to_all: bool = False, to_list: tuple[str, ...] = ("default",)
) -> RowPolicyObservation:
    return RowPolicyObservation(
        policy_id="p1",
        name="p ON db.t",
        select_filter=select_filter,
        is_restrictive=False,
        apply_to_all=to_all,
        apply_to_list=to_list,
        apply_to_except=(),
    )


def access(*policies: RowPolicyObservation, inspectable: bool = True) -> AccessObservation:
    return AccessObservation(
        user="default", current_roles=(), enabled_roles=(), policies_inspectable=inspectable, row_policies=policies
    )


def test_policy_filtered_means_a_policy_applies_to_this_principal() -> None:
    to_all = admit_access(access(policy("id % 2 = 0", to_all=True, to_list=())))
    own = admit_access(access(policy("1", to_list=("default",)), policy("id % 2 = 0", to_list=("analyst",))))
    assert to_all.policy_filtered and own.policy_filtered
    assert own.row_policy_sha256 != admit_access(access(policy("1", to_list=("default",)))).row_policy_sha256


@pytest.mark.parametrize("listed", ["others_only", "all_except_this_account"])
def test_policies_none_of_which_applies_to_this_account_are_refused(listed: str) -> None:
    """Seed 003 (PF13, AL5a): such an account reads every row or none, by a server setting SQL cannot read
    (``users_without_row_policies_can_read_rows``), so the evidence could not say whether the read was filtered."""
    if listed == "others_only":
        observed = access(policy("id % 2 = 0", to_list=("analyst",)))
    else:
        excepted = policy("id % 2 = 0", to_all=True, to_list=()).model_copy(update={"apply_to_except": ("default",)})
        observed = access(excepted)
    assert code_of(admit_access, observed) == "native_transfer.source_read_profile_unsupported"


def test_access_binds_policy_identity_without_predicate_text() -> None:
    unfiltered = admit_access(access())
    filtered = admit_access(access(policy("id % 2 = 0")))
    other_predicate = admit_access(access(policy("id % 3 = 0")))
    assert not unfiltered.policy_filtered and filtered.policy_filtered
    assert len({unfiltered.row_policy_sha256, filtered.row_policy_sha256, other_predicate.row_policy_sha256}) == 3
    assert "id % 2" not in filtered.model_dump_json()


def test_uninspectable_policies_are_refused() -> None:
    assert code_of(admit_access, access(inspectable=False)) == "native_transfer.source_read_profile_unsupported"


# --- transport ----------------------------------------------------------------------------------------------------


def transport(**changes) -> TransportObservation:
    values = {
        "scheme": "https",
        "tls_verified": True,
        "requires_tls": True,
        "bounded_timeouts": True,
        "pinned": True,
        "endpoint_authority": "h:8443",
    }
    values.update(changes)
    return TransportObservation(**values)


def test_transport_authority() -> None:
    assert check_transport(transport()).scheme == "https"
    assert check_transport(transport(scheme="http", tls_verified=False, requires_tls=False)).scheme == "http"
    for changes, code in [
        ({"scheme": "http", "tls_verified": False}, "source_transport_unsupported"),
        ({"tls_verified": False}, "source_transport_unsupported"),
        ({"bounded_timeouts": False}, "source_transport_unsupported"),
        ({"follows_redirects": True}, "source_transport_unsupported"),
        ({"pinned": False}, "replica_scope_unproven"),
    ]:
        assert code_of(check_transport, transport(**changes)) == "native_transfer." + code
