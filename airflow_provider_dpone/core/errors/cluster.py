"""``DPONE_CLICKHOUSE_CLUSTER_*``: ClickHouse cluster publication (static admission, runtime admission, authority)."""

from __future__ import annotations

from airflow_provider_dpone.core.errors.code import ErrorCode

STATIC_ADMISSION: tuple[ErrorCode, ...] = (
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_REQUIRED",
        "the ClickHouse sink declares no physical_design.storage.clickhouse.cluster; only cluster publication is "
        "provided and nothing falls back to a local publisher",
        "declare cluster.name, ddl_scope: cluster and replication_mode for the target cluster",
        retryable=False,
        summary="the sink declares no cluster",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_SOURCE_UNSUPPORTED",
        "source.type is 'artifact': publishing an already sealed artifact from a store by its identity is not "
        "provided in this version",
        "use a source of type clickhouse (a query the stage task extracts and seals itself)",
        retryable=False,
        summary="no artifact sources",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_ABORT_OPERATION_MISMATCH",
        "the abort task's operation_id guard names another operation than the one its target DAG run and manifest "
        "derive; nothing was touched",
        "pass the DAG id and run id of the run to abort with the manifest that run used, and its operation id",
        retryable=False,
        summary="the guard differs",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_DDL_SCOPE_REQUIRED",
        "cluster.ddl_scope is not 'cluster' (publication is one correlated ON CLUSTER operation)",
        "set physical_design.storage.clickhouse.cluster.ddl_scope: cluster",
        retryable=False,
        summary="ddl_scope is not 'cluster'",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_STAGING_DATABASE_MISMATCH",
        "sink.staging_database differs from sink.database (EXCHANGE/RENAME publication needs both in one database)",
        "omit sink.staging_database or set it to sink.database",
        retryable=False,
        summary="staging database differs",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_SOURCE_BYTES_UNBOUNDED",
        "load.max_source_bytes is absent or not positive; cluster publication needs a positive source byte bound",
        "set load.max_source_bytes to a positive integer that bounds the extracted artifact",
        retryable=False,
        summary="no positive max_source_bytes",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_QUERY_SETTINGS_REFUSED",
        "source.query carries a query-level SETTINGS clause: the extraction runs read-only (readonly = 1) with the "
        "provider's limits, which a query may not change (the server would refuse it, Code 164); nothing was sent",
        "remove the SETTINGS clause from source.query; settings the query needs belong in the source account's "
        "settings profile",
        retryable=False,
        summary="source.query has SETTINGS",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_LOAD_STRATEGY_UNSUPPORTED",
        "cluster publication supports only load.strategy: full_refresh",
        "use strategy full_refresh for a ClickHouse cluster target",
        retryable=False,
        summary="not full_refresh",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_ENGINE_UNSUPPORTED",
        "the declared engine is not a *MergeTree table engine that can be a publication target "
        "(Shared*, Merge, View, Memory, Log, KeeperMap and unknown names are refused)",
        "declare a MergeTree-family engine: Replicated*MergeTree for internal mode, *MergeTree for external mode",
        retryable=False,
        summary="engine cannot be a target",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_DISTRIBUTED_TARGET",
        "a Distributed table is declared as the publication target; Distributed access facades are never published to",
        "publish to the local *MergeTree table behind the facade and keep the facade outside dpone",
        retryable=False,
        summary="target is a Distributed table",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_ENGINE_MODE_MISMATCH",
        "the engine does not match replication_mode (internal needs Replicated*MergeTree, external a direct "
        "non-replicated *MergeTree)",
        "change the engine or replication_mode so that both describe the real topology; there is no fallback",
        retryable=False,
        summary="engine does not fit the mode",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_ACCESS_TABLE_UNSUPPORTED",
        "cluster.access_table is declared; access tables are not publication targets and are not maintained",
        "remove cluster.access_table and manage any Distributed read facade outside dpone",
        retryable=False,
        summary="access_table declared",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_TARGET_NAME_RESERVED",
        "the target table name uses the reserved '__dpone' namespace of candidates and the authority table",
        "choose a target table name that does not contain '__dpone'",
        retryable=False,
        summary="target name uses '__dpone'",
    ),
)
"""Static admission: checked from the manifest alone, before any connection or credential is touched."""

