"""``DponeClickHouseHook``: the ``dpone_clickhouse`` connection type.

The hook resolves one Airflow connection (types ``dpone_clickhouse`` and ``clickhouse``) into an in-memory
:class:`ResolvedConnection`, and builds from it: the coordinator's read client, one-shot mutation clients, the async
client of deferrable pollers and the distributed DDL queue read they poll with (:meth:`DponeClickHouseHook.aqueue_entries`),
member sessions, the adapter set of the publication service, and the whole environment of one publication task try
(:meth:`DponeClickHouseHook.publication_environment`).
It holds no protocol state and makes no protocol decision: what to read, write or publish is the protocol's.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import replace
from typing import Any, ClassVar

from airflow.providers.common.sql.hooks.sql import DbApiHook
from airflow.sdk import BaseHook
from pydantic import ValidationError

from airflow_provider_dpone.cluster.clickhouse.adapter_set import PublicationAdapters, adapters_for
from airflow_provider_dpone.cluster.clickhouse.artifact_source import EXTRACTION_SECONDS, extraction_settings
from airflow_provider_dpone.cluster.clickhouse.artifact_store import ObjectStorageArtifactStore
from airflow_provider_dpone.cluster.clickhouse.endpoint import Endpoint
from airflow_provider_dpone.cluster.clickhouse.oneshot import PROCESS_GUARD, MutationGuard
from airflow_provider_dpone.cluster.clickhouse.sql_cluster_ddl import (
    DEFAULT_TASK_TIMEOUT_SECONDS,
    queue_entries,
    queue_entry,
)
from airflow_provider_dpone.cluster.ports import ArtifactSource, QueueEntry
from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
from airflow_provider_dpone.core.clickhouse.clients import Purpose, build_async_client, build_client
from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection
from airflow_provider_dpone.core.connection_options import (
    ClickHouseConnectionOptions,
    bare_host,
    tls_relaxation,
    unique_keys,
)
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest import ClusterPublicationManifest, SealedArtifactSource
from airflow_provider_dpone.core.storage import require_store_url
from airflow_provider_dpone.hooks.publication import (
    PublicationEnvironment,
    configured_ddl_task_timeout_seconds,
    protocol_settings,
)
from airflow_provider_dpone.provider_info import UI_FIELD_BEHAVIOUR

log = logging.getLogger(__name__)

CONNECTION_TYPES = ("dpone_clickhouse", "clickhouse")
"""Accepted connection types: ours, and the official ClickHouse provider's (same fields, no dpone extras)."""


