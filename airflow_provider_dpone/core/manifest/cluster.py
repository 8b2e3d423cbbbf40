"""Manifest of the ClickHouse cluster full-refresh publication route.

The model accepts every *well-formed* declaration, including ones static admission will refuse (a ``local`` DDL
scope, a Distributed engine, a missing byte bound): a well-formed but inadmissible manifest gets a domain code from
``admission`` that explains the rule, rather than a generic "invalid field".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Field, StrictInt, StrictStr, model_validator

from airflow_provider_dpone.core.canonical import Closed, canonical_json, sha256_hex
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.types import (
    ConnectionId,
    DocType,
    Identifier,
    LoadStrategy,
    ManifestName,
    ManifestVersion,
    Sha256Hex,
    SinkOptions,
    SqlQuery,
    StoreUri,
    Window,
    check_window_for_strategy,
    identifier_value,
)

MAX_TARGET_COLUMNS: Final[int] = 256
"""At most this many selected columns in one acceptance read."""
TargetMetric = Literal["row_count", "null_count", "distinct_count"]
COLUMN_METRICS: Final[frozenset[str]] = frozenset({"null_count", "distinct_count"})
"""The metrics observed per selected column (``row_count`` is one number for the table)."""
GateName = Literal["row_count_reconciliation", "min_rows", "typed_hash_reconciliation"]
GATES: Final[tuple[GateName, ...]] = ("row_count_reconciliation", "min_rows", "typed_hash_reconciliation")


class QualityPolicy(Closed):
    """The gates of a durable quality replay; every gate is required (a failed gate blocks publication)."""

    min_rows: StrictInt = Field(default=0, ge=0, description="Lowest staged row count the min_rows gate accepts.")
    target_metrics: tuple[TargetMetric, ...] = Field(
        default=("row_count",),
        description="Post-commit target observations on one admitted replica (empty: source/staged-only evidence): "
        "row_count, and null_count / distinct_count of each selected column, each equal to the staged candidate's.",
    )
    target_columns: tuple[StrictStr, ...] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TARGET_COLUMNS,
        description="Columns null_count and distinct_count observe (default: every column of the table; at most "
        f"{MAX_TARGET_COLUMNS}).",
    )

    @model_validator(mode="after")
    def _unique(self) -> QualityPolicy:
        if len(set(self.target_metrics)) != len(self.target_metrics):
            raise ValueError("target_metrics are listed once each")
        if self.target_columns is not None:
            if len(set(self.target_columns)) != len(self.target_columns):
                raise ValueError("target_columns are listed once each")
            if not COLUMN_METRICS & set(self.target_metrics):
                raise ValueError("target_columns select the columns of null_count / distinct_count: request one")
        return self

    @property
    def observes_columns(self) -> bool:
        """Whether a metric is observed per selected column (the table's columns must be known to admit it)."""
        return bool(COLUMN_METRICS & set(self.target_metrics))

    def selected_columns(self, names: Sequence[str]) -> tuple[str, ...]:
        """The columns the column metrics observe in a table of ``names`` (none without a column metric): the
        ``target_columns``, else every column; an unknown or over-limit selection is ``..._UNSUPPORTED``."""
        if not self.observes_columns:
            return ()
        selected = self.target_columns or tuple(names)
        unknown = sorted(set(selected) - set(names))
        if unknown or len(selected) > MAX_TARGET_COLUMNS:
            detail = f"{len(unknown)} selected columns are not in the table" if unknown else f"{len(selected)} columns"
            raise DponeError(
                "DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED",
                f"target observation selects at most {MAX_TARGET_COLUMNS} table columns: {detail}",
            )
        return selected

    def identity(self) -> str:
        """The normalized policy identity: the digest of the policy with its gates spelled out."""
        return sha256_hex(canonical_json({"gates": list(GATES), **self.model_dump(mode="json")}))


class ReplicationMode(StrEnum):
    INTERNAL = "internal"
    EXTERNAL = "external"


class DdlScope(StrEnum):
    CLUSTER = "cluster"
    LOCAL = "local"


class ClickHouseQuerySource(Closed):
    """Extract the rows of one query through a ClickHouse connection into a sealed, replayable artifact."""

    type: Literal["clickhouse"] = Field(description="Source kind.")
    connection_id: ConnectionId = Field(description="Airflow connection id of the ClickHouse server to read from.")
    query: SqlQuery = Field(
        description="The SELECT whose result is published, run read-only (readonly = 1) under [dpone] "
        "extraction_timeout_seconds; a query-level SETTINGS clause is refused "
        "(DPONE_CLICKHOUSE_CLUSTER_QUERY_SETTINGS_REFUSED). Only its SHA-256 enters the normalized plan."
    )


class SealedArtifactSource(Closed):
    """Publish an already sealed, content-addressed artifact instead of extracting (parsed and validated; static
    admission refuses it with ``DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_SOURCE_UNSUPPORTED`` until staging from a store by
    its identity is provided)."""

    type: Literal["artifact"] = Field(description="Source kind.")
    sha256: Sha256Hex = Field(description="SHA-256 of the artifact bytes (its content address).")
    store_uri: StoreUri = Field(
        description="Root of the content-addressed artifact store (file://, s3://, gs://, ...); never credentials."
    )
    store_connection_id: ConnectionId | None = Field(
        default=None, description="Airflow connection id that grants access to the store, if it needs one."
    )


PublicationSource = Annotated[ClickHouseQuerySource | SealedArtifactSource, Field(discriminator="type")]


class ClickHouseSink(Closed):
    """The publication target: one table on every member of one ClickHouse cluster."""

    type: Literal["clickhouse"] = Field(description="Sink kind.")
    connection_id: ConnectionId = Field(description="Airflow connection id (dpone_clickhouse) of the coordinator.")
    database: Identifier = Field(description="Target database (Atomic) on every member.")
    table: Identifier = Field(description="Target table, a direct *MergeTree table on every member.")
    staging_database: Identifier | None = Field(
        default=None, description="Database of the staging candidates; must equal database (default: database)."
    )
    options: SinkOptions = Field(default_factory=SinkOptions, description="Sink options.")

    @property
    def effective_staging_database(self) -> str:
        return self.staging_database if self.staging_database is not None else self.database


class ClusterLoad(Closed):
    strategy: LoadStrategy = Field(description="full_refresh (partition_replace is not a cluster publication).")
    max_source_bytes: StrictInt | None = Field(
        default=None, description="Upper bound on the extracted artifact in bytes; required, positive."
    )
    max_source_rows: StrictInt | None = Field(
        default=None,
        ge=1,
        description="The admitted content row budget: an artifact with more rows is refused before any candidate "
        "exists. Part of the normalized plan, so every task of the operation carries the same budget.",
    )
    window: Window | None = Field(default=None, description="Only with partition_replace.")

    @model_validator(mode="after")
    def _window_matches_strategy(self) -> ClusterLoad:
        check_window_for_strategy(self.strategy, self.window)
        return self


class ClusterSettings(Closed):
    name: Identifier = Field(description="Cluster name as system.clusters reports it.")
    ddl_scope: DdlScope | None = Field(
        default=None, description="Must be 'cluster': publication is one correlated ON CLUSTER operation."
    )
    replication_mode: ReplicationMode = Field(
        default=ReplicationMode.INTERNAL,
        description="internal: Replicated*MergeTree and internal_replication=true. external: direct non-replicated "
        "*MergeTree on every member and internal_replication=false. Omitted means internal.",
    )
    access_table: Identifier | None = Field(
        default=None, description="Distributed read facade; not supported (must be omitted)."
    )


PARTITION_FUNCTIONS: Final[frozenset[str]] = frozenset(
    {
        "toYYYYMM",
        "toYYYYMMDD",
        "toYear",
        "toDate",
        "toMonday",
        "toStartOfDay",
        "toStartOfWeek",
        "toStartOfMonth",
        "toStartOfQuarter",
        "toStartOfYear",
    }
)
_PARTITION_CALL: Final[re.Pattern[str]] = re.compile(r"^([A-Za-z]+)\(([^()]*)\)$")


def _partition_expression(value: str) -> str:
    call = _PARTITION_CALL.fullmatch(value)
    if call is None:
        return identifier_value(value)
    function, column = call.groups()
    if function not in PARTITION_FUNCTIONS:
        raise ValueError("partition_by function must be one of " + ", ".join(sorted(PARTITION_FUNCTIONS)))
    identifier_value(column)
    return value


PartitionExpression = Annotated[StrictStr, AfterValidator(_partition_expression), DocType("column or function(column)")]


class ClickHouseStorage(Closed):
    engine: StrictStr = Field(
        pattern=r"^[A-Za-z][A-Za-z0-9]{0,63}$",
        description="Table engine name without parameters, e.g. ReplicatedMergeTree (internal) or MergeTree "
        "(external).",
    )
    order_by: tuple[Identifier, ...] = Field(description="Sorting key columns; [] means tuple().")
    partition_by: PartitionExpression | None = Field(
        default=None, description="A column, or one of the date functions of a column (toYYYYMM(ts), ...)."
    )
    cluster: ClusterSettings | None = Field(default=None, description="The target cluster; required.")


class Storage(Closed):
    clickhouse: ClickHouseStorage = Field(description="ClickHouse physical design of the target.")


class PhysicalDesign(Closed):
    storage: Storage = Field(description="Storage of the target.")


class ClusterPublicationManifest(Closed):
    """Full refresh of one ClickHouse cluster table, fenced in Keeper and published by one ON CLUSTER operation."""

    version: ManifestVersion = Field(description="Manifest schema version; 1.")
    name: ManifestName = Field(description="Job name (a label; not part of the normalized plan).")
    source: PublicationSource = Field(
        description="Where the rows come from: a query (a sealed artifact is parsed but refused by admission in this version)."
    )
    sink: ClickHouseSink = Field(description="The cluster table to publish.")
    load: ClusterLoad = Field(description="Load strategy and bounds.")
    physical_design: PhysicalDesign = Field(description="Engine, keys and cluster topology of the target.")
    quality: QualityPolicy | None = Field(
        default=None,
        description="Gates of the durable quality replay (only with sink.options.durable_quality_replay: true; "
        "default when that is true: min_rows 0 and the row_count target observation).",
    )

    @property
    def cluster(self) -> ClusterSettings | None:
        return self.physical_design.storage.clickhouse.cluster

    @property
    def quality_policy(self) -> QualityPolicy | None:
        """The selected durable quality-replay policy, or ``None`` when the option is off (legacy behaviour)."""
        if not self.sink.options.durable_quality_replay:
            return None
        return self.quality or QualityPolicy()
