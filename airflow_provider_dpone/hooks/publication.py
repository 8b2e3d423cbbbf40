"""The publication environment: what one task try of a full refresh needs, built by the hook.

An operator never builds clients itself. It calls its ``ports_factory`` with the manifest, the connection id and how
long the initiator of its ``ON CLUSTER`` DDL may wait for the hosts (short for a deferrable task), and receives a
:class:`PublicationEnvironment`: the protocol's ports, the description of the source's typed columns, the
extraction, the settings, and the import path of the reader its deferral trigger polls the DDL queue with. The default factory,
:func:`~airflow_provider_dpone.hooks.clickhouse.hook_environment`, is :meth:`DponeClickHouseHook.publication_environment
<airflow_provider_dpone.hooks.clickhouse.DponeClickHouseHook.publication_environment>` of the connection, as
``DbApiHook.get_conn`` builds a client; the hook imports this module, never the reverse.

Tests pass another factory (for example one over the in-memory fakes with fault injection) through the operators'
``ports_factory`` argument; nothing else changes, so the same operator code runs against fakes and real clusters.
A factory must be a plain function (or a closure): Airflow copies operators, and a copied bound method would copy
the object it is bound to. This module imports no client, so a DAG file that names the operators parses without one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from airflow_provider_dpone.cluster.ports import AcceptanceReader, ArtifactSource, DeclaredTable
from airflow_provider_dpone.cluster.protocol.context import ProtocolSettings, PublicationPorts
from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
from airflow_provider_dpone.cluster.values.inventory import AdmittedMember
from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest import ClusterPublicationManifest

if TYPE_CHECKING:
    from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection

MemberConnections = Callable[[AdmittedMember], "ResolvedConnection"]
AcceptanceReaderFactory = Callable[[MemberConnections], AcceptanceReader]
"""The keyword-only ``target_acceptance_reader`` of ``ClickHouseSink(..., durable_quality_replay=True)``, on
this provider's operators: it builds the bounded reader of one task try from the admitted sink connection (a resolver
of each member's direct connection). Default: the hook's
:class:`~airflow_provider_dpone.cluster.clickhouse.acceptance_reader.SubprocessAcceptanceReader`."""


def _nothing_to_close() -> None:
    return None


@dataclass(frozen=True)
class PublicationEnvironment:
    """Everything one task try needs to drive the protocol against one cluster.

    ``columns`` describes the source's typed columns (metadata only); ``source`` builds the extraction of a request
    with the typed columns it produces (described, or the ones the operation bound).
    """

    ports: PublicationPorts
    columns: Callable[[], tuple[tuple[str, str], ...]]
    source: Callable[[PublicationRequest, tuple[tuple[str, str], ...]], ArtifactSource]
    settings: ProtocolSettings = field(default_factory=ProtocolSettings)
    close: Callable[[], None] = _nothing_to_close
    member_connections: MemberConnections | None = None
    """The admitted sink connection of each member (what a ``target_acceptance_reader`` factory is given)."""


def with_acceptance_reader(
    environment: PublicationEnvironment, factory: AcceptanceReaderFactory
) -> PublicationEnvironment:
    """``environment`` whose target acceptance reads go through the reader ``factory`` builds."""
    if environment.member_connections is None:
        raise DponeError(
            "DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED", "this environment offers no member connections for a reader"
        )
    reader = factory(environment.member_connections)
    return replace(environment, ports=replace(environment.ports, acceptance=reader))


def with_alert_metrics(environment: PublicationEnvironment) -> PublicationEnvironment:
    """``environment`` whose protocol alerts are also counted as Airflow metrics (after the sink it has, if any)."""
    from airflow_provider_dpone.hooks.alerts import counted

    return replace(environment, ports=replace(environment.ports, alerts=counted(environment.ports.alerts)))


class PortsFactory(Protocol):
    """Builds the environment of one task try from the manifest and the ``dpone_clickhouse`` connection id.

    ``ddl_task_timeout_seconds`` bounds how long a dispatch of an ``ON CLUSTER`` DDL waits for the hosts before it
    answers "not finished" (``None``: the deployment's ``[dpone] ddl_task_timeout_seconds``).
    """

    def __call__(
        self, manifest: ClusterPublicationManifest, conn_id: str, *, ddl_task_timeout_seconds: int | None = None
    ) -> PublicationEnvironment: ...


def declared_table(manifest: ClusterPublicationManifest) -> DeclaredTable:
    """What the manifest declares of the target table: engine, partition key and sorting key (the typed columns come
    with the stage's source)."""
    storage = manifest.physical_design.storage.clickhouse
    return DeclaredTable(
        engine=storage.engine,
        order_by=tuple(storage.order_by),
        partition_by=storage.partition_by,
    )


def configured_ddl_task_timeout_seconds() -> int:
    """``[dpone] ddl_task_timeout_seconds``: how long the initiator of a non-deferrable publication/cleanup DDL waits
    for the hosts.

    After that the dispatching task returns "in progress" and polls in the worker. The entry keeps running on the
    hosts either way. A deferrable task does not wait this long: it passes its own short bound.
    """
    from airflow.sdk import conf

    from airflow_provider_dpone.cluster.clickhouse.sql_cluster_ddl import DEFAULT_TASK_TIMEOUT_SECONDS

    return conf.getint("dpone", "ddl_task_timeout_seconds", fallback=DEFAULT_TASK_TIMEOUT_SECONDS)


def protocol_settings(options: ClickHouseConnectionOptions | None = None) -> ProtocolSettings:
    """The deployment's protocol settings.

    ``[dpone] replica_sync_timeout_seconds``: the bound of one replica's convergence wait in internal mode (a replica
    still behind fails the stage try retryably and the retry waits again). ``[dpone] void_skew_margin_seconds``: the
    clock skew the void-permit proof allows between workers and the coordinator. ``[dpone]
    external_replication_admission``: the rollback switch of external mode (False refuses new external operations).
    ``options`` (the coordinator
    connection's) give the send timeout the proof counts: connect plus send/receive. Other settings: the defaults.
    """
    from airflow.sdk import conf

    default = ProtocolSettings()
    send_ms = default.send_timeout_ms
    if options is not None:
        send_ms = (options.connect_timeout_seconds + options.send_receive_timeout_seconds) * 1000
    skew = conf.getint("dpone", "void_skew_margin_seconds", fallback=default.void_skew_margin_ms // 1000)
    if skew < 0:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_REQUEST_INVALID", "[dpone] void_skew_margin_seconds < 0")
    return ProtocolSettings(
        replica_sync_timeout_seconds=conf.getfloat(
            "dpone", "replica_sync_timeout_seconds", fallback=default.replica_sync_timeout_seconds
        ),
        send_timeout_ms=send_ms,
        void_skew_margin_ms=skew * 1000,
        external_admission=conf.getboolean("dpone", "external_replication_admission", fallback=True),
    )
