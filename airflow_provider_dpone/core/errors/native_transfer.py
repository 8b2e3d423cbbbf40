"""``native_transfer.*``: the native ClickHouse -> SQL Server / PostgreSQL transfer, any target, and its raw-row
snapshot (earlier name ``mssql_native.*``, kept as aliases: see :data:`~airflow_provider_dpone.core.errors.ALIASES`)."""

from __future__ import annotations

from airflow_provider_dpone.core.errors.code import ErrorCode

CODES: tuple[ErrorCode, ...] = (
    ErrorCode(
        "native_transfer.source_snapshot_mode_invalid",
        "source_snapshot has an unknown mode, an unknown field, or a mode/replica_scope combination that is not allowed",
        "use mode query_visible or exact_raw_rows, and replica_scope single_server or connected_replica",
        retryable=False,
        summary="source_snapshot is invalid",
    ),
    ErrorCode(
        "native_transfer.replacing_raw_snapshot_required",
        "the source engine needs an explicit exact_raw_rows snapshot (or the requested snapshot does not fit the engine)",
        "declare source_snapshot.mode: exact_raw_rows for ReplacingMergeTree, or read a plain MergeTree table",
        retryable=False,
        summary="needs exact_raw_rows",
    ),
    ErrorCode(
        "native_transfer.replica_scope_unproven",
        "the declared replica_scope does not match the engine, or the connection cannot prove one pinned server",
        "use single_server for ReplacingMergeTree, connected_replica for ReplicatedReplacingMergeTree, and a direct "
        "server endpoint (or a balancer that keeps ClickHouse HTTP sessions on one server)",
        retryable=False,
        summary="replica_scope is not proven",
    ),
    ErrorCode(
        "native_transfer.source_read_profile_unsupported",
        "an effective read setting, filter or policy cannot be frozen to the raw-snapshot profile",
        "remove the overriding profile or setting for the source user; settings cannot be weakened per workload",
        retryable=False,
        summary="read profile not frozen",
    ),
    ErrorCode(
        "native_transfer.source_provenance_incomplete",
        "part provenance of the snapshot query is missing or outside the pre-query physical profile",
        "retry as a new invocation (the run re-extracts); investigate concurrent DDL if it repeats",
        retryable=True,
        summary="part provenance is incomplete",
    ),
    # --- source admission, extraction, durable stage and recovery (raw-row snapshot route) ---
    ErrorCode(
        "native_transfer.source_engine_unsupported",
        "the source relation is not an admitted table (view, Distributed, Shared engine, alias, non-Atomic database, "
        "temporary table or zero UUID)",
        "read a MergeTree or ReplacingMergeTree table of an Atomic database directly",
        retryable=False,
        summary="the source is not an admitted table",
    ),
    ErrorCode(
        "native_transfer.source_schema_unsupported",
        "a source column has DEFAULT/MATERIALIZED/ALIAS/EPHEMERAL, an unsupported or lossy type, or a reserved "
        "provenance name (_part, _part_offset) in raw mode",
        "project the table through supported ordinary columns, or rename the reserved column",
        retryable=False,
        summary="a source column is unsupported",
    ),
    ErrorCode(
        "native_transfer.source_window_invalid",
        "the partition window is not a fixed UTC half-open interval over an admitted column, or the partition "
        "expression or calendar cannot be proven UTC",
        "declare aware UTC bounds with start < end on a UTC DateTime/DateTime64 column partitioned by an allowlisted "
        "expression",
        retryable=False,
        summary="the window is not a proven UTC window",
    ),
    ErrorCode(
        "native_transfer.source_transport_unsupported",
        "the source session is not one direct, verified endpoint (TLS required but not verified, unbounded timeout, "
        "or redirect)",
        "use an HTTPS connection with certificate verification and bounded timeouts to one server",
        retryable=False,
        summary="source session is not pinned",
    ),
    ErrorCode(
        "native_transfer.source_endpoint_drift",
        "a source request was answered by another server than the one admission observed (a balancer moved the "
        "session, the server restarted or the session expired), or the server's identity changed before EOF",
        "connect to one server directly, or through a balancer that keeps an HTTP session on one server; the retry "
        "re-extracts as a new invocation",
        retryable=True,
        summary="another source server answered",
    ),
    ErrorCode(
        "native_transfer.stage_store_worker_local",
        "[dpone] native_transfer_base is not set, so the stage and journal would go to a directory of this worker, "
        "and the deployment does not declare a single worker: a retry on another worker could not recover without "
        "the source; nothing was read or written",
        "set [dpone] native_transfer_base (or the operator's stage_base) to storage every worker reaches "
        "(s3://conn_id@bucket/prefix, gs://..., or a file:// path on a mount all workers share); on a one-worker "
        "deployment set [dpone] single_worker = True instead",
        retryable=False,
        summary="the stage is local to this worker",
    ),
    ErrorCode(
        "native_transfer.source_relation_not_found",
        "the source table the manifest names does not exist on the source server (or its account cannot see it)",
        "create the source table or correct source.database and source.table in the manifest (the example DAGs' "
        "demo_setup task creates theirs); if it exists, grant the source account SELECT on it",
        retryable=False,
        summary="the source table does not exist",
    ),
    ErrorCode(
        "native_transfer.source_access_denied",
        "the source account lacks a privilege the read needs: the server refused a source read with ACCESS_DENIED "
        "(code 497), for example SELECT on a column of the relation",
        "grant the source account exactly the grants the route guide lists (SELECT on the relation, SHOW ROW "
        "POLICIES), then run again; a retry without the grant fails the same way",
        retryable=False,
        summary="the source account lacks a grant",
    ),
    ErrorCode(
        "native_transfer.source_metadata_unavailable",
        "required source metadata (tables, columns, parts, settings, policies, replicas) cannot be inspected",
        "grant the source account SELECT on the relation and the bounded system metadata listed in the route guide",
        retryable=True,
        summary="source metadata unreadable",
    ),
    ErrorCode(
        "native_transfer.source_part_cap_exceeded",
        "the pre-query physical profile has more active parts than the fixed cap",
        "narrow the window or let merges reduce the part count; provenance is never truncated",
        retryable=False,
        summary="the source has too many parts",
    ),
    ErrorCode(
        "native_transfer.source_snapshot_drift",
        "relation, schema, access context, read profile or replica identity changed before EOF",
        "retry as a new invocation; investigate concurrent DDL, grants or profile changes if it repeats",
        retryable=True,
        summary="the source changed before EOF",
    ),
    ErrorCode(
        "native_transfer.source_rows_differ",
        "the rows the worker received differ from the rows the source server counts for the same SELECT (its count, "
        "or per part the rows and the offsets' hash): a row was lost, repeated or moved between the server and "
        "the stage, or the source changed during the read",
        "let Airflow retry: nothing was sealed, the next try re-extracts; if it repeats on an unchanged source, keep "
        "the task log and report it",
        retryable=True,
        summary="received rows differ from the source",
    ),
    ErrorCode(
        "native_transfer.source_content_differs",
        "the row hashes the worker received do not add up to the source server's own sum of its row hashes for the "
        "same SELECT (recomputed in a statement apart from the stream, over the server's values) although the rows "
        "and positions agree: a row's values and hash were changed, or replaced by another row's, between the server "
        "and the stage, or the source changed during the read",
        "let Airflow retry: nothing was sealed complete, the next try re-extracts; if it repeats on an unchanged "
        "source, keep the task log and report it (the path between ClickHouse and the stage corrupts rows)",
        retryable=True,
        summary="row hashes differ from the source",
    ),
    ErrorCode(
        "native_transfer.source_eof_mismatch",
        "the stream's EOF does not match its receipts (row count, contiguous chunk ordinals or typed evidence)",
        "retry as a new invocation; the sealed stage is not published",
        retryable=True,
        summary="EOF does not match the receipts",
    ),
    ErrorCode(
        "native_transfer.recovery_binding_invalid",
        "the recovery marker, completion extension, profile, EOF descriptor, schema, window or row count in the "
        "journal disagree or are of an unknown version",
        "preserve the journal and stage; investigate tampering or a mismatched selector; never edit records",
        retryable=False,
        summary="the recovery binding disagrees",
    ),
    ErrorCode(
        "native_transfer.stage_integrity_failed",
        "a durable stage object is missing, tampered or does not match its chunk receipt",
        "preserve the stage; the invocation must be settled and re-extracted",
        retryable=False,
        summary="a stage object is missing or altered",
    ),
    ErrorCode(
        "native_transfer.stage_retirement_failed",
        "the storage refused to remove a stage object or prefix (permission, I/O or a non-empty directory)",
        "fix the stage storage and rerun; the invocation stays unsettled and its custody held until retirement "
        "succeeds",
        retryable=True,
        summary="a stage object could not be removed",
    ),
    ErrorCode(
        "native_transfer.journal_corrupt",
        "the recovery journal has a gap, a broken hash chain, a non-canonical or oversize record, or an impossible "
        "record order",
        "preserve the journal; investigate the storage and any concurrent writer",
        retryable=False,
        summary="the recovery journal is corrupt",
    ),
    ErrorCode(
        "native_transfer.journal_conflict",
        "this writer was fenced: another process appended to the recovery journal first, or this writer's own lease "
        "expired before its next write (the detail says which)",
        "stop this attempt; the owning attempt or a later retry resumes from the journal",
        retryable=True,
        summary="this writer was fenced",
    ),
    ErrorCode(
        "native_transfer.custody_held",
        "a previous invocation's writer lease or target custody is not proven settled",
        "wait for the lease to expire or settle the held custody; overlapping runs are blocked",
        retryable=True,
        summary="an earlier invocation is not settled",
    ),
    ErrorCode(
        "native_transfer.target_verification_failed",
        "the typed digest or row count the target computed over the staged rows differs from the source's row hashes "
        "(checked after each load; under a lock on staging, the publishing transaction proves each chunk unchanged "
        "since, or recomputes it)",
        "nothing was published and the old target is intact; let Airflow retry (it reloads the sealed stage). If it "
        "fails again on the same chunk, either the target stores other values than the route sent (its driver or "
        "session settings: see targets.md) or the sealed stage differs from the source: check the target first, "
        "then trigger a new DAG run, which re-extracts, and report the failure with the task log (see "
        "transfer-verification.md)",
        retryable=True,
        summary="the target's digest differs",
    ),
    ErrorCode(
        "native_transfer.row_digest_unknown",
        "the journal's chunk plan names a row digest method this version does not know (written by a newer version)",
        "run the task with the version that sealed the stage, or trigger a new DAG run, which re-extracts",
        retryable=False,
        summary="unknown row digest method",
    ),
    ErrorCode(
        "native_transfer.row_digest_unsupported",
        "the target cannot compute the row digest method the chunk plan was sealed with",
        "trigger a new DAG run against this target: the route then plans the method the target computes",
        retryable=False,
        summary="target lacks the row digest",
    ),
    ErrorCode(
        "native_transfer.publication_outcome_unknown",
        "the target cannot prove whether the publication committed",
        "keep the run held; reconcile the target receipt before any retry or cleanup",
        retryable=True,
        summary="publication outcome unknown",
    ),
    ErrorCode(
        "native_transfer.publication_absent",
        "the publication was proven not committed after an interrupted commit",
        "retry the task; it republishes source-free from the sealed stage",
        retryable=True,
        summary="the publication did not commit",
    ),
    ErrorCode(
        "native_transfer.stage_store_url_invalid",
        "the stage base ([dpone] native_transfer_base or the operator's stage_base) names a scheme no installed "
        "filesystem serves (a typo, or the provider that registers the scheme is not installed); nothing was written",
        "fix the URL's scheme, or install the provider of the store (apache-airflow-providers-amazon for s3://, "
        "apache-airflow-providers-google for gs://) on every worker",
        retryable=False,
        summary="no filesystem for the stage URL",
    ),
    ErrorCode(
        "native_transfer.stage_store_overwrites",
        "the stage base accepted a second create of one probe object (it ignores the conditional write, S3's "
        "If-None-Match: *), so two tries could overwrite each other's journal records and stage objects silently; "
        "nothing of the transfer was read or written",
        "point [dpone] native_transfer_base (or the operator's stage_base) at a store that refuses the second write "
        "with 412 PreconditionFailed (AWS S3 does; for S3-compatible servers check with docs/several-workers.md)",
        retryable=False,
        summary="the stage store overwrites",
    ),
    ErrorCode(
        "native_transfer.storage_unsupported",
        "the stage/journal storage cannot create objects exclusively and atomically (or an empty object was to be "
        "written: s3fs writes one without the condition)",
        "use file:// or an object store whose filesystem supports exclusive create",
        retryable=False,
        summary="storage cannot create exclusively",
    ),
    ErrorCode(
        "native_transfer.source_query_failed",
        "the snapshot SELECT or a metadata read failed on the server (timeout, limit, cancellation, lost session)",
        "retry as a new invocation; raise the bounded limits only through the connection, never per workload",
        retryable=True,
        summary="a source query failed on the server",
    ),
    ErrorCode(
        "native_transfer.source_cancel_unconfirmed",
        "the KILL QUERY sent for an abandoned snapshot SELECT failed or was refused (logged as a warning, never raised:"
        " the run fails with its original error)",
        "nothing to retry; the server still cancels the SELECT when the connection closes. If it keeps running "
        "(system.processes, by the query id in the warning), check that no balancer holds the upstream connection "
        "open and that the source account may run KILL QUERY on its own queries",
        retryable=True,
        summary="a KILL QUERY was not confirmed",
    ),
)

