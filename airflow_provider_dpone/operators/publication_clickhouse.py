"""The default :class:`PublicationEnvironment`: the real ClickHouse adapters built through the hook.

The hook resolves the ``dpone_clickhouse`` connection once (secrets in memory) and composes the port set (authority
and cluster DDL on the coordinator, catalog, direct member sessions, the content-addressed artifact store). This
module adds what only the Airflow surface knows: the target's typed definition and the extraction for a request.

The typed columns come from the source query's result description (``DESCRIBE`` of the query as a subquery, a
metadata-only request: no row is read), normalized to ClickHouse's canonical spelling and combined with the
manifest's engine and sorting key. The extraction then streams exactly those columns; the protocol refuses an
artifact whose schema differs, before any member is touched.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.manifest import ArtifactSource as ArtifactManifestSource
from airflow_provider_dpone.contracts.manifest import ClusterPublicationManifest
from airflow_provider_dpone.operators.publication_environment import PublicationEnvironment
from airflow_provider_dpone.operators.publication_inputs import declared_table
from airflow_provider_dpone.ports.publication import ArtifactSource, TableSpec
from airflow_provider_dpone.protocol.context import ProtocolSettings
from airflow_provider_dpone.protocol.request import PublicationRequest


def describe_query(endpoint: Any, query: str) -> tuple[tuple[str, str], ...]:
    """The ``(name, type)`` pairs of the query's result, in canonical spelling; reads no row."""
    from airflow_provider_dpone.adapters.clickhouse.types import canonical_columns

    try:
        rows = endpoint.reader().query(f"DESCRIBE TABLE ({query})").result_rows
    except Exception as error:  # noqa: BLE001 -- any failure to describe is an extraction failure, type only
        raise DponeError("DPONE_ARTIFACT_EXTRACTION_FAILED", f"describe: {type(error).__name__}") from None
    return canonical_columns(tuple((str(row[0]), str(row[1])) for row in rows))


def configured_ddl_task_timeout_seconds() -> int:
    """``[dpone] ddl_task_timeout_seconds``: how long the initiator of a non-deferrable publication/cleanup DDL waits
    for the hosts.

    After that the dispatching task returns "in progress" and polls in the worker. The entry keeps running on the
    hosts either way. A deferrable task does not wait this long: it passes its own short bound.
    """
    from airflow.sdk import conf

    from airflow_provider_dpone.adapters.clickhouse.sql_cluster_ddl import DEFAULT_TASK_TIMEOUT_SECONDS

    return conf.getint("dpone", "ddl_task_timeout_seconds", fallback=DEFAULT_TASK_TIMEOUT_SECONDS)


def protocol_settings() -> ProtocolSettings:
    """``[dpone] replica_sync_timeout_seconds``: the bound of one replica's convergence wait in internal mode (a
    replica still behind fails the stage try retryably and the retry waits again). Other settings: the defaults."""
    from airflow.sdk import conf

    default = ProtocolSettings().replica_sync_timeout_seconds
    return ProtocolSettings(
        replica_sync_timeout_seconds=conf.getfloat("dpone", "replica_sync_timeout_seconds", fallback=default)
    )


def hook_environment(
    manifest: ClusterPublicationManifest, conn_id: str, *, ddl_task_timeout_seconds: int | None = None
) -> PublicationEnvironment:
    """Real adapters for the coordinator connection ``conn_id`` (closed when the task try ends).

    ``ddl_task_timeout_seconds`` bounds the initiator's wait for the hosts (``None``: the configured one).

    The connection is resolved by the hook; the adapter set is composed with a mutation guard of this task try.
    The guard refuses to send any one-shot mutation twice; a task try is one worker process in production, and a
    guard per try keeps exactly that scope where several tries share a process (``dag.test()``, in-process
    executors): a later try may re-send a statement the server *refused*, which the protocol decides by observation.
    """
    from airflow_provider_dpone.adapters.clickhouse.adapter_set import adapters_for
    from airflow_provider_dpone.adapters.clickhouse.endpoint import Endpoint
    from airflow_provider_dpone.adapters.clickhouse.oneshot import MutationGuard
    from airflow_provider_dpone.adapters.storage.artifact_store import ObjectStorageArtifactStore
    from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook, default_artifact_base

    if isinstance(manifest.source, ArtifactManifestSource):
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_SOURCE_UNSUPPORTED", "source.type artifact")
    hook = DponeClickHouseHook(dpone_clickhouse_conn_id=conn_id)
    wait = configured_ddl_task_timeout_seconds() if ddl_task_timeout_seconds is None else ddl_task_timeout_seconds
    adapters = adapters_for(
        hook.resolved(),
        database=manifest.sink.database,
        store=ObjectStorageArtifactStore(default_artifact_base()),
        guard=MutationGuard(),
        ddl_task_timeout_seconds=wait,
    )
    query = manifest.source.query
    source_conn_id = manifest.source.connection_id
    endpoints: list[Any] = []
    if source_conn_id == conn_id:
        source_endpoint = adapters.coordinator
    else:
        source_endpoint = Endpoint.of(DponeClickHouseHook(dpone_clickhouse_conn_id=source_conn_id).resolved())
        endpoints.append(source_endpoint)
    resolved: list[TableSpec] = []

    def table() -> TableSpec:
        if not resolved:
            resolved.append(declared_table(manifest, describe_query(source_endpoint, query)))
        return resolved[0]

    def source(request: PublicationRequest) -> ArtifactSource:
        artifact_source: ArtifactSource = adapters.query_source(
            query=query,
            columns=request.table.schema_pairs,
            max_source_bytes=request.max_source_bytes,
            source=source_endpoint,
        )
        return artifact_source

    def close() -> None:
        try:
            for endpoint in endpoints:
                endpoint.close()
        finally:
            adapters.close()

    return PublicationEnvironment(
        ports=adapters.ports, table=table, source=source, settings=protocol_settings(), close=close
    )
