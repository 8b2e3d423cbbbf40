"""The composition of the real adapters into the port set the publication service needs.

One resolved coordinator connection yields: the authority store and the cluster DDL (through the coordinator), the
catalog (topology from the coordinator, facts from each member), member sessions (one direct endpoint per member,
derived from the coordinator connection), and the artifact store. Clients are opened lazily and closed together by
:meth:`PublicationAdapters.close`. Random values come from the operating system's CSPRNG; time from the wall clock.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from airflow_provider_dpone.cluster.clickhouse.acceptance_reader import SubprocessAcceptanceReader
from airflow_provider_dpone.cluster.clickhouse.artifact_source import EXTRACTION_SECONDS, QueryArtifactSource
from airflow_provider_dpone.cluster.clickhouse.artifact_store import ObjectStorageArtifactStore
from airflow_provider_dpone.cluster.clickhouse.authority_store import ClickHouseAuthorityStore
from airflow_provider_dpone.cluster.clickhouse.catalog import ClickHouseCatalog
from airflow_provider_dpone.cluster.clickhouse.cluster_ddl import ClickHouseClusterDDL
from airflow_provider_dpone.cluster.clickhouse.endpoint import Endpoint
from airflow_provider_dpone.cluster.clickhouse.member_session import ClickHouseMemberSessions
from airflow_provider_dpone.cluster.clickhouse.oneshot import PROCESS_GUARD, MutationGuard
from airflow_provider_dpone.cluster.clickhouse.sql_cluster_ddl import DEFAULT_TASK_TIMEOUT_SECONDS
from airflow_provider_dpone.cluster.ports import AcceptanceReader
from airflow_provider_dpone.cluster.protocol.context import PublicationPorts
from airflow_provider_dpone.cluster.values.inventory import AdmittedMember
from airflow_provider_dpone.core.clickhouse.clients import Handshakes
from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection
from airflow_provider_dpone.core.clock import SystemClock


class SystemEntropy:
    """Fence and correlation tokens and candidate UUID intents: 128 random bits each."""

    def token(self) -> str:
        return secrets.token_hex(16)

    def uuid(self) -> str:
        return str(uuid.uuid4())


class MemberEndpoints:
    """One endpoint per admitted member (cached), derived from the coordinator connection."""

    def __init__(self, factory: Callable[[AdmittedMember], Endpoint], declared: frozenset[str] | None = None) -> None:
        self._factory = factory
        self._endpoints: dict[str, Endpoint] = {}
        self.declared = declared
        """The ``'shard:replica'`` keys of the connection's ``member_endpoints`` (``None``: no explicit map)."""

    @classmethod
    def derived_from(cls, coordinator: ResolvedConnection, handshakes: Handshakes | None = None) -> MemberEndpoints:
        explicit = coordinator.options.member_endpoints
        return cls(
            lambda member: Endpoint.of(coordinator.for_member(member), handshakes),
            None if explicit is None else frozenset(explicit),
        )

    def __call__(self, member: AdmittedMember) -> Endpoint:
        if member.member_id not in self._endpoints:
            self._endpoints[member.member_id] = self._factory(member)
        return self._endpoints[member.member_id]

    def close(self) -> None:
        endpoints, self._endpoints = self._endpoints, {}
        for endpoint in endpoints.values():
            endpoint.close()


@dataclass
class PublicationAdapters:
    """The port set plus the pieces a caller needs to build artifact sources; close it when the task ends."""

    ports: PublicationPorts
    coordinator: Endpoint
    members: MemberEndpoints
    store: ObjectStorageArtifactStore

    def query_source(
        self,
        *,
        query: str,
        columns: Sequence[tuple[str, str]],
        max_source_bytes: int,
        source: Endpoint | None = None,
        max_execution_seconds: int = EXTRACTION_SECONDS,
        settings: Mapping[str, Any] | None = None,
    ) -> QueryArtifactSource:
        """Extraction from ``source`` (default: the coordinator), read-only under the provider's time bound (request
        ``settings`` of the caller's go with them, never over them); the reference digest runs on the coordinator."""
        return QueryArtifactSource(
            source=source or self.coordinator,
            query=query,
            columns=columns,
            store=self.store,
            reference=self.coordinator,
            max_source_bytes=max_source_bytes,
            max_execution_seconds=max_execution_seconds,
            settings=settings,
        )

    def close(self) -> None:
        try:
            self.members.close()
        finally:
            self.coordinator.close()

    def __enter__(self) -> PublicationAdapters:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def build_publication_adapters(
    *,
    coordinator: Endpoint,
    members: MemberEndpoints,
    database: str,
    store: ObjectStorageArtifactStore,
    guard: MutationGuard = PROCESS_GUARD,
    ddl_task_timeout_seconds: int = DEFAULT_TASK_TIMEOUT_SECONDS,
    acceptance: AcceptanceReader | None = None,
) -> PublicationAdapters:
    """Wire the real adapters; the authority table lives in the target ``database`` on the coordinator."""
    ports = PublicationPorts(
        authority=ClickHouseAuthorityStore(coordinator, database, guard=guard),
        catalog=ClickHouseCatalog(coordinator, members, declared=members.declared),
        sessions=ClickHouseMemberSessions(members, guard=guard),
        ddl=ClickHouseClusterDDL(coordinator, guard=guard, task_timeout_seconds=ddl_task_timeout_seconds),
        artifacts=store,
        clock=SystemClock(),
        entropy=SystemEntropy(),
        acceptance=acceptance,
    )
    return PublicationAdapters(ports=ports, coordinator=coordinator, members=members, store=store)


def adapters_for(
    connection: ResolvedConnection,
    *,
    database: str,
    store: ObjectStorageArtifactStore,
    guard: MutationGuard = PROCESS_GUARD,
    ddl_task_timeout_seconds: int = DEFAULT_TASK_TIMEOUT_SECONDS,
) -> PublicationAdapters:
    """The adapter set over HTTP(S) for one resolved coordinator connection; target acceptance reads run in bounded
    worker processes over each member's direct connection. Its clients share their connect exchanges per server."""
    handshakes = Handshakes()
    return build_publication_adapters(
        coordinator=Endpoint.of(connection, handshakes),
        members=MemberEndpoints.derived_from(connection, handshakes),
        database=database,
        store=store,
        guard=guard,
        ddl_task_timeout_seconds=ddl_task_timeout_seconds,
        acceptance=SubprocessAcceptanceReader(connection.for_member),
    )