# target side: staging, chunk load/verification, atomic publication, receipts and reconciliation (SQL Server and the
# PostgreSQL adapter of the same port). Details carry only opaque ids, ordinals, counts, digests and SQLSTATE classes.
CODES += (
    ErrorCode(
        "native_transfer.target_type_unsupported",
        "a source column type has no lossless, exactly verifiable target mapping (floats, nested, >38 digits, ...)",
        "cast the column in the source to a supported type; see docs/targets.md for the type mapping",
        retryable=False,
        summary="no exact target type",
    ),
    ErrorCode(
        "native_transfer.target_plan_invalid",
        "the target plan is malformed (invocation id, names, reserved prefix, window, mode or column set)",
        "fix the reported field of the target plan; names starting with __dpone_ are reserved",
        retryable=False,
        summary="the target plan is malformed",
    ),
    ErrorCode(
        "native_transfer.target_value_invalid",
        "a row value does not fit its target column (range, precision, UTF-8 text, NUL in PostgreSQL text)",
        "check the source column type; map String as binary (the lossless default) if values are not UTF-8",
        retryable=False,
        summary="a value does not fit its column",
    ),
    ErrorCode(
        "native_transfer.target_unavailable",
        "the target database could not be reached or refused the session before any change was made",
        "check the target connection and retry the task; nothing was changed",
        retryable=True,
        summary="the target database did not answer",
    ),
    ErrorCode(
        "native_transfer.target_relation_not_found",
        "the target table of a partition_replace does not exist (a window replacement writes into an existing "
        "table and never creates one)",
        "create the target table, e.g. by one full_refresh run of the same manifest, or correct sink.schema and "
        "sink.table",
        retryable=False,
        summary="the target table does not exist",
    ),
    ErrorCode(
        "native_transfer.target_schema_mismatch",
        "the target table is not a base table, or its columns differ from the planned mapping",
        "align the target table with the planned column types (see docs/targets.md) or use full_refresh",
        retryable=False,
        summary="target columns differ from plan",
    ),
    ErrorCode(
        "native_transfer.target_column_unpadded",
        "a binary column of the SQL Server target table was created with ANSI_PADDING OFF (sys.columns.is_ansi_padded "
        "= 0): it drops the trailing zero bytes of every value it stores",
        "recreate the column (or the table) in a session with SET ANSI_PADDING ON, e.g. by one full_refresh run of the "
        "same manifest; see docs/targets.md",
        retryable=False,
        summary="a column has ANSI_PADDING OFF",
    ),
    ErrorCode(
        "native_transfer.target_prepare_failed",
        "the staging table or the receipt table could not be created",
        "check CREATE TABLE permission in the target schema; the invocation's staging can be retried",
        retryable=True,
        summary="staging could not be created",
    ),
    ErrorCode(
        "native_transfer.target_chunk_already_loaded",
        "rows of this chunk ordinal are already in staging (an earlier load committed)",
        "verify the chunk; discard it and load again only if verification fails",
        retryable=True,
        summary="the chunk is already staged",
    ),
    ErrorCode(
        "native_transfer.target_load_failed",
        "a chunk load failed; its transaction was rolled back, or its commit acknowledgement was lost",
        "verify the chunk to observe whether it is present; a retry prepares empty staging and reloads the stage",
        retryable=True,
        summary="a chunk load failed",
    ),
    ErrorCode(
        "native_transfer.target_staging_missing",
        "the invocation's staging table does not exist and no publication receipt exists",
        "prepare the staging again and reload every chunk from the durable stage",
        retryable=True,
        summary="the staging table is missing",
    ),
    ErrorCode(
        "native_transfer.target_staging_schema_changed",
        "at publication, the staging table's columns (names, order, types, nullability, collation) differ from the "
        "ones the provider created it with and its chunks were loaded and verified into: staging was altered after "
        "verification, and a value check alone would publish a foreign column type",
        "nothing was published and the old target is intact; find who alters the provider's staging tables in the "
        "target schema and stop it, then let Airflow retry (the next attempt stages again)",
        retryable=True,
        summary="staging columns changed",
    ),
    ErrorCode(
        "native_transfer.target_staging_incomplete",
        "the staged chunks differ from the publication request; the details name each ordinal not requested, "
        "requested but not staged, or staged with fewer or more rows than its verification counted (a writer "
        "changed staging after verification, or a crash left a bulk-load probe row)",
        "nothing was published and the old target is intact; if rows were added or removed, find who writes into the "
        "provider's staging tables and stop it; then let Airflow retry (the next attempt prepares staging again)",
        retryable=True,
        summary="staged chunks differ from request",
    ),
    ErrorCode(
        "native_transfer.target_rows_outside_window",
        "staged rows lie outside the replaced UTC window (or have a NULL window value)",
        "fix the source window; publishing them would duplicate rows outside the window",
        retryable=False,
        summary="staged rows outside window",
    ),
    ErrorCode(
        "native_transfer.target_published_window_differs",
        "after the window replace, the row count or typed digest the target computed over its replaced window (inside "
        "the publishing transaction, with writers locked out) differs from the source's verified total: the target "
        "changed rows as they were inserted (a trigger, a rule, a generated or identity column, a column default or "
        "padding rule) or another writer's rows are in the window",
        "nothing was published and the old target is intact; remove or disable what rewrites inserted rows on the "
        "target table (PostgreSQL: pg_trigger, pg_rules, attgenerated; SQL Server: sys.triggers, column definitions), "
        "keep other writers out of the window, then clear the task: it stages and publishes again (see targets.md, Atomic "
        "publication)",
        retryable=False,
        summary="published window differs",
    ),
    ErrorCode(
        "native_transfer.target_publication_already_committed",
        "a publication receipt for this invocation already exists: the publication committed earlier",
        "do not publish again; read the receipt with reconcile and continue with cleanup",
        retryable=False,
        summary="already committed",
    ),
    ErrorCode(
        "native_transfer.target_publication_failed",
        "the publication transaction failed before commit and was rolled back; the target is unchanged",
        "fix the reported cause and publish again (the staging is retained)",
        retryable=True,
        summary="the publication rolled back",
    ),
    ErrorCode(
        "native_transfer.target_publication_outcome_unknown",
        "the publication commit was sent but its acknowledgement was lost",
        "reconcile the publication by its receipt; never publish again before reconcile answers",
        retryable=True,
        summary="commit not acknowledged",
    ),
    ErrorCode(
        "native_transfer.target_publication_in_flight",
        "the publication lock is still held: a publishing transaction may still commit or roll back",
        "reconcile again later; do not publish or clean up until reconcile answers committed or absent",
        retryable=True,
        summary="a publication may still commit",
    ),
    ErrorCode(
        "native_transfer.target_receipt_conflict",
        "the stored publication receipt disagrees with the expected rows or digest",
        "stop and investigate: the receipt table was changed or the plan differs from the committed one",
        retryable=False,
        summary="the receipt disagrees",
    ),
    ErrorCode(
        "native_transfer.target_swap_lock_timeout",
        "the full-refresh swap waited longer than the lock timeout for readers of the target table to let go (SQL "
        "Server error 1222: sp_rename and DROP TABLE need a schema-modification lock); it was rolled back and the old "
        "target is intact",
        "let Airflow retry when the readers are done; if long readers always hold the table, raise the connection's "
        "lock timeout or schedule the run when they do not (see docs/targets.md)",
        retryable=True,
        summary="the swap waited too long for a lock",
    ),
    ErrorCode(
        "native_transfer.target_swap_blocked",
        "the full-refresh swap cannot rename or drop the old target table: a foreign key references it (SQL Server "
        "error 3726) or a schema-bound view or function depends on it (15336, 3729); it was rolled back and the old "
        "target is intact",
        "drop the inbound foreign keys and schema-bound objects of the target table (or make the views not "
        "schema-bound), or use load strategy partition_replace, which keeps the table (see docs/targets.md)",
        retryable=False,
        summary="the old target cannot be swapped",
    ),
    ErrorCode(
        "native_transfer.target_transaction_required",
        "the SQL Server session has no open transaction (@@TRANCOUNT is 0): autocommit is on, so application locks and "
        "chunk transactions cannot be held",
        "remove autocommit from the connection's extras (pymssql must run with autocommit off)",
        retryable=False,
        summary="no open transaction",
    ),
    ErrorCode(
        "native_transfer.target_session_unsupported",
        "the effective target session settings differ, when read back, from what the provider sets on every "
        "connection (SQL Server: NOCOUNT OFF, XACT_ABORT and the ANSI options ON; PostgreSQL: DateStyle, "
        "IntervalStyle, TimeZone, extra_float_digits, client_encoding, search_path, bytea_output, "
        "standard_conforming_strings, synchronous_commit not off, and the READ COMMITTED isolation its transactions "
        "run under)",
        "remove what overrides the session after the provider's SET (a logon trigger, a pooler resetting or sharing "
        "the session, the server's user options) for this login; the detail names each setting that differs",
        retryable=False,
        summary="session settings differ",
    ),
    ErrorCode(
        "native_transfer.target_driver_fault",
        "the target's driver raised an exception outside its database-error classes (NotImplementedError, "
        "ValueError, TypeError, LookupError or ArithmeticError, named in the detail with the step): it could not "
        "convert a value the server returned or was given, for example a timestamp rendered under a DateStyle it "
        "cannot parse; the failing transaction was not committed",
        "nothing was published by the failing step and the old target is intact; a retry fails the same way until "
        "the cause is removed: check what renders values differently on this target (a pooler or logon trigger "
        "changing the session after the provider's settings, a driver version other than the tested one) and "
        "report the detail's exception class and the driver version",
        retryable=False,
        summary="the target driver raised a fault",
    ),
    ErrorCode(
        "native_transfer.target_tds_version_unsupported",
        "the negotiated TDS version is older than 7.3, which cannot carry DATE and DATETIME2 through bulk copy",
        "set tds_version 7.3 or 7.4 in the SQL Server connection's extras (FreeTDS defaults may be older)",
        retryable=False,
        summary="TDS older than 7.3",
    ),
    ErrorCode(
        "native_transfer.target_bulk_outside_transaction",
        "a bulk-copied probe row survived the rollback of its transaction: this server commits INSERT BULK on its own, "
        "so a chunk could be staged without its transaction",
        "use import_backend: mssql_sqlclient for this server, and report the server version and driver settings",
        retryable=False,
        summary="bulk copy autocommits",
    ),
    ErrorCode(
        "native_transfer.target_driver_unsupported",
        "the installed pymssql is older than 2.4.5, whose bulk copy garbles or refuses NVARCHAR values (pymssql "
        "issues #725, #917)",
        "install pymssql 2.4.5 or later in the worker's environment (the provider's dependency asks for it)",
        retryable=False,
        summary="pymssql older than 2.4.5",
    ),
    ErrorCode(
        "native_transfer.target_triggers_present",
        "the target or staging table has triggers: they would change row counts and published rows",
        "drop or disable the triggers on the target table (and any DDL trigger that adds them to new tables)",
        retryable=False,
        summary="the target has triggers",
    ),
    # --- Airflow surface of the route ---
    ErrorCode(
        "native_transfer.reextract_required",
        "an invocation failed before source EOF and was settled (its writer stopped, its stage retired, no target "
        "custody existed)",
        "let Airflow retry (or clear the task): the next try re-extracts as a new invocation; fix the cause first if "
        "it repeats",
        retryable=True,
        summary="the source is read again next try",
    ),
)
