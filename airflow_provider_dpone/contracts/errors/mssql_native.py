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
    # --- source admission, extraction, durable stage and recovery (raw-row snapshot route) ---
    (
        "mssql_native.source_engine_unsupported",
        "the source relation is not an admitted table (view, Distributed, Shared engine, alias, non-Atomic database, "
        "temporary table or zero UUID)",
        "read a MergeTree or ReplacingMergeTree table of an Atomic database directly",
    ),
    (
        "mssql_native.source_schema_unsupported",
        "a source column has DEFAULT/MATERIALIZED/ALIAS/EPHEMERAL, an unsupported or lossy type, or a reserved "
        "provenance name (_part, _part_offset) in raw mode",
        "project the table through supported ordinary columns, or rename the reserved column",
    ),
    (
        "mssql_native.source_window_invalid",
        "the partition window is not a fixed UTC half-open interval over an admitted column, or the partition "
        "expression or calendar cannot be proven UTC",
        "declare aware UTC bounds with start < end on a UTC DateTime/DateTime64 column partitioned by an allowlisted "
        "expression",
    ),
    (
        "mssql_native.source_transport_unsupported",
        "the source session is not one direct, verified endpoint (TLS required but not verified, unbounded timeout, "
        "redirect or unpinned endpoint)",
        "use an HTTPS connection with certificate verification and bounded timeouts to one server",
    ),
    (
        "mssql_native.source_metadata_unavailable",
        "required source metadata (tables, columns, parts, settings, policies, replicas) cannot be inspected",
        "grant the source account SELECT on the relation and the bounded system metadata listed in the route guide",
    ),
    (
        "mssql_native.source_part_cap_exceeded",
        "the pre-query physical profile has more active parts than the fixed cap",
        "narrow the window or let merges reduce the part count; provenance is never truncated",
    ),
    (
        "mssql_native.source_snapshot_drift",
        "relation, schema, access context, read profile or replica identity changed before EOF",
        "retry as a new invocation; investigate concurrent DDL, grants or profile changes if it repeats",
    ),
    (
        "mssql_native.source_eof_mismatch",
        "the stream's EOF does not match its receipts (row count, contiguous chunk ordinals or typed evidence)",
        "retry as a new invocation; the sealed stage is not published",
    ),
    (
        "mssql_native.recovery_binding_invalid",
        "the recovery marker, completion extension, profile, EOF descriptor, schema, window or row count in the "
        "journal disagree or are of an unknown version",
        "preserve the journal and stage; investigate tampering or a mismatched selector; never edit records",
    ),
    (
        "mssql_native.stage_integrity_failed",
        "a durable stage object is missing, tampered or does not match its chunk receipt",
        "preserve the stage; the invocation must be settled and re-extracted",
    ),
    (
        "mssql_native.journal_corrupt",
        "the recovery journal has a gap, a broken hash chain, a non-canonical or oversize record, or an impossible "
        "record order",
        "preserve the journal; investigate the storage and any concurrent writer",
    ),
    (
        "mssql_native.journal_conflict",
        "another process appended to the recovery journal first (this writer was fenced)",
        "stop this attempt; the owning attempt or a later retry resumes from the journal",
    ),
    (
        "mssql_native.custody_held",
        "a previous invocation's writer lease or target custody is not proven settled",
        "wait for the lease to expire or settle the held custody; overlapping runs are blocked",
    ),
    (
        "mssql_native.target_verification_failed",
        "the target-local typed digest or row count of the staged rows differs from the sealed receipts",
        "the staging is discarded and nothing is published; investigate type mapping on the target",
    ),
    (
        "mssql_native.publication_outcome_unknown",
        "the target cannot prove whether the publication committed",
        "keep the run held; reconcile the target receipt before any retry or cleanup",
    ),
    (
        "mssql_native.publication_absent",
        "the publication was proven not committed after an interrupted commit",
        "retry the task; it republishes source-free from the sealed stage",
    ),
    (
        "mssql_native.storage_unsupported",
        "the stage/journal storage cannot create objects exclusively and atomically",
        "use file:// or an object store whose filesystem supports exclusive create",
    ),
    (
        "mssql_native.source_query_failed",
        "the snapshot SELECT or a metadata read failed on the server (timeout, limit, cancellation, lost session)",
        "retry as a new invocation; raise the bounded limits only through the connection, never per workload",
    ),
)
