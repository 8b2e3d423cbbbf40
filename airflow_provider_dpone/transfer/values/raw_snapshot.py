"""``dpone.clickhouse-raw-snapshot-profile.v1`` and the versioned ``source_query_id`` binding.

The profile is frozen before any row I/O. Its SHA-256 binds everything that determines which rows one plain,
non-FINAL SELECT returns and how they are typed: engine signature, relation UUID, schema and keys, the UTC window,
the effective read settings and filter state, server revision, the sanitized endpoint authority, replica scope and
identity, principal/roles, row-policy identity, and the digests of the query shape, projection and parameters.
It never contains SQL text, relation coordinates, hosts, user names, policy predicates or row values: those are
reduced to digests by admission.

``source_query_id`` is the opaque source binding of the chunk plan. Legacy (omitted selector) keeps the unprefixed
SHA-256 of the legacy binding; raw mode prefixes ``clickhouse.raw-query.v1:`` to a digest that co-binds the legacy
binding and the profile digest, so recovery can tell the two apart and recompute the raw one.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

from airflow_provider_dpone.core.canonical import Closed, Hex64, canonical_json_bytes, digest, sha256_hex
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer_options import ReplicaScope
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow

PROFILE_KIND: Final = "dpone.clickhouse-raw-snapshot-profile.v1"
RAW_MARKER_PREFIX: Final = "clickhouse.raw-query.v1:"
BINDING_KIND: Final = "dpone.clickhouse-raw-query-binding.v1"
_HEX64: Final[re.Pattern[str]] = re.compile(r"[0-9a-f]{64}")


class EngineSignature(Closed):
    """The parsed engine: version/is_deleted arguments are bound, never interpreted."""

    name: Literal["ReplacingMergeTree", "ReplicatedReplacingMergeTree"]
    version_column: str | None
    is_deleted_column: str | None
    replicated: bool
    replication_path_sha256: str | None
    engine_full_sha256: Hex64


class SchemaColumnRecord(Closed):
    name: str
    type: str
    default_kind: Literal[""]
    in_partition_key: bool
    in_sorting_key: bool
    in_primary_key: bool


class KeysRecord(Closed):
    partition_key_sha256: Hex64
    sorting_key_sha256: Hex64
    primary_key_sha256: Hex64


class SettingRecord(Closed):
    name: str
    value: str


class FilterState(Closed):
    """Inspected server-side filters: they must be empty (``absent`` when the server has no such setting)."""

    additional_table_filters: Literal["empty"]
    additional_result_filter: Literal["empty", "absent"]


class ServerRecord(Closed):
    version: str
    revision: int
    timezone: str
    session_timezone: str


class TransportRecord(Closed):
    scheme: Literal["https", "http", "inprocess"]
    tls_verified: bool


class ReplicaRecord(Closed):
    scope: ReplicaScope
    identity_sha256: str | None


class AccessRecord(Closed):
    principal_sha256: Hex64
    roles_sha256: Hex64
    row_policy_sha256: Hex64
    policy_filtered: bool


class QueryRecord(Closed):
    query_shape_sha256: Hex64
    projection_sha256: Hex64
    parameters_sha256: Hex64


class RawSnapshotProfile(Closed):
    """The frozen read profile of one raw-row snapshot invocation."""

    kind: Literal["dpone.clickhouse-raw-snapshot-profile.v1"] = PROFILE_KIND
    mode: Literal["exact_raw_rows"] = "exact_raw_rows"
    engine: EngineSignature
    relation_uuid: str
    database_engine: Literal["Atomic"]
    schema_columns: tuple[SchemaColumnRecord, ...]
    keys: KeysRecord
    window: UtcWindow | None
    read_settings: tuple[SettingRecord, ...]
    filters: FilterState
    pending_classic_mutations: Literal[0]
    server: ServerRecord
    endpoint_authority_sha256: Hex64
    transport: TransportRecord
    replica: ReplicaRecord
    access: AccessRecord
    query: QueryRecord

    def preimage(self) -> dict[str, Any]:
        """The bounded canonical preimage stored in the completion extension."""
        return self.model_dump(mode="json")

    def sha256(self) -> str:
        return digest(self.preimage())


def legacy_source_binding_sha256(relation: dict[str, str], route_fingerprint: str, window: UtcWindow | None) -> str:
    """The unchanged legacy binding: relation identity, route fingerprint and UTC window."""
    return sha256_hex(
        canonical_json_bytes(
            {
                "relation": relation,
                "route_fingerprint": route_fingerprint,
                "window": None if window is None else window.model_dump(mode="json"),
            }
        )
    )


def raw_source_query_id(legacy_binding_sha256: str, profile_sha256: str) -> str:
    """``clickhouse.raw-query.v1:`` + SHA256 of the binding of the legacy binding and the frozen profile."""
    return RAW_MARKER_PREFIX + sha256_hex(
        canonical_json_bytes(
            {
                "kind": BINDING_KIND,
                "legacy_source_binding_sha256": legacy_binding_sha256,
                "source_snapshot_profile_sha256": profile_sha256,
            }
        )
    )


class SourceMarker(Closed):
    """The decoded source binding of a chunk plan: ``legacy`` (unprefixed) or ``raw_v1`` (marker prefix)."""

    kind: Literal["legacy", "raw_v1"]
    binding_sha256: str


def decode_source_marker(source_query_id: str) -> SourceMarker:
    """Closed decoder: unprefixed 64-hex is legacy, the v1 prefix is raw, anything else fails closed."""
    if _HEX64.fullmatch(source_query_id):
        return SourceMarker(kind="legacy", binding_sha256=source_query_id)
    if source_query_id.startswith(RAW_MARKER_PREFIX):
        rest = source_query_id[len(RAW_MARKER_PREFIX) :]
        if _HEX64.fullmatch(rest):
            return SourceMarker(kind="raw_v1", binding_sha256=rest)
    raise DponeError("native_transfer.recovery_binding_invalid", "source_query_id has an unknown marker version")
