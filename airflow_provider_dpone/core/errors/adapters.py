"""``DPONE_ARTIFACT_*`` and ``DPONE_CLICKHOUSE_*`` (not ``_CLUSTER_``): the ClickHouse adapters and the artifact store.

These are failures of the real systems behind the publication ports: extraction bounds, artifact bytes that do not
match their declared schema, column types outside the supported profile, the transport's one-shot guard and member
endpoint resolution. Details carry only sanitized facts (counts, digests, opaque member ids, field positions).
"""

from __future__ import annotations

from airflow_provider_dpone.core.errors.code import ErrorCode

CODES: tuple[ErrorCode, ...] = (
    ErrorCode(
        "DPONE_ARTIFACT_SOURCE_BYTES_EXCEEDED",
        "the extracted artifact reached max_source_bytes while streaming; extraction stopped at the bound and kept "
        "no partial artifact",
        "narrow the source query or raise load.max_source_bytes deliberately",
        retryable=False,
        summary="the artifact reached max_source_bytes",
    ),
    ErrorCode(
        "DPONE_ARTIFACT_SCHEMA_MISMATCH",
        "the artifact's Native columns differ from the declared table columns (a name is missing or unknown, or a "
        "type differs); ClickHouse refused the strict load",
        "make the source query return exactly the declared columns with exactly the declared types",
        retryable=False,
        summary="artifact columns differ from the table",
    ),
    ErrorCode(
        "DPONE_ARTIFACT_EXTRACTION_FAILED",
        "the source query failed or its stream broke before the end; no artifact was sealed",
        "check the source query and the source server, then retry the task",
        retryable=True,
        summary="the source query or its stream failed",
    ),
    ErrorCode(
        "DPONE_ARTIFACT_STORE_FAILED",
        "the artifact store could not write, rename or read an artifact object",
        "check the artifact store location, its credentials and free space, then retry the task",
        retryable=True,
        summary="the artifact store failed a read or write",
    ),
    ErrorCode(
        "DPONE_ARTIFACT_SOURCE_DIGEST_MISMATCH",
        "the artifact's row count or content digest, computed from the stored bytes, differs from the source engine's "
        "own count and digest of the source query: the bytes changed between the source and the store, or the "
        "source's rows changed between the extraction and the second read; nothing was published",
        "retry the task (it extracts again); if it repeats, make the source query stable while it runs (a snapshot "
        "table, closed partitions, ORDER BY with any LIMIT) and check the path between the source and the store",
        retryable=True,
        summary="the artifact differs from the source",
    ),
    ErrorCode(
        "DPONE_ARTIFACT_SOURCE_DIGEST_FAILED",
        "the source engine's count and content digest of the source query could not be computed",
        "check that the source server answers the source query again, then retry the task",
        retryable=True,
        summary="the source digest could not be read",
    ),
    ErrorCode(
        "DPONE_ARTIFACT_DIGEST_FAILED",
        "the reference content digest of the artifact could not be computed on the server",
        "check that the coordinator answers and accepts temporary tables, then retry the task",
        retryable=True,
        summary="the artifact digest could not be computed",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_TYPE_UNSUPPORTED",
        "a column type is outside the supported ClickHouse type grammar (plain type names, numeric and simple "
        "quoted arguments, nesting)",
        "declare the column with a canonical ClickHouse type such as UInt64, String or Nullable(Decimal(18, 4))",
        retryable=False,
        summary="a column type is not supported",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_MUTATION_REPLAY_REFUSED",
        "the same one-shot mutation (same query id) was about to be sent a second time by this process; it was "
        "not sent",
        "let the next task attempt resume from the authority; an ambiguous outcome is resolved by observation",
        retryable=True,
        summary="a mutation would be sent twice",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_MEMBER_ENDPOINT_UNRESOLVED",
        "a member from system.clusters has no endpoint: member_endpoints lacks its 'shard:replica' key",
        "add every member's 'shard_num:replica_num' to member_endpoints, or remove the map to use member_http_port",
        retryable=False,
        summary="a member has no endpoint",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_TRANSPORT_INSECURE",
        "the connection asks for HTTPS but the transport could not be built with HTTPS; nothing is downgraded to "
        "plain HTTP",
        "fix the TLS options (ca_cert, verify) of the connection",
        retryable=False,
        summary="HTTPS could not be set up",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_TRANSPORT_UNVERIFIED",
        "a ClickHouse connection turns TLS verification off (verify: false: no certificate chain and no host name "
        "check) and the deployment does not allow it ([dpone] allow_unverified_tls is False); no request was sent, "
        "so no credential left the worker",
        "give the connection a CA bundle that verifies the server (ca_cert) and remove verify: false; only a "
        "deployment that accepts unverified TLS sets [dpone] allow_unverified_tls = True (each use is then logged)",
        retryable=False,
        summary="TLS verification is off",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_COORDINATOR_UNREACHABLE",
        "the coordinator of the connection did not answer at all (connection refused, name not resolved, connect "
        "timeout or a transport error before any ClickHouse answer)",
        "check the connection's host, port and scheme and that the server is up and reachable from the worker; "
        "retries resume",
        retryable=True,
        summary="the coordinator did not answer",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_MEMBER_UNREACHABLE",
        "a member endpoint of the connection did not answer at all (connection refused, name not resolved, connect "
        "timeout or a transport error before any ClickHouse answer)",
        "check the member's endpoint (its member_endpoints entry, or member_http_port and its host in "
        "system.clusters) and that the member is up and reachable from the worker; retries resume",
        retryable=True,
        summary="a member endpoint did not answer",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_MEMBER_IDENTITY_MISMATCH",
        "a member endpoint answered, but as another server: the position it reports as its own in system.clusters "
        "(is_local) is not the shard and replica the coordinator lists it at",
        "point that member's member_endpoints entry (or member_http_port) at the server the coordinator's "
        "system.clusters names for that shard:replica; a retry cannot help",
        retryable=False,
        summary="a member answered as another",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_AUTHENTICATION_FAILED",
        "ClickHouse refused the connection's credentials (Code 516 AUTHENTICATION_FAILED: wrong password, or no "
        "such user on that server)",
        "fix the login and password of the Airflow connection (the same credentials must be valid on every member); "
        "a retry cannot help",
        retryable=False,
        summary="credentials refused",
    ),
    ErrorCode(
        "DPONE_EXAMPLE_SETUP_REFUSED",
        "ClickHouse refused a statement of an example DAG's demo setup (its database, KeeperMap authority table or "
        "demo source)",
        "check that the connection points at the cluster the example names and that its user may create databases "
        "and tables (the embedded cluster's user can; see docs/getting-started.md), then clear the task",
        retryable=False,
        summary="the demo setup was refused",
    ),
    ErrorCode(
        "DPONE_CLICKHOUSE_MEMBER_ENDPOINT_EXTRA",
        "member_endpoints names a 'shard:replica' that system.clusters does not list for the cluster",
        "remove the entry, or fix the cluster's remote_servers; every key must be a member of the cluster",
        retryable=False,
        summary="an endpoint is not a member",
    ),
    ErrorCode(
        "DPONE_ARTIFACT_STORE_WORKER_LOCAL",
        "[dpone] artifact_base is not set, so sealed artifacts would go to a directory of this worker "
        "(file://$AIRFLOW_HOME/dpone/artifacts), and the deployment does not declare a single worker: a retry on "
        "another worker could not reopen them; nothing was written",
        "set [dpone] artifact_base to storage every worker reaches (s3://conn_id@bucket/prefix, gs://..., or a file:// "
        "path on a mount all workers share); on a one-worker deployment set [dpone] single_worker = True instead",
        retryable=False,
        summary="artifacts are local to this worker",
    ),
    ErrorCode(
        "DPONE_ARTIFACT_STORE_URL_INVALID",
        "[dpone] artifact_base names a scheme no installed filesystem serves (a typo such as s4://, or the provider "
        "that registers the scheme is not installed); nothing was written",
        "fix the URL's scheme, or install the provider of the store (apache-airflow-providers-amazon for s3://, "
        "apache-airflow-providers-google for gs://) on every worker",
        retryable=False,
        summary="no filesystem for artifact_base",
    ),
    ErrorCode(
        "DPONE_ARTIFACT_STORE_NOT_SHARED",
        "the bound artifact is absent from this worker's file:// artifact store ([dpone] artifact_base): the path is "
        "not shared with the worker that sealed it (or the object was deleted)",
        "a retry that runs where the artifact was sealed resumes; otherwise abort the operation and point "
        "[dpone] artifact_base at storage every worker reaches (s3://, gs://, a shared mount)",
        retryable=True,
        summary="the artifact store is not shared",
    ),
)