class DponeClickHouseHook(DbApiHook):
    """Resolve a ClickHouse cluster connection (coordinator endpoint, credentials, transport options).

    It is a common-sql ``DbApiHook``: ``SQLExecuteQueryOperator``, ``get_records`` and the other common-sql tools run
    ad-hoc SQL on the coordinator of the same connection (:meth:`get_conn`). Keyword arguments common-sql passes from
    the connection's extra are ignored: the options are always parsed from the connection itself, strictly.
    """

    conn_name_attr = "dpone_clickhouse_conn_id"
    default_conn_name = "dpone_clickhouse_default"
    conn_type = "dpone_clickhouse"
    hook_name = "dpone ClickHouse cluster"
    _EXTRA_PREFIX: ClassVar[str] = "extra__dpone_clickhouse__"

    def __init__(self, dpone_clickhouse_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(dpone_clickhouse_conn_id=dpone_clickhouse_conn_id, **kwargs)
        self.dpone_clickhouse_conn_id = dpone_clickhouse_conn_id
        self._async_client: Any = None

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Connection form behaviour in the hook-method form; the same data provider info declares."""
        return {
            "hidden_fields": list(UI_FIELD_BEHAVIOUR["hidden-fields"]),
            "relabeling": dict(UI_FIELD_BEHAVIOUR["relabeling"]),
            "placeholders": dict(UI_FIELD_BEHAVIOUR["placeholders"]),
        }

    @classmethod
    def parse_options(cls, extra: str | dict[str, Any] | None) -> ClickHouseConnectionOptions:
        """Parse a connection's extra into options; unknown keys and wrong types fail with a stable code."""
        raw: Any = extra or {}
        if isinstance(raw, str):
            try:
                raw = json.loads(raw, object_pairs_hook=unique_keys) if raw.strip() else {}
            except ValueError:  # not JSON, or a key given twice
                raise DponeError("DPONE_CONNECTION_INVALID", "extra is not JSON without repeated keys") from None
        if not isinstance(raw, dict):
            raise DponeError("DPONE_CONNECTION_INVALID", "extra is not a JSON object")
        cleaned = {key.removeprefix(cls._EXTRA_PREFIX): value for key, value in raw.items() if value is not None}
        try:
            return ClickHouseConnectionOptions.model_validate(cleaned)
        except ValidationError as exc:
            fields = sorted({".".join(str(p) for p in err["loc"]) for err in exc.errors()})
            raise DponeError("DPONE_CONNECTION_INVALID", "fields: " + ", ".join(fields)) from None

    # --- resolution -------------------------------------------------------------------------------------------

    @classmethod
    def resolve(cls, connection: Any) -> ResolvedConnection:
        """An Airflow connection (``dpone_clickhouse`` or ``clickhouse``) as an in-memory resolved connection.

        The ``clickhouse`` type belongs to another provider: only the keys dpone defines are read from its extra.
        The port defaults to 8443 with ``secure`` and 8123 without; the database is the connection's schema. A host
        holding user info is refused, and so is ``verify: false`` unless the deployment allows it
        (:func:`admit_tls_relaxation`): both before any request.
        """
        conn_type = (getattr(connection, "conn_type", None) or "").replace("-", "_")
        if conn_type not in CONNECTION_TYPES:
            raise DponeError("DPONE_CONNECTION_INVALID", "conn_type must be dpone_clickhouse or clickhouse")
        extra = connection.extra_dejson if conn_type == "clickhouse" else connection.extra
        if conn_type == "clickhouse":
            known = set(ClickHouseConnectionOptions.model_fields)
            extra = {k: v for k, v in (extra or {}).items() if k.removeprefix(cls._EXTRA_PREFIX) in known}
        options = cls.parse_options(extra)
        conn_id = str(getattr(connection, "conn_id", None) or "(unnamed)")
        host = bare_host(connection.host, conn_id)
        return ResolvedConnection(
            host=host,
            port=int(connection.port or (8443 if options.secure else 8123)),
            username=connection.login or "default",
            password=connection.password or "",
            database=connection.schema or "",
            options=options,
            unverified_tls_allowed=admit_tls_relaxation(options, conn_id),
        )

    def resolved(self) -> ResolvedConnection:
        """The coordinator connection (secrets stay in memory; nothing is logged)."""
        return self.resolve(self.get_connection(self.dpone_clickhouse_conn_id))

    async def aresolved(self) -> ResolvedConnection:
        """The same resolution through the SDK's async connection lookup (for triggers)."""
        return self.resolve(await BaseHook.aget_connection(self.dpone_clickhouse_conn_id))

    def test_connection(self) -> tuple[bool, str]:  # type: ignore[override]  # DbApiHook leaves it unannotated
        """The UI's Test button: parse the extra strictly, then check the coordinator, every member (reachable,
        authenticated, the member it claims to be) and, with ``authority_database``, the authority table's
        preconditions (:mod:`~airflow_provider_dpone.cluster.clickhouse.connection_check`).

        Where ``[dpone] native_transfer_base`` is set, its store must refuse a second write of one probe object
        (:func:`~airflow_provider_dpone.hooks.stage_store.require_create_once`, as every transfer task start does).

        Returns ``(False, lines)`` with one coded line per failure, never raises; the lines never name a host.
        """
        from airflow_provider_dpone.cluster.clickhouse.connection_check import check_connection
        from airflow_provider_dpone.hooks.stage_store import configured_stage_store_failure

        store_failure = configured_stage_store_failure()
        failures = [] if store_failure is None else [store_failure]
        try:
            result = check_connection(self.resolved())
        except DponeError as error:
            return False, "\n".join([error.render(), *failures])
        except Exception as error:  # noqa: BLE001 -- the Test button answers, it never raises
            return False, "\n".join([f"the connection check failed unexpectedly ({type(error).__name__})", *failures])
        if not result.ok or failures:
            return False, "\n".join([*result.failures, *failures])
        return True, f"checked {result.checked}: every check passed"

    # --- clients ----------------------------------------------------------------------------------------------

    def get_conn(self) -> Any:
        """common-sql's accessor: a DB-API connection to the coordinator over a one-shot client (a user's statement is
        sent at most once); the database is the operator's ``database`` when given, else the connection's schema."""
        from airflow_provider_dpone.cluster.clickhouse.dbapi import DbApiConnection

        resolved = self.resolved()
        database = getattr(self, "schema", None)  # set by common-sql operators from their ``database`` argument
        if database:
            resolved = replace(resolved, database=database)
        return DbApiConnection(build_client(resolved, Purpose.MUTATION))

    def coordinator_client(self) -> Any:
        """A read client of the coordinator (close it with ``close_client``)."""
        return build_client(self.resolved(), Purpose.READ)

    async def async_coordinator_client(self) -> Any:
        """An async read client of the coordinator for deferrable pollers."""
        return await build_async_client(await self.aresolved())

    async def aqueue_entries(
        self, cluster: str, correlation_token: str, entry: str | None = None
    ) -> tuple[QueueEntry, ...]:
        """The ``system.distributed_ddl_queue`` entries of ``cluster`` whose query carries ``correlation_token`` (only
        ``entry`` once its name is known), parsed as the sync adapter parses them. Read-only; the async client is built
        at the first call and kept for the next ones until :meth:`aclose`."""
        if self._async_client is None:
            self._async_client = await self.async_coordinator_client()
        result = await self._async_client.query(queue_entry(cluster, correlation_token))
        return queue_entries(result.result_rows, entry=entry)

    async def aclose(self) -> None:
        """Close the async client :meth:`aqueue_entries` built (nothing to do when none was)."""
        client, self._async_client = self._async_client, None
        if client is not None:
            await client.close()

    # --- composition ------------------------------------------------------------------------------------------

    def publication_adapters(
        self,
        *,
        database: str,
        artifact_base: str | None = None,
        ddl_task_timeout_seconds: int = DEFAULT_TASK_TIMEOUT_SECONDS,
        guard: MutationGuard = PROCESS_GUARD,
        connection: ResolvedConnection | None = None,
    ) -> PublicationAdapters:
        """The adapter set of the publication service for the target ``database`` (close it after use); ``guard``
        refuses to send any one-shot mutation twice (default: one guard for the whole process). ``connection``: the
        coordinator connection already resolved by the caller (default: looked up now)."""
        store = ObjectStorageArtifactStore(artifact_base or default_artifact_base())
        return adapters_for(
            connection or self.resolved(),
            database=database,
            store=store,
            guard=guard,
            ddl_task_timeout_seconds=ddl_task_timeout_seconds,
        )

    def publication_environment(
        self, manifest: ClusterPublicationManifest, *, ddl_task_timeout_seconds: int | None = None
    ) -> PublicationEnvironment:
        """Everything one task try of ``manifest``'s full refresh drives, over this coordinator connection (call the
        environment's ``close`` when the try ends).

        ``ddl_task_timeout_seconds`` bounds the initiator's wait for the hosts (``None``: the configured one). The
        adapter set gets a mutation guard of this task try: it refuses to send any one-shot mutation twice. A try is
        one worker process in production, and a guard per try keeps exactly that scope where several tries share a
        process (``dag.test()``, in-process executors): a later try may re-send a statement the server *refused*,
        which the protocol decides by observation.

        The source's typed columns come from the source query's result description (``DESCRIBE`` of the query as a
        subquery, metadata only: no row is read) in ClickHouse's canonical spelling; the candidates get them with the
        manifest's engine and sorting key. The extraction streams exactly the columns it is given; the protocol refuses an artifact whose schema
        differs, before any member is touched.
        """
        if isinstance(manifest.source, SealedArtifactSource):
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_SOURCE_UNSUPPORTED", "source.type artifact")
        wait = configured_ddl_task_timeout_seconds() if ddl_task_timeout_seconds is None else ddl_task_timeout_seconds
        coordinator = self.resolved()  # one connection lookup per task try (each is a round trip to Airflow)
        adapters = self.publication_adapters(
            database=manifest.sink.database,
            ddl_task_timeout_seconds=wait,
            guard=MutationGuard(),
            connection=coordinator,
        )
        query = manifest.source.query
        seconds = configured_extraction_timeout_seconds()
        source_conn_id = manifest.source.connection_id
        endpoints: list[Any] = []
        if source_conn_id == self.dpone_clickhouse_conn_id:
            source_endpoint = adapters.coordinator
        else:
            source_endpoint = Endpoint.of(DponeClickHouseHook(dpone_clickhouse_conn_id=source_conn_id).resolved())
            endpoints.append(source_endpoint)
        described: list[tuple[tuple[str, str], ...]] = []

        def columns() -> tuple[tuple[str, str], ...]:
            if not described:
                described.append(describe_query(source_endpoint, query, seconds))
            return described[0]

        def source(request: PublicationRequest, columns: tuple[tuple[str, str], ...]) -> ArtifactSource:
            artifact_source: ArtifactSource = adapters.query_source(
                query=query,
                columns=columns,
                max_source_bytes=request.max_source_bytes,
                source=source_endpoint,
                max_execution_seconds=seconds,
            )
            return artifact_source

        def close() -> None:
            try:
                for endpoint in endpoints:
                    endpoint.close()
            finally:
                adapters.close()

        return PublicationEnvironment(
            ports=adapters.ports,
            columns=columns,
            source=source,
            settings=protocol_settings(coordinator.options),
            close=close,
            member_connections=coordinator.for_member,
        )


def hook_environment(
    manifest: ClusterPublicationManifest, conn_id: str, *, ddl_task_timeout_seconds: int | None = None
) -> PublicationEnvironment:
    """The default :class:`~airflow_provider_dpone.hooks.publication.PortsFactory`: the hook of the coordinator
    connection ``conn_id`` builds the real ClickHouse adapters. The operators import it when a task runs, never when
    a DAG file is parsed."""
    hook = DponeClickHouseHook(dpone_clickhouse_conn_id=conn_id)
    return hook.publication_environment(manifest, ddl_task_timeout_seconds=ddl_task_timeout_seconds)


def admit_tls_relaxation(options: ClickHouseConnectionOptions, conn_id: str) -> bool:
    """Whether connection ``conn_id`` may relax TLS: ``False`` when it does not; when it does (``verify: false``),
    ``[dpone] allow_unverified_tls`` decides: refused with ``DPONE_CLICKHOUSE_TRANSPORT_UNVERIFIED`` (the default),
    or allowed with a WARNING line naming the connection at every resolution."""
    relaxed = tls_relaxation(options)
    if relaxed is None:
        return False
    if not allow_unverified_tls():
        raise DponeError(
            "DPONE_CLICKHOUSE_TRANSPORT_UNVERIFIED", f"connection {conn_id}: {relaxed}; [dpone] allow_unverified_tls"
        )
    log.warning(
        "connection %s: TLS is not verified, %s; allowed by [dpone] allow_unverified_tls = True", conn_id, relaxed
    )
    return True


def configured_extraction_timeout_seconds() -> int:
    """``[dpone] extraction_timeout_seconds``: the server-side bound of each read of a source query."""
    from airflow.configuration import conf

    return conf.getint("dpone", "extraction_timeout_seconds", fallback=EXTRACTION_SECONDS)


def allow_unverified_tls() -> bool:
    """``[dpone] allow_unverified_tls`` (env ``AIRFLOW__DPONE__ALLOW_UNVERIFIED_TLS``), ``False`` when unset."""
    from airflow.configuration import conf

    return conf.getboolean("dpone", "allow_unverified_tls", fallback=False)


def describe_query(endpoint: Any, query: str, seconds: int = EXTRACTION_SECONDS) -> tuple[tuple[str, str], ...]:
    """The ``(name, type)`` pairs of the query's result, in canonical spelling; reads no row, read-only like the
    extraction itself."""
    from airflow_provider_dpone.cluster.clickhouse.column_types import canonical_columns

    try:
        rows = endpoint.reader().query(f"DESCRIBE TABLE ({query})", settings=extraction_settings(seconds)).result_rows
    except Exception as error:  # noqa: BLE001 -- any failure to describe is an extraction failure, type only
        raise DponeError("DPONE_ARTIFACT_EXTRACTION_FAILED", f"describe: {type(error).__name__}") from None
    return canonical_columns(tuple((str(row[0]), str(row[1])) for row in rows))


def default_artifact_base() -> str:
    """``[dpone] artifact_base`` (env ``AIRFLOW__DPONE__ARTIFACT_BASE``); unset, ``file://$AIRFLOW_HOME/dpone/artifacts``
    only where the deployment declares one worker (``[dpone] single_worker = True``: LocalExecutor, ``dag.test()``,
    the demo), else ``DPONE_ARTIFACT_STORE_WORKER_LOCAL`` before the task touches anything.

    The artifact must be reopenable by whichever worker runs a later attempt: production points ``artifact_base`` at
    object storage every worker reaches (``s3://aws_conn@bucket/prefix``, ``gs://...``) or at a file:// path on a
    mount they all share; a file:// store that lacks a bound artifact says so (``DPONE_ARTIFACT_STORE_NOT_SHARED``).
    """
    from airflow.configuration import conf

    configured = conf.get("dpone", "artifact_base", fallback=None)
    if configured:
        return require_store_url(str(configured), "DPONE_ARTIFACT_STORE_URL_INVALID")
    if not conf.getboolean("dpone", "single_worker", fallback=False):
        raise DponeError(
            "DPONE_ARTIFACT_STORE_WORKER_LOCAL", "[dpone] artifact_base unset, [dpone] single_worker false"
        )
    home = os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")
    return f"file://{os.path.abspath(home)}/dpone/artifacts"
