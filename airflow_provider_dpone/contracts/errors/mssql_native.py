"""``mssql_native.*``: the native ClickHouse -> SQL Server transfer route and its raw-row snapshot (seed 003)."""

from __future__ import annotations

CODES: tuple[tuple[str, str, str], ...] = (
    (
        "mssql_native.source_snapshot_mode_invalid",
        "source_snapshot has an unknown mode, an unknown field, or a mode/replica_scope combination that is not allowed",
        "use mode query_visible or exact_raw_rows, and replica_scope single_server or connected_replica",
    ),
    (
        "mssql_native.replacing_raw_snapshot_required",
        "the source engine needs an explicit exact_raw_rows snapshot (or the requested snapshot does not fit the engine)",
        "declare source_snapshot.mode: exact_raw_rows for ReplacingMergeTree, or read a plain MergeTree table",
    ),
    (
        "mssql_native.replica_scope_unproven",
        "the declared replica_scope does not match the engine, or the connection cannot prove one pinned server",
        "use single_server for ReplacingMergeTree, connected_replica for ReplicatedReplacingMergeTree, and a direct "
        "server endpoint",
    ),
    (
        "mssql_native.source_read_profile_unsupported",
        "an effective read setting, filter or policy cannot be frozen to the raw-snapshot profile",
        "remove the overriding profile or setting for the source user; settings cannot be weakened per workload",
    ),
    (
        "mssql_native.source_provenance_incomplete",
        "part provenance of the snapshot query is missing or outside the pre-query physical profile",
        "retry as a new invocation (the run re-extracts); investigate concurrent DDL if it repeats",
    ),
)
