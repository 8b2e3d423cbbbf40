"""Static admission of the ClickHouse cluster full-refresh route, and its replication decision.

Every rule here reads the manifest only: no connection, credential or catalog. What only the live cluster can prove
(one shard, two or more members, uniform ``internal_replication`` flags matching the mode, Atomic databases, KeeperMap
authority, direct member connections) is runtime admission, so every admissible decision says
``runtime_admission_required: true``. Nothing here, and no manifest option, selects another publisher when a rule
fails: ``no_fallback`` is always true and a blocked decision selects nothing.
"""

from __future__ import annotations

from typing import Final

from airflow_provider_dpone.cluster.protocol.query_settings import query_settings
from airflow_provider_dpone.cluster.values.clickhouse_engines import EngineClass, classify_engine
from airflow_provider_dpone.core.admission_types import Blocker, ReplicationDecision
from airflow_provider_dpone.core.manifest.cluster import (
    ClusterPublicationManifest,
    DdlScope,
    ReplicationMode,
    SealedArtifactSource,
)
from airflow_provider_dpone.core.manifest.types import LoadStrategy

RESERVED_NAME_FRAGMENT: Final[str] = "__dpone"
_CLUSTER: Final[str] = "physical_design.storage.clickhouse.cluster"
_ENGINE: Final[str] = "physical_design.storage.clickhouse.engine"
REPLAY_UNSUPPORTED: Final[str] = "DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED"
QUERY_SETTINGS_REFUSED: Final[str] = "DPONE_CLICKHOUSE_CLUSTER_QUERY_SETTINGS_REFUSED"


def _engine_blockers(manifest: ClusterPublicationManifest) -> list[Blocker]:
    engine = manifest.physical_design.storage.clickhouse.engine
    kind = classify_engine(engine)
    if kind is EngineClass.DISTRIBUTED:
        return [Blocker("DPONE_CLICKHOUSE_CLUSTER_DISTRIBUTED_TARGET", _ENGINE, f"engine {engine}")]
    if kind in (EngineClass.SHARED_MERGE_TREE, EngineClass.OTHER):
        return [Blocker("DPONE_CLICKHOUSE_CLUSTER_ENGINE_UNSUPPORTED", _ENGINE, f"engine {engine} ({kind.value})")]
    cluster = manifest.cluster
    if cluster is None:
        return []
    if cluster.replication_mode is ReplicationMode.INTERNAL and kind is not EngineClass.REPLICATED_MERGE_TREE:
        detail = f"engine {engine}: internal mode requires Replicated*MergeTree"
        return [Blocker("DPONE_CLICKHOUSE_CLUSTER_ENGINE_MODE_MISMATCH", _ENGINE, detail)]
    if cluster.replication_mode is ReplicationMode.EXTERNAL and kind is not EngineClass.MERGE_TREE:
        detail = f"engine {engine}: external mode requires a direct non-replicated *MergeTree"
        return [Blocker("DPONE_CLICKHOUSE_CLUSTER_ENGINE_MODE_MISMATCH", _ENGINE, detail)]
    return []


def _topology_blockers(manifest: ClusterPublicationManifest) -> list[Blocker]:
    cluster = manifest.cluster
    if cluster is None:
        return [Blocker("DPONE_CLICKHOUSE_CLUSTER_REQUIRED", _CLUSTER, "absent: there is no single-server publisher")]
    blockers: list[Blocker] = []
    if cluster.ddl_scope is not DdlScope.CLUSTER:
        scope = "omitted" if cluster.ddl_scope is None else cluster.ddl_scope.value
        blockers.append(Blocker("DPONE_CLICKHOUSE_CLUSTER_DDL_SCOPE_REQUIRED", _CLUSTER + ".ddl_scope", scope))
    if cluster.access_table is not None:
        blockers.append(
            Blocker("DPONE_CLICKHOUSE_CLUSTER_ACCESS_TABLE_UNSUPPORTED", _CLUSTER + ".access_table", "declared")
        )
    return blockers


