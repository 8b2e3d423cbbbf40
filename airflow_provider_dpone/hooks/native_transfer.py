"""Connections of the native transfer route: the ClickHouse source, the SQL Server or PostgreSQL target, the stage.

The hook reads Airflow connections and builds the adapters the route drives; it holds no route state. Secrets stay in
memory (the clients and connection factories close over them) and never reach logs, XCom or the journal.

* Source: a ``dpone_clickhouse`` (or the official ``clickhouse``) connection, read directly over HTTP(S) with no client
  retry, no redirects, bounded timeouts and every request pinned to one server by a ClickHouse HTTP session
  (``transfer/source/session.http_connector``). The transport
  options come from the connection's extra, parsed by :class:`DponeClickHouseHook`. (The ClickHouse client factory
  lives here until the publication hook exposes one the route can share.)
* Target: ``mssql`` through the Microsoft SQL Server provider's ``MsSqlHook`` (pymssql; BCP or SqlClient batches as
  ``execution.import_backend`` says), or ``postgres`` through psycopg with a DSN built from the connection.
* Stage and journal: one ``ObjectStoragePath`` base (``s3://...`` in production). Default: ``[dpone]
  native_transfer_base`` from the Airflow config, else ``file://`` under the worker's temp directory, which only
  survives retries that run on the same worker.
"""

from __future__ import annotations

import tempfile
from typing import Any, Final

from airflow.sdk import BaseHook

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer import MssqlSink, NativeTransferManifest, PostgresSink
from airflow_provider_dpone.hooks.clickhouse import CONNECTION_TYPES, DponeClickHouseHook
from airflow_provider_dpone.transfer.ports import TransferTarget
from airflow_provider_dpone.transfer.source.session import (
    ClickHouseSnapshotConnector,
    http_connector,
    source_transport_options,
)
from airflow_provider_dpone.transfer.values.target import TargetTable

DEFAULT_BASE_DIR: Final = "dpone-native-transfer"
_POSTGRES_EXTRAS: Final = frozenset(
    {"sslmode", "sslrootcert", "sslcert", "sslkey", "sslcrl", "target_session_attrs", "connect_timeout"}
)


def stage_base(configured: str | None = None) -> str:
    """The stage/journal base URL: the operator's argument, the Airflow config, or a worker-local directory."""
    if configured:
        return configured.rstrip("/")
    from airflow.configuration import conf

    from_config = conf.get("dpone", "native_transfer_base", fallback=None)
    if from_config:
        return str(from_config).rstrip("/")
    return f"file://{tempfile.gettempdir()}/{DEFAULT_BASE_DIR}"


class DponeNativeTransferHook(BaseHook):
    """Build the route's source connector and target adapter from the manifest's connection ids."""

    hook_name = "dpone native transfer"

    def __init__(self, manifest: NativeTransferManifest, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.manifest = manifest

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
        if not conn.host:
            raise DponeError("DPONE_CONNECTION_INVALID", f"connection {conn_id}: host is empty")
        options = source_transport_options(conn.host, DponeClickHouseHook.parse_options(conn.extra))
        port = int(conn.port) if conn.port else (8443 if options.secure else 8123)
        return http_connector(conn.host, port, conn.login or "default", conn.password or "", options)

    # -- target --------------------------------------------------------------------------------------------------
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
        if not conn.host:
            raise DponeError("DPONE_CONNECTION_INVALID", f"connection {sink.connection_id}: host is empty")
        extras = {key: str(value) for key, value in (conn.extra_dejson or {}).items() if key in _POSTGRES_EXTRAS}
        return make_conninfo(
            host=conn.host,
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
