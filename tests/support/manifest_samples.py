"""Sample manifests for the manifest, admission and CLI tests: plain dicts, edited per test, dumped to YAML."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from airflow_provider_dpone.core.manifest import Manifest, parse_manifest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "dags_examples" / "manifests"

_EXTERNAL: dict[str, Any] = {
    "version": 1,
    "name": "target_table_refresh",
    "source": {
        "type": "clickhouse",
        "connection_id": "dpone_clickhouse_default",
        "query": "SELECT id, name FROM analytics.source_table",
    },
    "sink": {
        "type": "clickhouse",
        "connection_id": "dpone_clickhouse_default",
        "database": "analytics",
        "table": "target_table",
    },
    "load": {"strategy": "full_refresh", "max_source_bytes": 1048576},
    "physical_design": {
        "storage": {
            "clickhouse": {
                "engine": "MergeTree",
                "order_by": ["id"],
                "cluster": {"name": "analytics_cluster", "ddl_scope": "cluster", "replication_mode": "external"},
            }
        }
    },
}

_TRANSFER: dict[str, Any] = {
    "version": 1,
    "name": "raw_events_to_mssql",
    "source": {
        "type": "clickhouse",
        "connection_id": "dpone_clickhouse_default",
        "database": "events",
        "table": "raw_events",
        "options": {
            "native_transfer": {"source_snapshot": {"mode": "exact_raw_rows", "replica_scope": "single_server"}}
        },
    },
    "sink": {"type": "mssql", "connection_id": "mssql_default", "schema": "dbo", "table": "raw_events"},
    "load": {
        "strategy": "partition_replace",
        "window": {"column": "event_time", "start": "2026-09-01T00:00:00Z", "end": "2026-09-02T00:00:00Z"},
    },
}


def external() -> dict[str, Any]:
    """An admissible external-mode cluster publication manifest."""
    return copy.deepcopy(_EXTERNAL)


def internal() -> dict[str, Any]:
    """An admissible internal-mode cluster publication manifest."""
    raw = external()
    storage = raw["physical_design"]["storage"]["clickhouse"]
    storage["engine"] = "ReplicatedMergeTree"
    storage["cluster"]["replication_mode"] = "internal"
    return raw


def transfer(sink_type: str = "mssql") -> dict[str, Any]:
    """An admissible exact-raw-rows native transfer manifest."""
    raw = copy.deepcopy(_TRANSFER)
    raw["sink"]["type"] = sink_type
    return raw


def cluster_of(raw: dict[str, Any]) -> dict[str, Any]:
    return raw["physical_design"]["storage"]["clickhouse"]["cluster"]


def storage_of(raw: dict[str, Any]) -> dict[str, Any]:
    return raw["physical_design"]["storage"]["clickhouse"]


def to_yaml(raw: dict[str, Any]) -> str:
    return yaml.safe_dump(raw, sort_keys=False)


def load(raw: dict[str, Any]) -> Manifest:
    """Parse through the YAML path, as a file would be."""
    return parse_manifest(to_yaml(raw))