def _sink_and_load_blockers(manifest: ClusterPublicationManifest) -> list[Blocker]:
    sink, load = manifest.sink, manifest.load
    blockers: list[Blocker] = []
    if isinstance(manifest.source, SealedArtifactSource):
        detail = "staging a sealed artifact from a store by its identity is not provided yet"
        blockers.append(Blocker("DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_SOURCE_UNSUPPORTED", "source.type", detail))
    if sink.effective_staging_database != sink.database:
        blockers.append(
            Blocker("DPONE_CLICKHOUSE_CLUSTER_STAGING_DATABASE_MISMATCH", "sink.staging_database", "differs")
        )
    if RESERVED_NAME_FRAGMENT in sink.table.lower():
        blockers.append(Blocker("DPONE_CLICKHOUSE_CLUSTER_TARGET_NAME_RESERVED", "sink.table", "contains __dpone"))
    if load.max_source_bytes is None or load.max_source_bytes <= 0:
        state = "absent" if load.max_source_bytes is None else "not positive"
        blockers.append(Blocker("DPONE_CLICKHOUSE_CLUSTER_SOURCE_BYTES_UNBOUNDED", "load.max_source_bytes", state))
    if load.strategy is not LoadStrategy.FULL_REFRESH:
        blockers.append(
            Blocker("DPONE_CLICKHOUSE_CLUSTER_LOAD_STRATEGY_UNSUPPORTED", "load.strategy", load.strategy.value)
        )
    return blockers


def _query_blockers(manifest: ClusterPublicationManifest) -> list[Blocker]:
    """A query-level ``SETTINGS`` clause could lift the extraction's read-only limits: refused before any connection
    (the detail counts the clauses; it never repeats the query's text)."""
    source = manifest.source
    if isinstance(source, SealedArtifactSource):
        return []
    clauses = query_settings(source.query)
    if not clauses:
        return []
    return [Blocker(QUERY_SETTINGS_REFUSED, "source.query", f"{len(clauses)} SETTINGS clause(s)")]


def _replay_blockers(manifest: ClusterPublicationManifest) -> list[Blocker]:
    """Durable quality replay exists only on the internal replicated full refresh: true anywhere else,
    and a quality policy without the selector (it would be silently ignored), fail closed here, before credentials,
    source access, DDL or authority mutation."""
    field = "sink.options.durable_quality_replay"
    if not manifest.sink.options.durable_quality_replay:
        if manifest.quality is None:
            return []
        return [Blocker(REPLAY_UNSUPPORTED, "quality", "a quality policy needs durable_quality_replay: true")]
    cluster = manifest.cluster
    route = None
    if cluster is None:
        route = "without a cluster"
    elif cluster.replication_mode is not ReplicationMode.INTERNAL:
        route = f"cluster_{cluster.replication_mode.value}"
    elif manifest.load.strategy is not LoadStrategy.FULL_REFRESH:
        route = f"cluster_internal {manifest.load.strategy.value}"
    if route is not None:
        detail = f"route {route}: only cluster_internal full_refresh records durable quality evidence"
        return [Blocker(REPLAY_UNSUPPORTED, field, detail)]
    return []


def cluster_blockers(manifest: ClusterPublicationManifest) -> tuple[Blocker, ...]:
    """Every static blocker of a cluster publication manifest, in a stable order."""
    return tuple(
        _topology_blockers(manifest)
        + _engine_blockers(manifest)
        + _sink_and_load_blockers(manifest)
        + _query_blockers(manifest)
        + _replay_blockers(manifest)
    )


def replication_decision(manifest: ClusterPublicationManifest, blocked: bool) -> ReplicationDecision:
    """The decision the CLI prints: what was requested and, only if nothing blocks, the mode selected for it."""
    cluster = manifest.cluster
    if cluster is None:
        return ReplicationDecision(requested="local", selected=None, replication_mode=None)
    mode = cluster.replication_mode.value
    return ReplicationDecision(
        requested="cluster", selected=None if blocked else f"cluster_{mode}", replication_mode=mode
    )
