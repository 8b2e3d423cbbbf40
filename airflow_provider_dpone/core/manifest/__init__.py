"""Public manifest API: load a manifest (from a file, text, a mapping or what an operator was given), and compute its
normalized plan and digest.

A manifest declares one job of one of two routes, chosen by ``sink.type``:

- ``clickhouse``: full refresh of one table on a ClickHouse cluster (:class:`ClusterPublicationManifest`);
- ``mssql`` / ``postgres``: native transfer of one ClickHouse table (:class:`NativeTransferManifest`).

Manifests name Airflow connection ids only; hosts and credentials live in the connections.
"""

from __future__ import annotations

from airflow_provider_dpone.core.manifest.cluster import (
    ClickHouseQuerySource,
    ClickHouseSink,
    ClusterPublicationManifest,
    ClusterSettings,
    DdlScope,
    ReplicationMode,
    SealedArtifactSource,
)
from airflow_provider_dpone.core.manifest.loader import (
    MAX_MANIFEST_BYTES,
    Manifest,
    ManifestError,
    ManifestInput,
    load_manifest,
    manifest_from_mapping,
    parse_manifest,
    read_manifest_input,
)
from airflow_provider_dpone.core.manifest.plan import (
    PLAN_KIND,
    ROUTE_CLUSTER,
    ROUTE_TRANSFER,
    normalized_plan,
    normalized_plan_digest,
)
from airflow_provider_dpone.core.manifest.transfer import (
    ClickHouseTableSource,
    MssqlSink,
    NativeTransferManifest,
    PostgresSink,
)
from airflow_provider_dpone.core.manifest.types import LoadStrategy, Window

__all__ = [
    "MAX_MANIFEST_BYTES",
    "PLAN_KIND",
    "ROUTE_CLUSTER",
    "ROUTE_TRANSFER",
    "SealedArtifactSource",
    "ClickHouseQuerySource",
    "ClickHouseSink",
    "ClickHouseTableSource",
    "ClusterPublicationManifest",
    "ClusterSettings",
    "DdlScope",
    "LoadStrategy",
    "Manifest",
    "ManifestError",
    "ManifestInput",
    "MssqlSink",
    "NativeTransferManifest",
    "PostgresSink",
    "ReplicationMode",
    "Window",
    "load_manifest",
    "manifest_from_mapping",
    "normalized_plan",
    "normalized_plan_digest",
    "parse_manifest",
    "read_manifest_input",
]
