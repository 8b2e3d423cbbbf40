"""Internal (replicated, ADR 0067) authority records that share the target-key namespace with external records.

``dpone.clickhouse.cluster-full-refresh.v1`` is the internal replicated-publication record: one shared generation
(one staging table replicated by ClickHouse), so it binds one staging UUID and one target UUID instead of a member
map. ``...v2`` (seed 002) adds the durable quality-evidence binding; the new fields are optional, and a v1 record keeps
its original v1 encoding (the codec never upgrades a record it reads).

External mode only needs to *read* these: an unresolved internal record blocks external mode, and a terminal one may
be succeeded by an external operation through a versioned CAS that records the predecessor's schema and operation.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from airflow_provider_dpone.contracts.authority_external import AuthorityCore, DdlBinding
from airflow_provider_dpone.contracts.authority_fields import Hex64, TimestampMs, UInt64, UuidText

INTERNAL_SCHEMA_V1: Literal["dpone.clickhouse.cluster-full-refresh.v1"] = "dpone.clickhouse.cluster-full-refresh.v1"
INTERNAL_SCHEMA_V2: Literal["dpone.clickhouse.cluster-full-refresh.v2"] = "dpone.clickhouse.cluster-full-refresh.v2"

_CONFIG = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True)


class _InternalFields(AuthorityCore):
    model_config = _CONFIG

    replication_mode: Literal["internal"] = "internal"
    generation_id: Hex64 | None = None
    staging_table_uuid: UuidText | None = None
    target_uuid: UuidText | None = None
    publication: DdlBinding | None = None
    cleanup: DdlBinding | None = None
    created_at_ms: TimestampMs
    updated_at_ms: TimestampMs


class InternalAuthorityRecordV1(_InternalFields):
    """The internal replicated-publication record, version 1."""

    schema_: Literal["dpone.clickhouse.cluster-full-refresh.v1"] = Field(default=INTERNAL_SCHEMA_V1, alias="schema")


class QualityBinding(BaseModel):
    """Seed 002: the immutable quality-evidence core bound before publication and its completion state."""

    model_config = _CONFIG

    core_digest: Hex64
    state: Literal["PREPARED", "TARGET_PENDING", "COMPLETE", "FAILED"]
    completion_version: UInt64 | None = None
    target_observation_digest: Hex64 | None = None
    policy_identity: StrictStr | None = None


class InternalAuthorityRecordV2(_InternalFields):
    """Version 2: version 1 plus the optional durable quality-evidence binding."""

    schema_: Literal["dpone.clickhouse.cluster-full-refresh.v2"] = Field(default=INTERNAL_SCHEMA_V2, alias="schema")
    quality: QualityBinding | None = None
