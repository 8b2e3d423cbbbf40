"""A fixed, fully specified raw-snapshot profile and plan: the golden inputs of the contract tests."""

from __future__ import annotations

import datetime as dt

from airflow_provider_dpone.core.manifest.transfer_options import SourceSnapshot
from airflow_provider_dpone.transfer.route.read_profile import frozen_settings
from airflow_provider_dpone.transfer.route.schema_admission import map_type
from airflow_provider_dpone.transfer.values.chunk import NativeChunkPlan, RelationRef
from airflow_provider_dpone.transfer.values.raw_snapshot import (
    AccessRecord,
    EngineSignature,
    FilterState,
    KeysRecord,
    QueryRecord,
    RawSnapshotProfile,
    ReplicaRecord,
    SchemaColumnRecord,
    ServerRecord,
    SettingRecord,
    TransportRecord,
    legacy_source_binding_sha256,
    raw_source_query_id,
)
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow

H = "ab" * 32
RELATION = RelationRef(database="sales", table="events")
WINDOW = UtcWindow.of("ts", dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 2, 1, tzinfo=dt.UTC))
TYPES = [("id", "UInt64"), ("ver", "UInt64"), ("is_deleted", "UInt8"), ("ts", "DateTime64(3, 'UTC')")]
COLUMNS = tuple(map_type(name, type_, implicit_utc=False) for name, type_ in TYPES)


def profile(**changes: object) -> RawSnapshotProfile:
    values: dict[str, object] = {
        "engine": EngineSignature(
            name="ReplacingMergeTree",
            version_column="ver",
            is_deleted_column="is_deleted",
            replicated=False,
            replication_path_sha256=None,
            engine_full_sha256=H,
        ),
        "relation_uuid": "5f0c3f0e-8a7c-4f4e-9f5e-1a2b3c4d5e6f",
        "database_engine": "Atomic",
        "schema_columns": tuple(
            SchemaColumnRecord(
                name=name,
                type=type_,
                default_kind="",
                in_partition_key=name == "ts",
                in_sorting_key=name == "id",
                in_primary_key=name == "id",
            )
            for name, type_ in TYPES
        ),
        "keys": KeysRecord(partition_key_sha256=H, sorting_key_sha256=H, primary_key_sha256=H),
        "window": WINDOW,
        "read_settings": tuple(SettingRecord(name=k, value=v) for k, v in sorted(frozen_settings(3600).items())),
        "filters": FilterState(additional_table_filters="empty", additional_result_filter="empty"),
        "pending_classic_mutations": 0,
        "server": ServerRecord(version="26.9.2.1", revision=54515, timezone="UTC", session_timezone=""),
        "endpoint_authority_sha256": H,
        "transport": TransportRecord(scheme="https", tls_verified=True),
        "replica": ReplicaRecord(scope="single_server", identity_sha256=None),
        "access": AccessRecord(principal_sha256=H, roles_sha256=H, row_policy_sha256=H, policy_filtered=False),
        "query": QueryRecord(query_shape_sha256=H, projection_sha256=H, parameters_sha256=H),
    }
    values.update(changes)
    return RawSnapshotProfile.model_validate(values)


def legacy_binding() -> str:
    return legacy_source_binding_sha256(RELATION.identity(), "cd" * 32, WINDOW)


def plan(*, raw: bool = True) -> NativeChunkPlan:
    legacy = legacy_binding()
    return NativeChunkPlan(
        operation_id="0" * 32,
        invocation_id="1" * 32,
        route_fingerprint="cd" * 32,
        selector=SourceSnapshot(mode="exact_raw_rows") if raw else None,
        relation=RELATION,
        window=WINDOW,
        columns=COLUMNS,
        chunk_rows=100,
        max_chunk_bytes=1 << 20,
        legacy_source_binding_sha256=legacy,
        source_query_id=raw_source_query_id(legacy, profile().sha256()) if raw else legacy,
    )
