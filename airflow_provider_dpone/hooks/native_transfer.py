"""Connections of the native transfer route and the composition of one task try: source, target, stage, journal.

The hook reads Airflow connections and builds the adapters the route drives, and the route itself over them
(:meth:`DponeNativeTransferHook.route`, as the publication hook builds a publication task try's environment); it holds
no route state. An operation's ids (:class:`OperationIdentity`) come from the DAG id, the run id, the target table and
the normalized plan, never from the try number. Secrets stay in
memory (the clients and connection factories close over them) and never reach logs, XCom or the journal.

* Source: a ``dpone_clickhouse`` (or the official ``clickhouse``) connection, read directly over HTTP(S) through the
  one ClickHouse client factory (no client retry, no redirects, bounded timeouts) with every request pinned to one
  server by a ClickHouse HTTP session (``transfer/source/session.http_connector``). The transport options come from
  the connection's extra, parsed by :class:`DponeClickHouseHook`.
* Target: ``mssql`` through the Microsoft SQL Server provider's ``MsSqlHook`` (pymssql; BCP or SqlClient batches as
  ``execution.import_backend`` says), or ``postgres`` through psycopg with a DSN built from the connection.
* Stage and journal: one ``ObjectStoragePath`` base (``s3://...`` in production). Default: ``[dpone]
  native_transfer_base`` from the Airflow config, else, where ``[dpone] single_worker`` declares one machine,
  ``file://`` under the worker's temp directory; without either the task is refused before it starts.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, Final

from airflow.sdk import BaseHook

from airflow_provider_dpone.core.clock import SystemClock
from airflow_provider_dpone.core.connection_options import bare_host
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest import normalized_plan_digest
from airflow_provider_dpone.core.manifest.transfer import MssqlSink, NativeTransferManifest, PostgresSink
from airflow_provider_dpone.core.progress import ProgressSink
from airflow_provider_dpone.hooks.alerts import count_alert
from airflow_provider_dpone.hooks.clickhouse import CONNECTION_TYPES, DponeClickHouseHook
from airflow_provider_dpone.transfer.ports import JournalStore, SnapshotSourceConnector, TransferTarget
from airflow_provider_dpone.transfer.route.admission import SourceRequest
from airflow_provider_dpone.transfer.route.route import NativeTransferRoute
from airflow_provider_dpone.transfer.route.target_custody import TargetCustody, transfer_target_key
from airflow_provider_dpone.transfer.source.session import (
    ClickHouseSnapshotConnector,
    http_connector,
    source_transport_options,
)
from airflow_provider_dpone.transfer.storage import ObjectJournalStore, ObjectStageStore
from airflow_provider_dpone.transfer.values.chunk import RelationRef, transfer_operation_id
from airflow_provider_dpone.transfer.values.progress import OnCheckpoint
from airflow_provider_dpone.transfer.values.row_digest import RowDigest
from airflow_provider_dpone.transfer.values.target import TargetTable
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow

_POSTGRES_EXTRAS: Final = frozenset(
    {"sslmode", "sslrootcert", "sslcert", "sslkey", "sslcrl", "target_session_attrs", "connect_timeout"}
)


class OperationIdentity:
    """The deterministic ids of one operation of a DAG run."""

    def __init__(self, manifest: NativeTransferManifest, dag_id: str, run_id: str) -> None:
        sink = manifest.sink
        self.plan_digest = normalized_plan_digest(manifest)
        self.target_key = transfer_target_key(sink.type, sink.connection_id, sink.target_schema, sink.table)
        self.operation_id = transfer_operation_id(dag_id, run_id, self.target_key, self.plan_digest)


class DponeNativeTransferHook(BaseHook):
    """Build the route's source connector, target adapter, stage and journal from the manifest's connection ids."""

    hook_name = "dpone native transfer"

    def __init__(self, manifest: NativeTransferManifest, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.manifest = manifest

    # -- composition ---------------------------------------------------------------------------------------------
    def route(
        self,
        identity: OperationIdentity,
        base: str,
        *,
        lease: dt.timedelta,
        checkpoint: OnCheckpoint | None = None,
        connector: SnapshotSourceConnector | None = None,
        target: Callable[[], TransferTarget] | None = None,
        progress: ProgressSink | None = None,
    ) -> tuple[NativeTransferRoute, JournalStore]:
        """The route of one task try of ``identity``'s operation under the stage/journal ``base``, and its journal.

        The operation's journal and stage live under ``base``; the target table's custody under ``base/targets``, so
        two operations never work on one target table at once. ``connector`` and ``target`` replace the manifest's
        connections (default: :meth:`source_connector`, :meth:`target`; the target is built when the route needs
        it). ``progress`` receives the route's progress facts (the operator's task log).
        """
        clock = SystemClock()
        journal = ObjectJournalStore(base, identity.operation_id)
        custody = TargetCustody(
            ObjectJournalStore(f"{base}/targets", identity.target_key),
            identity.operation_id,
            clock,
            lease,
            lambda operation: ObjectJournalStore(base, operation),
            alerts=count_alert,
            target_key=identity.target_key,
        )
        build_target = self.target if target is None else target
        route = NativeTransferRoute(
            self.source_request(identity),
            connector=self.source_connector() if connector is None else connector,
            journal_store=journal,
            stage=ObjectStageStore(base, identity.operation_id),
            target_factory=build_target,
            clock=clock,
            lease_duration=lease,
            target_custody=custody,
            alerts=count_alert,
            progress=progress,
            checkpoint=checkpoint,
        )
        return route, journal

    def source_request(self, identity: OperationIdentity) -> SourceRequest:
        """What the route reads: the manifest's relation and window, under the operation's ids."""
        manifest = self.manifest
        window = manifest.load.window
        return SourceRequest(
            operation_id=identity.operation_id,
            route_fingerprint=identity.plan_digest,
            relation=RelationRef(database=manifest.source.database, table=manifest.source.table),
            window=None if window is None else UtcWindow.of(window.column, window.start, window.end),
            options=manifest.source.options.native_transfer,
            # PostgreSQL hashes rows as its own output functions render them; SQL Server computes the typed digest
            row_digest=RowDigest.PG_RECORD_SHA256
            if isinstance(manifest.sink, PostgresSink)
            else RowDigest.TYPED_SHA256,
        )

    # -- source --------------------------------------------------------------------------------------------------
    def source_connector(self) -> ClickHouseSnapshotConnector:
        """The source, resolved from Airflow at its first connect: a source-free recovery never reads it."""
        return ClickHouseSnapshotConnector.deferred(self._resolve_source)

    def _resolve_source(self) -> ClickHouseSnapshotConnector:
        conn_id = self.manifest.source.connection_id
        conn = self.get_connection(conn_id)
        if conn.conn_type not in CONNECTION_TYPES:
            raise DponeError(
                "DPONE_CONNECTION_INVALID", f"connection {conn_id}: type must be one of {CONNECTION_TYPES}"
            )
        host = bare_host(conn.host, conn_id)
        options = source_transport_options(host, DponeClickHouseHook.parse_options(conn.extra))
        port = int(conn.port) if conn.port else (8443 if options.secure else 8123)
        return http_connector(host, port, conn.login or "default", conn.password or "", options)

    # -- target --------------------------------------------------------------------------------------------------
    def require_target_connection(self) -> None:
        """Refuse at once, before any source I/O, when the sink's Airflow connection is not defined or its host holds
        more than a host (user info, a scheme, a path): both terminal."""
        from airflow.sdk.exceptions import AirflowNotFoundException

        conn_id = self.manifest.sink.connection_id
        try:
            conn = self.get_connection(conn_id)
        except AirflowNotFoundException:
            raise DponeError(
                "DPONE_CONNECTION_UNDEFINED", f"connection {conn_id} ({self.manifest.sink.type})"
            ) from None
        if conn.host:  # the target's own hook reports an empty one
            bare_host(conn.host, conn_id)

    def target(self) -> TransferTarget:
        """The target adapter bound to the sink's table."""
        sink = self.manifest.sink
        table = TargetTable(
            target_schema=sink.target_schema, table=sink.table, string_mapping=sink.options.string_mapping
        )
        if isinstance(sink, MssqlSink):
            return self._mssql_target(sink, table)
        return self._postgres_target(sink, table)

    def _mssql_target(self, sink: MssqlSink, table: TargetTable) -> TransferTarget:
        from airflow_provider_dpone.transfer.targets.mssql.driver import mssql_connection_factory
        from airflow_provider_dpone.transfer.targets.mssql.target import MsSqlTransferTarget

        backend = self.manifest.source.options.native_transfer.execution.import_backend
        return MsSqlTransferTarget(mssql_connection_factory(sink.connection_id), table, import_backend=backend)

    def postgres_dsn(self, sink: PostgresSink) -> str:
        """A libpq DSN from the connection (host, port, login, password, schema = database, SSL extras)."""
        from psycopg.conninfo import make_conninfo

        conn = self.get_connection(sink.connection_id)
        host = bare_host(conn.host, sink.connection_id)
        extras = {key: str(value) for key, value in (conn.extra_dejson or {}).items() if key in _POSTGRES_EXTRAS}
        return make_conninfo(
            host=host,
            port=str(conn.port or 5432),
            user=conn.login or "",
            password=conn.password or "",
            dbname=conn.schema or "postgres",
            **extras,
        )

    def _postgres_target(self, sink: PostgresSink, table: TargetTable) -> TransferTarget:
        from airflow_provider_dpone.transfer.targets.postgres.target import (
            PostgresTransferTarget,
            postgres_connection_factory,
            postgres_copy_factory,
        )

        dsn = self.postgres_dsn(sink)
        return PostgresTransferTarget(postgres_connection_factory(dsn), postgres_copy_factory(dsn), table)
