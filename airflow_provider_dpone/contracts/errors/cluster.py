"""``DPONE_CLICKHOUSE_CLUSTER_*``: ClickHouse cluster publication (static admission, runtime admission, authority)."""

from __future__ import annotations

STATIC_ADMISSION: tuple[tuple[str, str, str], ...] = (
    (
        "DPONE_CLICKHOUSE_CLUSTER_REQUIRED",
        "the ClickHouse sink declares no physical_design.storage.clickhouse.cluster; only cluster publication is "
        "provided and nothing falls back to a local publisher",
        "declare cluster.name, ddl_scope: cluster and replication_mode for the target cluster",
    ),
    (
        "DPONE_CLICKHOUSE_CLUSTER_DDL_SCOPE_REQUIRED",
        "cluster.ddl_scope is not 'cluster' (publication is one correlated ON CLUSTER operation)",
        "set physical_design.storage.clickhouse.cluster.ddl_scope: cluster",
    ),
    (
        "DPONE_CLICKHOUSE_CLUSTER_STAGING_DATABASE_MISMATCH",
        "sink.staging_database differs from sink.database (EXCHANGE/RENAME publication needs both in one database)",
        "omit sink.staging_database or set it to sink.database",
    ),
    (
        "DPONE_CLICKHOUSE_CLUSTER_SOURCE_BYTES_UNBOUNDED",
        "load.max_source_bytes is absent or not positive; cluster publication needs a positive source byte bound",
        "set load.max_source_bytes to a positive integer that bounds the extracted artifact",
    ),
    (
        "DPONE_CLICKHOUSE_CLUSTER_LOAD_STRATEGY_UNSUPPORTED",
        "cluster publication supports only load.strategy: full_refresh",
        "use strategy full_refresh for a ClickHouse cluster target",
    ),
    (
        "DPONE_CLICKHOUSE_CLUSTER_ENGINE_UNSUPPORTED",
        "the declared engine is not a *MergeTree table engine that can be a publication target "
        "(Shared*, Merge, View, Memory, Log, KeeperMap and unknown names are refused)",
        "declare a MergeTree-family engine: Replicated*MergeTree for internal mode, *MergeTree for external mode",
    ),
    (
        "DPONE_CLICKHOUSE_CLUSTER_DISTRIBUTED_TARGET",
        "a Distributed table is declared as the publication target; Distributed access facades are never published to",
        "publish to the local *MergeTree table behind the facade and keep the facade outside dpone",
    ),
    (
        "DPONE_CLICKHOUSE_CLUSTER_ENGINE_MODE_MISMATCH",
        "the engine does not match replication_mode (internal needs Replicated*MergeTree, external a direct "
        "non-replicated *MergeTree)",
        "change the engine or replication_mode so that both describe the real topology; there is no fallback",
    ),
    (
        "DPONE_CLICKHOUSE_CLUSTER_ACCESS_TABLE_UNSUPPORTED",
        "cluster.access_table is declared; access tables are not publication targets and are not maintained",
        "remove cluster.access_table and manage any Distributed read facade outside dpone",
    ),
    (
        "DPONE_CLICKHOUSE_CLUSTER_TARGET_NAME_RESERVED",
        "the target table name uses the reserved '__dpone' namespace of candidates and the authority table",
        "choose a target table name that does not contain '__dpone'",
    ),
)
"""Static admission: checked from the manifest alone, before any connection or credential is touched."""

CODES: tuple[tuple[str, str, str], ...] = STATIC_ADMISSION