RUNTIME_ADMISSION: tuple[ErrorCode, ...] = (
    # runtime admission, authority and publication
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_IDENTITY_INVALID",
        "an input of a deterministic identity is malformed (digest, position, scheduler invocation or name)",
        "pass the normalized plan digest (64 hex) and non-empty dag/run ids exactly as the scheduler produced them",
        retryable=False,
        summary="an identity input is malformed",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_REQUEST_INVALID",
        "the publication request (names, plan digest, table definition or byte bound) is malformed",
        "fix the reported fields of the task's publication request",
        retryable=False,
        summary="the publication request is malformed",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_NOT_DEFINED",
        "the coordinator's system.clusters has no rows for the declared cluster name",
        "correct the manifest's cluster name (the detail names it) or define that cluster in the coordinator's "
        "remote_servers; a retry cannot help",
        retryable=False,
        summary="no such cluster on the coordinator",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE",
        "a member (or the coordinator) did not answer an admission read",
        "bring the member the detail names back; partial inventory is never sufficient",
        retryable=True,
        summary="a member did not answer",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_MULTI_SHARD",
        "the cluster has more than one shard; cluster publication supports exactly one shard",
        "publish to a one-shard cluster definition",
        retryable=False,
        summary="the cluster has several shards",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_TOO_FEW_MEMBERS",
        "the shard has fewer than two unique members",
        "add a second replica to the shard in the cluster definition (remote_servers); this provider publishes "
        "only to clusters of two or more members and has no single-server publisher",
        retryable=False,
        summary="fewer than two members",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_AMBIGUOUS",
        "two inventory rows share a (shard, replica) position or an endpoint, so members cannot be mapped one to one",
        "fix the remote_servers definition so every replica is listed once",
        retryable=False,
        summary="two members share a position",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_MIXED_REPLICATION",
        "inventory rows disagree on internal_replication",
        "make internal_replication uniform for the shard",
        retryable=False,
        summary="members disagree",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_REPLICATION_MODE_MISMATCH",
        "the declared replication_mode does not match the observed internal_replication flag",
        "declare replication_mode: external only for internal_replication=false clusters (internal otherwise)",
        retryable=False,
        summary="replication_mode mismatch",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_DDL_ENTRY_FORMAT_UNSUPPORTED",
        "the coordinator session's distributed_ddl_entry_format_version is below 2: ClickHouse would queue the"
        " ON CLUSTER statements without their settings, so the publication could not find its own queue entries",
        "set distributed_ddl_entry_format_version to 2 or more (the default) in the connection user's profile,"
        " or remove the override",
        retryable=False,
        summary="DDL entry format below 2",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_MEMBER_ID_COLLISION",
        "two members of one inventory derive the same short opaque member id",
        "report this inventory shape; the id length must be raised in a new identity version",
        retryable=False,
        summary="two members share a member id",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_DATABASE_NOT_ATOMIC",
        "the target database is missing or is not an Atomic database on some member",
        "create the target database with ENGINE = Atomic on every member",
        retryable=False,
        summary="database missing or not Atomic",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_EXTERNAL_ADMISSION_DISABLED",
        "the deployment disabled the admission of new external-replication operations ([dpone] "
        "external_replication_admission = False, the rollback switch); nothing was fenced, and operations already "
        "fenced, their candidates and predecessors are kept and still resume, abort and clean up",
        "publish this target in internal mode (replication_mode: internal) where the topology allows it, or set "
        "[dpone] external_replication_admission = True once the reason for the rollback is resolved",
        retryable=False,
        summary="external admission is off",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_EXCHANGE_UNSUPPORTED",
        "a member cannot EXCHANGE tables in the target database: the fence's probe (two scratch tables of this "
        "operation, exchanged and dropped on that member alone) was refused because the kernel or the filesystem "
        "of the member's metadata directory has no renameat2(RENAME_EXCHANGE) (ClickHouse Code 48 NOT_IMPLEMENTED or "
        "Code 1 UNSUPPORTED_METHOD); nothing was fenced or staged",
        "move that member's ClickHouse data path (its metadata directory) to a local filesystem that supports "
        "RENAME_EXCHANGE (ext4, xfs, btrfs; not every network or overlay filesystem does) on Linux 3.15 or later, "
        "then run the DAG again; check with EXCHANGE TABLES on two scratch tables on that member",
        retryable=False,
        summary="a member cannot EXCHANGE",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TABLE_UNSUPPORTED",
        "the KeeperMap authority table is absent or differs from the required columns, key or engine on some member",
        "provision __dpone_cluster_publication_authority with the seven required columns, PRIMARY KEY target_key and one "
        "literal KeeperMap path on every member; nothing is migrated automatically",
        retryable=False,
        summary="authority table is wrong",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED",
        "the table engine does not match the replication mode (internal: Replicated*MergeTree, external: a direct "
        "non-replicated *MergeTree), in the request or on some member's existing target",
        "declare the engine and replication_mode of the real topology; a target of the other mode's engine is adopted "
        "only when the previous operation on the target was of that mode",
        retryable=False,
        summary="engine unfit for mode",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_DRIFT",
        "the live inventory differs from the inventory bound to the operation",
        "restore the bound topology and retry, or abort the operation before publication and start a new run",
        retryable=False,
        summary="the cluster inventory changed",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_RECORD_INVALID",
        "an authority row or payload is malformed, or its columns disagree with its payload",
        "preserve the row; investigate who wrote it; never delete or rewrite authority rows by hand",
        retryable=False,
        summary="authority row malformed",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_DIGEST_MISMATCH",
        "an authority payload does not match its payload_sha256",
        "preserve the row and investigate storage integrity or tampering",
        retryable=False,
        summary="authority digest mismatch",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_PAYLOAD_OVERSIZE",
        "an authority payload exceeds the 256 KiB bound",
        "preserve the row; an oversize payload is corrupt or hostile",
        retryable=False,
        summary="authority payload too big",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_PAYLOAD_NONCANONICAL",
        "an authority payload is not the canonical encoding of its record",
        "preserve the row and investigate who rewrote it; never re-encode it to make it pass",
        retryable=False,
        summary="payload not canonical",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TRANSITION_INVALID",
        "a requested phase change is not in the allowed transition table",
        "this is a protocol defect or a tampered record; preserve state and report it",
        retryable=False,
        summary="phase change not allowed",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_CONFLICT",
        "another writer changed the authority row first (strict insert or version check lost)",
        "retry the task: it re-reads the authority and resumes or is fenced",
        retryable=True,
        summary="another writer changed the authority",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_OUTCOME_UNKNOWN",
        "an authority write was not acknowledged, or its read-back did not show exactly that write: the version moved "
        "past it, or every read within the bound (`authority_rereads`) still showed an older version (a Keeper server "
        "behind the write answered; Keeper reads are not linearizable across servers)",
        "retry the task: it re-reads the authority; no dispatch permit was granted. If it recurs, check the Keeper "
        "ensemble's follower lag and whether the coordinator endpoint spans several ClickHouse servers",
        retryable=True,
        summary="authority write not proven",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_WRITE_REFUSED",
        "the server refused an authority write (for example: no INSERT or ALTER UPDATE grant on the authority table, "
        "a read-only Keeper session); nothing was written",
        "fix what the server's answer names (grants on __dpone_cluster_publication_authority, Keeper health), then "
        "retry the task: it re-reads the authority and resumes",
        retryable=True,
        summary="authority write refused",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_UNAVAILABLE",
        "the authority row could not be read",
        "check Keeper and the KeeperMap table, then retry the task",
        retryable=True,
        summary="the authority row could not be read",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED",
        "the target is held by a different unresolved operation",
        "let the holding operation finish, or abort it before publication; there is no lease stealing",
        retryable=False,
        summary="another operation holds the target",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_INTERNAL_RECORD_UNRESOLVED",
        "an unresolved internal (replicated) publication record holds the target, which blocks external mode",
        "finish or recover the internal operation first (clear its failed task, or abort it before publication)",
        retryable=False,
        summary="held by internal mode",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_EXTERNAL_RECORD_UNRESOLVED",
        "an unresolved external publication record holds the target, which blocks internal mode",
        "finish or recover the external operation first (clear its failed task, or abort it before publication)",
        retryable=False,
        summary="held by external mode",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_OPERATION_ABORTED",
        "this operation was aborted before publication; an aborted operation never resumes",
        "start a new DAG run (a new operation id) to publish again",
        retryable=False,
        summary="this operation was aborted",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_VERIFICATION_BUDGET_EXCEEDED",
        "a content verification read (a candidate's or a published table's content digest) ran longer than the "
        "verification budget and the server stopped it (max_execution_time, TIMEOUT_EXCEEDED); nothing was "
        "verified and nothing changed, every object is retained",
        "raise the verification budget or reduce the data, then retry: the retry verifies again",
        retryable=True,
        summary="verification timed out",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY",
        "the operation is not yet in the phase this task needs",
        "retry after the upstream task has succeeded",
        retryable=True,
        summary="the operation is not in the needed phase",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_UNSUPPORTED",
        "the sealed artifact is not replayable, exceeds max_source_bytes or the row budget max_source_rows, or does "
        "not match the table schema",
        "produce a replayable content-addressed artifact within the byte bound; the operation was aborted",
        retryable=False,
        summary="artifact not publishable",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_COLUMN_TYPE_UNSUPPORTED",
        "a column of the source query has a type outside the publication's encoder profile: nested or dynamic "
        "(Array, Map, Tuple, Nested, JSON, Object, Dynamic, Variant, AggregateFunction, ...) or LowCardinality; "
        "the operation was aborted before extraction",
        "cast the column in the source query to a scalar type (integer, float, Bool, String, FixedString, UUID, "
        "IPv4/IPv6, Date, DateTime, DateTime64, Decimal, optionally Nullable), e.g. toJSONString(col) for JSON",
        retryable=False,
        summary="a column type unsupported",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_INVALID",
        "the sealed artifact is missing or its bytes no longer match the receipt bound in authority",
        "restore the retained artifact from the content-addressed store; never re-extract under the same operation",
        retryable=False,
        summary="artifact missing or altered",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT",
        "the existing target differs between members (presence, schema or content), or changed since the baseline",
        "repair the target so every member holds equal content, then retry; nothing was mutated",
        retryable=False,
        summary="members' targets differ",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_TARGET_DRIFT",
        "the live target was written or altered in place (same UUID) after the operation observed its baseline, "
        "before the publication DDL (nothing published) or while it was in flight (published, never committed); "
        "the cleanup would drop that write with the predecessor",
        "every table is kept, the write included; find the writer; before the DDL abort the operation (put the "
        "write into the source if it must survive) and start a new run; after it follow the runbook",
        retryable=False,
        summary="the live target was written in place",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_FOREIGN",
        "a table occupies the candidate name with a UUID this operation never intended",
        "inspect the foreign table; it is retained and never adopted or dropped automatically",
        retryable=False,
        summary="a foreign table holds the name",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_DIVERGENT",
        "an owned candidate is in a state no load of this operation explains: vanished after it was bound, more "
        "rows than the artifact (duplicated), other content or schema (divergent), or a staged (READY) candidate no "
        "longer matches the desired generation; the operation stopped and every object is retained",
        "preserve state and investigate writes or drops that bypass the provider; then abort the operation (it "
        "drops only its own candidates by UUID) and run again",
        retryable=False,
        summary="a candidate is unexplained",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_PUBLISHED_CONTENT_DIVERGENT",
        "after the publication DDL a member's target is the bound candidate but no longer holds exactly the verified "
        "generation (its schema, rows or content changed after the barrier, while the DDL was in flight); the "
        "operation was not committed",
        "preserve state: every object is retained (the predecessor under the candidate name); stop the writer that "
        "bypassed the provider, restore the predecessor or accept the content, then release the target with "
        "DponeReleaseOperator (runbook: a publication stopped after its swap)",
        retryable=False,
        summary="published content changed",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_PUBLISHED_CHANGED_AFTER_COMMIT",
        "the publication is committed, but observed again after the COMMITTED write a member's target no longer holds "
        "exactly the committed generation (written between the check after the publication DDL and the COMMITTED "
        "write, or since); the record stays COMMITTED and the receipt's after_commit says which members changed",
        "find the writer by the members' counts and digests in the receipt; then accept the table as it is (mark the "
        "publish task successful and run cleanup) or restore it (accept, then a new DAG run republishes); see the "
        "runbook. A retry of the task never publishes again: it only looks again",
        retryable=False,
        summary="target changed later",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_STAGING_REBUILD_LIMIT",
        "a member's candidate was rebuilt too many times within one operation",
        "investigate the member's load failures; the operation can be aborted before publication",
        retryable=False,
        summary="too many candidate rebuilds",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_MEMBER_OUTCOME_UNKNOWN",
        "a member mutation (create, load or drop) did not return an acknowledgement",
        "retry the task: it observes the member and resumes without repeating the mutation blindly",
        retryable=True,
        summary="a member mutation went unanswered",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_MEMBER_MUTATION_REJECTED",
        "a member refused a create, load, exchange or drop",
        "retry the task: it observes the member; check grants and disk if it repeats",
        retryable=True,
        summary="a member refused a mutation",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_MIXED",
        "the bound ON CLUSTER DDL (publication, cleanup, or a replicated candidate's create or drop) finished or failed "
        "on a member that does not show its effect",
        "follow the terminal-mixed recovery runbook; all objects are retained and nothing is re-dispatched (a "
        "publication whose entry finished everywhere: restore or accept, then release the target with "
        "DponeReleaseOperator)",
        retryable=False,
        summary="DDL outcome differs by member",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_EVIDENCE_MISSING",
        "the bound DDL queue entry is missing or incomplete while members already show its effect",
        "follow the runbook; the queue evidence may have expired; objects are retained",
        retryable=False,
        summary="DDL queue entry missing",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_FOREIGN_UUID",
        "a member's target or candidate name holds a UUID other than the bound predecessor or candidate",
        "inspect the member for writers that bypass the provider; objects are retained (after the publication's "
        "entry finished everywhere: restore or accept, then release the target with DponeReleaseOperator)",
        retryable=False,
        summary="a foreign UUID is in place",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_DISPATCH_UNPROVEN",
        "a dispatch was recorded (so it may have been sent) but its DDL never reached the queue within the quiet "
        "period and no member shows an effect; whether the request is still in flight cannot be proven, so nothing "
        "is re-dispatched",
        "all objects and the record are retained; follow the runbook: restart the coordinator, wait past the recorded "
        "dispatch time plus the margins, run the void-permit action (DponeVoidPermitOperator or dpone void-permit), then retry",
        retryable=False,
        summary="a dispatch cannot be proven",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_DISPATCH_NOT_SENT",
        "a dispatch permit was never sent: its dispatch was not recorded (the task stopped first, or a concurrent "
        "write fenced it), or was recorded too late to send within the dispatch deadline",
        "retry the task: it takes a new permit (new epoch and token) and sends it; no restart or void is needed",
        retryable=True,
        summary="a dispatch permit was never sent",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_ABORT_CREATE_IN_FLIGHT",
        "the abort dropped every owned candidate it found, but a candidate CREATE a stage try sent before the abort's "
        "fence may still reach a member until the intent time plus the dispatch deadline, send timeout and skew margin",
        "retry the abort after the time in the detail (Airflow retries it): it drops what landed, then writes ABORTED",
        retryable=True,
        summary="a candidate CREATE may be in flight",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_VOID_NOTHING_TO_VOID",
        "the void-permit action found no bound dispatch permit to void in the operation's phase (nothing changed)",
        "void only an operation stopped with DISPATCH_UNPROVEN; check the DAG run, the manifest and the phase",
        retryable=False,
        summary="no permit to void",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_VOID_RESTART_UNPROVEN",
        "the void-permit action has no proof that the coordinator restarted after the permit time plus the dispatch "
        "deadline, the send timeout and the clock-skew margin (or its start time could not be read); a stalled "
        "coordinator may still hold the request, so nothing changed",
        "restart the coordinator server once that much time has passed since the permit (the detail says how much "
        "later it must start), wait until it answers, then run the void-permit action again",
        retryable=False,
        summary="no restart proof",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_VOID_QUEUE_ENTRY_EXISTS",
        "the void-permit action found a distributed DDL queue entry carrying the permit's token: the request was "
        "queued, so the permit is not void and nothing changed",
        "do not void it: retry the stopped task, which reconciles the entry and every member",
        retryable=False,
        summary="the permit was queued",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_VOID_MEMBER_CHANGED",
        "the void-permit action found a member whose tables are not exactly the step's pre-dispatch UUIDs: the DDL "
        "(or something foreign) took effect, so the permit is not void and nothing changed",
        "do not void it: retry the stopped task to reconcile, and diagnose the member from the retained objects",
        retryable=False,
        summary="a member's tables changed",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING",
        "the replicated candidate's bound ON CLUSTER create or drop has not finished on every replica yet",
        "retry the stage task: it resumes the same bound queue entry by observation; nothing is re-dispatched (an "
        "abort waits the same way; when the entry never appears, void the permit as the runbook says, then abort)",
        retryable=True,
        summary="candidate DDL still running",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_MEMBER_ACCESS_DENIED",
        "a member refused a statement of the protocol for want of a grant (ACCESS_DENIED, Code 497), for example "
        "SYSTEM SYNC REPLICA on the staging database in internal mode; nothing was changed",
        "grant what the detail names (docs/limitations.md lists the publication grants), then clear the task: it "
        "resumes from the authority; a retry without the grant cannot succeed",
        retryable=False,
        summary="a member lacks a grant",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_REPLICA_NOT_CONVERGED",
        "a replica of the candidate did not fetch every replicated part within the bounded wait",
        "retry the stage task: it waits again without mutating; check the replica's Keeper session and fetches",
        retryable=True,
        summary="a replica has not caught up",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_REPLICA_SET_INVALID",
        "the candidate's replicas are not one replicated table (a replica is missing from system.replicas, reports "
        "another Keeper path, or the replica count differs from the inventory)",
        "inspect system.replicas for the candidate on every member; objects are retained and nothing is dropped",
        retryable=False,
        summary="replicas are not one table",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_DDL_QUEUE_UNAVAILABLE",
        "the status of the bound distributed DDL queue entry could not be read",
        "retry the task; the queue is read again, nothing is re-dispatched",
        retryable=True,
        summary="DDL queue status unreadable",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_COORDINATOR_UNAVAILABLE",
        "the coordinator's server identity, read before an ON CLUSTER permit is taken (the dispatch is pinned to "
        "that server), could not be read; no permit was written and nothing was dispatched",
        "retry the task once the coordinator answers",
        retryable=True,
        summary="coordinator id unreadable",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_DDL_WAIT_EXHAUSTED",
        "the bound ON CLUSTER DDL (publication or cleanup) was still unfinished on some member when this try's wait "
        "ended (timeout_seconds in the worker, or max_deferrals deferrals)",
        "let Airflow retry: the retry resumes the same bound entry and re-dispatches nothing; check the pending "
        "members' DDL workers if it repeats",
        retryable=True,
        summary="the DDL outlasted this try's wait",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_REBUILT",
        "a member's candidate was incomplete after an ambiguous load (empty after a lost or unsent load, or partial) "
        "and is rebuilt from the same artifact; staging goes on",
        "nothing, unless it repeats: after the rebuild limit staging stops with "
        "DPONE_CLICKHOUSE_CLUSTER_STAGING_REBUILD_LIMIT; check the member's disk and load errors",
        retryable=True,
        summary="an incomplete candidate is rebuilt",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_ABORT_AFTER_PUBLICATION",
        "abort was requested after publication was dispatched",
        "an operation can be aborted only before publication; let it finish or follow the runbook",
        retryable=False,
        summary="publication already sent",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_RECEIPT_INVALID",
        "a publication receipt is malformed or does not belong to the committed authority record",
        "re-read the receipt from the committed authority record",
        retryable=False,
        summary="a publication receipt is invalid",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_ABORT_INCOMPLETE",
        "an abort fenced this operation (phase ABORTING) and has not yet dropped every owned candidate and written "
        "ABORTED; no publication permit can be taken any more",
        "run the abort task again: it drops what is left by exact UUID and writes ABORTED; then start a new DAG run",
        retryable=False,
        summary="the abort has not finished",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_VOID_SKEW_MARGIN_INVALID",
        "the void-permit action was given a clock-skew margin of zero (or less): a restart proof that assumes the "
        "workers' and the coordinator's clocks agree exactly proves nothing; nothing changed",
        "run the void with a positive margin at least the real skew of your clocks ([dpone] "
        "void_skew_margin_seconds or skew_margin_seconds, default 60)",
        retryable=False,
        summary="skew margin not positive",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_VOID_SERVER_DIFFERS",
        "the void-permit action's restart proof was answered by another server than the one the permit's dispatch "
        "was pinned to (a load balancer or a changed connection): that server's restart proves nothing about the "
        "request; nothing changed",
        "point the coordinator connection at the server the detail names by its UUID (or wait until the balancer "
        "routes to it), then run the void-permit action again. If that server lost its data directory and was "
        "recreated on the same host with a new UUID, run the void with retired_server_uuid set to the pinned UUID "
        "(runbook: a recreated coordinator)",
        retryable=False,
        summary="another server answered",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_VOID_REPLACEMENT_UNPROVEN",
        "the void-permit action was told the permit's server identity is retired (retired_server_uuid), but the "
        "server that answered is not its replacement: the retired UUID is not the one the permit was pinned to, the "
        "answering server still has that UUID, or it runs on another host name (a load balancer may route to a "
        "server that never held the request); nothing changed",
        "compare retired_server_uuid with the pinned UUID in the detail; point the coordinator connection at the "
        "server recreated on the pinned server's host, check that serverUUID() there shows the new UUID, then run "
        "the void again",
        retryable=False,
        summary="replacement not proven",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_OPERATION_RELEASED",
        "this operation's publication stopped after its swap and was released by the operator (restored or "
        "accepted, recorded in the authority as RELEASED); a released operation never resumes",
        "start a new DAG run (a new operation id) to publish again",
        retryable=False,
        summary="the operation was released",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOT_STOPPED",
        "the release action found no publication stopped after its swap: the operation is not in "
        "PUBLICATION_DISPATCHING with PUBLISHED_CONTENT_DIVERGENT, PUBLICATION_FOREIGN_UUID, PUBLICATION_MIXED or TARGET_DRIFT "
        "recorded as its last error (nothing changed)",
        "release only a run whose publish failed with one of those codes; check the DAG run, the manifest and the "
        "phase (clear publish first if the failure was not recorded: it stops the same way and records it)",
        retryable=False,
        summary="no stopped publication",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOTHING_TO_RELEASE",
        "the release action found no record of the run's operation: the target's record is another operation's, "
        "which has ended (ABORTED, COMPLETED or RELEASED, named in the detail), so the run holds nothing to release "
        "(nothing changed)",
        "check that target_dag_id, target_run_id and the manifest name the run whose publish stopped after its swap "
        "(its log and receipt give its operation id); an ended holder needs no release: a new DAG run takes the "
        "target",
        retryable=False,
        summary="nothing to release",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_RELEASE_DDL_PENDING",
        "the release action found the bound publication's queue entry missing or not finished on every member's "
        "host: the EXCHANGE/RENAME may still run, so nothing changed",
        "fix the member's DDL worker and wait until system.distributed_ddl_queue shows the entry finished on every "
        "host (no entry at all: follow DISPATCH_UNPROVEN), then run the release again",
        retryable=True,
        summary="the publication DDL may still run",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOT_RESTORED",
        "the release action was told 'restored', but a member is not as before the publication: the baseline "
        "target UUID (or none) under the target name with the baseline's recorded content, and the operation's "
        "candidate under the candidate name (nothing changed)",
        "finish the swap back on every member (runbook), compare each member's UUIDs and content with the record's "
        "target_uuid and target_content_digest, then run the release again",
        retryable=False,
        summary="members are not restored",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOT_ACCEPTED",
        "the release action was told 'accepted', but a member is not as after the publication (the operation's "
        "candidate under the target name, the predecessor under the candidate name, the artifact's schema), its "
        "target does not hold the declared row count, or the members' contents differ (nothing changed)",
        "make every member serve the same content you accept (runbook), count its rows again, then run the "
        "release with that row count; or restore instead",
        retryable=False,
        summary="members not as published",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_RELEASE_DECIDED_OTHERWISE",
        "the release action found the operation already released with another decision or row count; a "
        "release is recorded once (nothing changed)",
        "read the recorded release in the authority record (release.decision); start a new DAG run",
        retryable=False,
        summary="released differently",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_TOO_MANY_MEMBERS",
        "the cluster's shard lists more members than the member-count budget (16): its authority record and the "
        "per-member fan-out would exceed their bounds; nothing was touched",
        "publish to a cluster definition with at most 16 replicas of the shard",
        retryable=False,
        summary="more than 16 members",
    ),
)
"""Runtime admission, authority and publication: checked against the live cluster and the Keeper authority."""

CODES: tuple[ErrorCode, ...] = STATIC_ADMISSION + RUNTIME_ADMISSION
