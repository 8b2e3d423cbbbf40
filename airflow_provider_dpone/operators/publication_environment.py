"""The seam between the Airflow surface and the systems it drives: one :class:`PublicationEnvironment` per task try.

An operator never builds clients itself. It calls its ``ports_factory`` with the manifest, the connection id and how
long the initiator of its ``ON CLUSTER`` DDL may wait for the hosts (short for a deferrable task), and receives the protocol's ports, the target's typed table definition, the extraction, and the name of the reader its
deferral trigger polls the DDL queue with. The default factory, :func:`hook_environment`, builds all of it from the
``dpone_clickhouse`` connection through :class:`~airflow_provider_dpone.hooks.clickhouse.DponeClickHouseHook`.

Tests pass another factory (for example one over the in-memory fakes with fault injection) through the operators'
``ports_factory`` argument; nothing else changes, so the same operator code runs against fakes and real clusters.
A factory must be a plain function (or a closure): Airflow copies operators, and a copied bound method would copy
the object it is bound to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from airflow_provider_dpone.contracts.manifest import ClusterPublicationManifest
from airflow_provider_dpone.ports.publication import ArtifactSource, TableSpec
from airflow_provider_dpone.protocol.context import ProtocolSettings, PublicationPorts
from airflow_provider_dpone.protocol.request import PublicationRequest

DEFAULT_QUEUE_READER = "airflow_provider_dpone.triggers.ddl_queue_readers.clickhouse_queue_reader"
"""Import path of the factory the deferral trigger builds its (async, read-only) DDL queue reader with."""


def _nothing_to_close() -> None:
    return None


@dataclass(frozen=True)
class PublicationEnvironment:
    """Everything one task try needs to drive the protocol against one cluster.

    ``table`` resolves the target's typed definition (the source's column types with the manifest's engine and
    sorting key); ``source`` builds the extraction for a request; ``queue_reader`` names the trigger's reader
    factory (an import path, because a trigger is rebuilt from its serialized kwargs in the triggerer process).
    """

    ports: PublicationPorts
    table: Callable[[], TableSpec]
    source: Callable[[PublicationRequest], ArtifactSource]
    queue_reader: str = DEFAULT_QUEUE_READER
    settings: ProtocolSettings = field(default_factory=ProtocolSettings)
    close: Callable[[], None] = _nothing_to_close


class PortsFactory(Protocol):
    """Builds the environment of one task try from the manifest and the ``dpone_clickhouse`` connection id.

    ``ddl_task_timeout_seconds`` bounds how long a dispatch of an ``ON CLUSTER`` DDL waits for the hosts before it
    answers "not finished" (``None``: the deployment's ``[dpone] ddl_task_timeout_seconds``).
    """

    def __call__(
        self, manifest: ClusterPublicationManifest, conn_id: str, *, ddl_task_timeout_seconds: int | None = None
    ) -> PublicationEnvironment: ...


def hook_environment(
    manifest: ClusterPublicationManifest, conn_id: str, *, ddl_task_timeout_seconds: int | None = None
) -> PublicationEnvironment:
    """The default factory: real ClickHouse adapters from the ``dpone_clickhouse`` connection ``conn_id``.

    Imported lazily, so parsing a DAG file never imports the adapters or opens a connection.
    """
    from airflow_provider_dpone.operators.publication_clickhouse import hook_environment as build

    return build(manifest, conn_id, ddl_task_timeout_seconds=ddl_task_timeout_seconds)
