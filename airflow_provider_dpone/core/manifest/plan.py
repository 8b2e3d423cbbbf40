"""The normalized plan: the credential-free, semantic content of a manifest, and its digest.

The operation id of a run is derived from the normalized plan digest, so this function decides which edits to a
manifest make a *different* operation. The rules:

- Only semantics enter. YAML whitespace, comments, key order and quoting never reach it (it is built from the parsed
  model); the job ``name`` is a label and is left out; the artifact store location is left out because the artifact
  is identified by its content SHA-256; a source query enters only as its SHA-256 (no SQL text in plans or logs).
- Defaults are applied, so an omitted field and its explicit default spelling are the same plan: omitted
  ``replication_mode`` is ``internal``, omitted ``staging_database`` is ``database``.
- Opt-in selectors appear only when they select something: ``durable_quality_replay`` only when true, and
  ``source_snapshot`` only for ``exact_raw_rows`` (``query_visible`` is the explicit spelling of the legacy default and
  is never materialized), so manifests that do not use a selector keep exactly their previous plan bytes.
- Logical connection references (Airflow connection ids) stay bound; hosts and secrets are never in a manifest.
"""

from __future__ import annotations

from typing import Any, Final

from airflow_provider_dpone.core.canonical import digest, sha256_hex
from airflow_provider_dpone.core.manifest.cluster import (
    ClickHouseQuerySource,
    ClusterLoad,
    ClusterPublicationManifest,
    SealedArtifactSource,
)
from airflow_provider_dpone.core.manifest.loader import Manifest
from airflow_provider_dpone.core.manifest.transfer import NativeTransferManifest, StringMapping, TransferLoad
from airflow_provider_dpone.core.manifest.transfer_options import NativeTransferOptions, SnapshotMode
from airflow_provider_dpone.core.manifest.types import render_utc

PLAN_KIND: Final[str] = "dpone.normalized-plan.v1"
ROUTE_CLUSTER: Final[str] = "clickhouse_cluster_full_refresh"
ROUTE_TRANSFER: Final[str] = "native_transfer"


def _load(load: ClusterLoad | TransferLoad) -> dict[str, Any]:
    out: dict[str, Any] = {"strategy": load.strategy.value}
    if isinstance(load, ClusterLoad) and load.max_source_bytes is not None:
        out["max_source_bytes"] = load.max_source_bytes
    if isinstance(load, ClusterLoad) and load.max_source_rows is not None:
        out["max_source_rows"] = load.max_source_rows  # absent: the plan (and its digest) of earlier manifests
    if load.window is not None:
        out["window"] = {
            "column": load.window.column,
            "start": render_utc(load.window.start),
            "end": render_utc(load.window.end),
        }
    return out


def _publication_source(source: ClickHouseQuerySource | SealedArtifactSource) -> dict[str, Any]:
    if isinstance(source, ClickHouseQuerySource):
        return {"type": "clickhouse", "connection_id": source.connection_id, "query_sha256": sha256_hex(source.query)}
    return {"type": "artifact", "sha256": source.sha256}


def _cluster_plan(manifest: ClusterPublicationManifest) -> dict[str, Any]:
    sink = manifest.sink
    storage = manifest.physical_design.storage.clickhouse
    sink_plan: dict[str, Any] = {
        "type": "clickhouse",
        "connection_id": sink.connection_id,
        "database": sink.database,
        "table": sink.table,
        "staging_database": sink.effective_staging_database,
    }
    if sink.options.durable_quality_replay:
        sink_plan["durable_quality_replay"] = True
    policy = manifest.quality_policy
    if policy is not None:
        sink_plan["quality"] = policy.model_dump(mode="json")
    cluster = storage.cluster
    cluster_plan: dict[str, Any] | None = None
    if cluster is not None:
        cluster_plan = {
            "name": cluster.name,
            "ddl_scope": cluster.ddl_scope.value if cluster.ddl_scope is not None else None,
            "replication_mode": cluster.replication_mode.value,
        }
        if cluster.access_table is not None:
            cluster_plan["access_table"] = cluster.access_table
    clickhouse: dict[str, Any] = {"engine": storage.engine, "order_by": list(storage.order_by), "cluster": cluster_plan}
    if storage.partition_by is not None:
        clickhouse["partition_by"] = storage.partition_by
    return {
        "kind": PLAN_KIND,
        "version": manifest.version,
        "route": ROUTE_CLUSTER,
        "source": _publication_source(manifest.source),
        "sink": sink_plan,
        "load": _load(manifest.load),
        "physical_design": {"storage": {"clickhouse": clickhouse}},
    }


def native_transfer_plan(options: NativeTransferOptions) -> dict[str, Any]:
    """Effective native-transfer options; the snapshot selector only when it selects ``exact_raw_rows``."""
    out: dict[str, Any] = {
        "wire": {"mode": options.wire.mode, "binary_format": options.wire.binary_format},
        "execution": {
            "import_backend": options.execution.import_backend.value,
            "verification_backend": options.execution.verification_backend.value,
            "chunk_rows": options.execution.chunk_rows,
            "max_chunk_bytes": options.execution.max_chunk_bytes,
        },
    }
    snapshot = options.source_snapshot
    if snapshot is not None and snapshot.mode is SnapshotMode.EXACT_RAW_ROWS:
        out["source_snapshot"] = {"mode": snapshot.mode.value, "replica_scope": snapshot.replica_scope.value}
    return out


def _transfer_plan(manifest: NativeTransferManifest) -> dict[str, Any]:
    source, sink = manifest.source, manifest.sink
    sink_plan: dict[str, Any] = {
        "type": sink.type,
        "connection_id": sink.connection_id,
        "schema": sink.target_schema,
        "table": sink.table,
    }
    if sink.options.durable_quality_replay:
        sink_plan["durable_quality_replay"] = True
    if sink.options.string_mapping is not StringMapping.BINARY:  # the default keeps earlier plans byte-identical
        sink_plan["string_mapping"] = sink.options.string_mapping.value
    return {
        "kind": PLAN_KIND,
        "version": manifest.version,
        "route": ROUTE_TRANSFER,
        "source": {
            "type": "clickhouse",
            "connection_id": source.connection_id,
            "database": source.database,
            "table": source.table,
            "native_transfer": native_transfer_plan(source.options.native_transfer),
        },
        "sink": sink_plan,
        "load": _load(manifest.load),
    }


def normalized_plan(manifest: Manifest) -> dict[str, Any]:
    """The canonical-JSON-able semantic content of ``manifest`` (see the module docstring for what is excluded)."""
    if isinstance(manifest, ClusterPublicationManifest):
        return _cluster_plan(manifest)
    return _transfer_plan(manifest)


def normalized_plan_digest(manifest: Manifest) -> str:
    """SHA-256 (lower-case hex) of the canonical JSON of :func:`normalized_plan`."""
    return digest(normalized_plan(manifest))
