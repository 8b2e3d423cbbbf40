"""What every publication task rebuilds from scratch: the manifest and the :class:`PublicationRequest`.

A task never reads an upstream task's XCom to learn what it is publishing. It re-reads the manifest (a file path,
inline YAML text or a mapping), runs static admission again, and derives the request from the manifest, the DAG id and
the DAG run id. The try number is deliberately absent: every try of every task of one DAG run, and a clear of the
whole run, arrive at the same ``operation_id`` (seed 000 §2), while a new DAG run derives a new one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.manifest import (
    ClusterPublicationManifest,
    load_manifest,
    manifest_from_mapping,
    normalized_plan_digest,
    parse_manifest,
)
from airflow_provider_dpone.ports.publication import ColumnSpec, TableSpec
from airflow_provider_dpone.protocol.admission import admit_static
from airflow_provider_dpone.protocol.request import PublicationRequest

ManifestInput = str | Path | Mapping[str, Any]
"""A manifest path (``.yaml``/``.yml``), inline YAML text, or an already parsed mapping."""

_YAML_SUFFIXES = (".yaml", ".yml")


def read_manifest(manifest: ManifestInput, *, base_dir: Path | None = None) -> ClusterPublicationManifest:
    """Load the manifest and require the cluster publication route; relative paths resolve against ``base_dir``."""
    if isinstance(manifest, Mapping):
        loaded = manifest_from_mapping(dict(manifest))
    elif isinstance(manifest, Path) or (
        isinstance(manifest, str) and "\n" not in manifest and manifest.strip().endswith(_YAML_SUFFIXES)
    ):
        path = Path(manifest)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        loaded = load_manifest(path)
    else:
        loaded = parse_manifest(manifest)
    if not isinstance(loaded, ClusterPublicationManifest):
        raise DponeError("DPONE_MANIFEST_FIELD_INVALID", "sink.type: the publication operators need a clickhouse sink")
    return loaded


def require_admissible(manifest: ClusterPublicationManifest) -> None:
    """Static admission again, before any connection is touched; every blocker's code in one line."""
    result = admit_static(manifest)
    if result.blockers:
        first = result.blockers[0]
        others = f"; also {', '.join(result.codes[1:])}" if len(result.blockers) > 1 else ""
        raise DponeError(first.code, f"{first.field}: {first.detail}{others}")


def cluster_name(manifest: ClusterPublicationManifest) -> str:
    cluster = manifest.cluster
    if cluster is None:  # static admission refuses this; kept for the type checker
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_REQUIRED", "physical_design.storage.clickhouse.cluster")
    return cluster.name


def declared_table(manifest: ClusterPublicationManifest, columns: tuple[tuple[str, str], ...]) -> TableSpec:
    """The candidate definition: the manifest's engine, partition key and sorting key with the given typed columns."""
    storage = manifest.physical_design.storage.clickhouse
    return TableSpec(
        columns=tuple(ColumnSpec(name=name, type=type_) for name, type_ in columns),
        engine=storage.engine,
        order_by=tuple(storage.order_by),
        partition_by=storage.partition_by,
    )


def build_request(
    manifest: ClusterPublicationManifest, *, dag_id: str, run_id: str, table: TableSpec
) -> PublicationRequest:
    """The request every task of one DAG run rebuilds identically (never from the try number)."""
    bound = manifest.load.max_source_bytes
    if bound is None:  # static admission refuses this; kept for the type checker
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_SOURCE_BYTES_UNBOUNDED", "load.max_source_bytes")
    assert manifest.cluster is not None  # cluster_name() refuses a manifest without one
    return PublicationRequest(
        cluster=cluster_name(manifest),
        replication_mode=manifest.cluster.replication_mode.value,
        database=manifest.sink.database,
        target=manifest.sink.table,
        dag_id=dag_id,
        run_id=run_id,
        normalized_plan_digest=normalized_plan_digest(manifest),
        table=table,
        max_source_bytes=bound,
        quality=manifest.quality_policy,
    )


def asset_uri(manifest: ClusterPublicationManifest) -> str:
    """The Airflow Asset URI of the published table: cluster, database and table; never a host."""
    return f"clickhouse-cluster://{cluster_name(manifest)}/{manifest.sink.database}/{manifest.sink.table}"
