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

# target side: staging, chunk load/verification, atomic publication, receipts and reconciliation (SQL Server and the
# PostgreSQL adapter of the same port). Details carry only opaque ids, ordinals, counts, digests and SQLSTATE classes.
CODES += (
    (
        "mssql_native.target_type_unsupported",
        "a source column type has no lossless, exactly verifiable target mapping (floats, nested, >38 digits, ...)",
        "cast the column in the source to a supported type; see docs/targets.md for the type mapping",
    ),
    (
        "mssql_native.target_plan_invalid",
        "the target plan is malformed (invocation id, names, reserved prefix, window, mode or column set)",
        "fix the reported field of the target plan; names starting with __dpone_ are reserved",
    ),
    (
        "mssql_native.target_value_invalid",
        "a row value does not fit its target column (range, precision, UTF-8 text, NUL in PostgreSQL text)",
        "check the source column type; map String as binary (the lossless default) if values are not UTF-8",
    ),
    (
        "mssql_native.target_unavailable",
        "the target database could not be reached or refused the session before any change was made",
        "check the target connection and retry the task; nothing was changed",
    ),
    (
        "mssql_native.target_schema_mismatch",
        "the target table is not a base table, or its columns differ from the planned mapping",
        "align the target table with the planned column types (see docs/targets.md) or use full_refresh",
    ),
    (
        "mssql_native.target_prepare_failed",
        "the staging table or the receipt table could not be created",
        "check CREATE TABLE permission in the target schema; the invocation's staging can be retried",
    ),
    (
        "mssql_native.target_chunk_already_loaded",
        "rows of this chunk ordinal are already in staging (an earlier load committed)",
        "verify the chunk; discard it and load again only if verification fails",
    ),
    (
        "mssql_native.target_load_failed",
        "a chunk load failed; its transaction was rolled back, or its commit acknowledgement was lost",
        "verify the chunk to observe whether it is present, then discard and reload if it does not match",
    ),
    (
        "mssql_native.target_chunk_verification_failed",
        "the read-back of a staged chunk does not match the source chunk receipt (rows or typed digest)",
        "discard the chunk and load it again from the durable stage; investigate if it repeats",
    ),
    (
        "mssql_native.target_staging_missing",
        "the invocation's staging table does not exist and no publication receipt exists",
        "prepare the staging again and reload every chunk from the durable stage",
    ),
    (
        "mssql_native.target_staging_incomplete",
        "the staged chunks differ from the publication request (missing, extra, or a different row count)",
        "load and verify the missing chunks, or discard the extra ones, then publish again",
    ),
    (
        "mssql_native.target_rows_outside_window",
        "staged rows lie outside the replaced UTC window (or have a NULL window value)",
        "fix the source window; publishing them would duplicate rows outside the window",
    ),
    (
        "mssql_native.target_publication_already_committed",
        "a publication receipt for this invocation already exists: the publication committed earlier",
        "do not publish again; read the receipt with reconcile and continue with cleanup",
    ),
    (
        "mssql_native.target_publication_failed",
        "the publication transaction failed before commit and was rolled back; the target is unchanged",
        "fix the reported cause and publish again (the staging is retained)",
    ),
    (
        "mssql_native.target_publication_outcome_unknown",
        "the publication commit was sent but its acknowledgement was lost",
        "reconcile the publication by its receipt; never publish again before reconcile answers",
    ),
    (
        "mssql_native.target_publication_in_flight",
        "the publication lock is still held: a publishing transaction may still commit or roll back",
        "reconcile again later; do not publish or clean up until reconcile answers committed or absent",
    ),
    (
        "mssql_native.target_receipt_conflict",
        "the stored publication receipt disagrees with the expected rows or digest",
        "stop and investigate: the receipt table was changed or the plan differs from the committed one",
    ),
)
