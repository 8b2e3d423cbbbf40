"""A resolved ClickHouse connection (in memory only) and the endpoint of each member derived from it.

The coordinator connection is resolved once from Airflow; a member's connection is a copy with the member's host
(from ``system.clusters``) and the HTTP port and scheme of the coordinator connection (``member_http_port``, default
the connection's own port), or the explicit ``member_endpoints`` entry for ``"shard_num:replica_num"``. The copy
keeps the credentials in memory: nothing here is serialized, and ``repr`` never shows a host or a password.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
from airflow_provider_dpone.core.errors import DponeError


class _Host(Protocol):
    @property
    def host(self) -> str: ...


class ClusterMember(Protocol):
    """What a member connection is derived from: the member's position and host in ``system.clusters``."""

    @property
    def member_id(self) -> str: ...

    @property
    def label(self) -> str: ...

    @property
    def shard_num(self) -> int: ...

    @property
    def replica_num(self) -> int: ...

    @property
    def endpoint(self) -> _Host: ...


@dataclass(frozen=True)
class ResolvedConnection:
    """Host, port, credentials, default database and transport options of one ClickHouse endpoint."""

    host: str = field(repr=False)
    port: int = field(repr=False)
    username: str = field(repr=False)
    password: str = field(repr=False)
    database: str = ""
    options: ClickHouseConnectionOptions = field(default_factory=ClickHouseConnectionOptions)
    unverified_tls_allowed: bool = False
    """The deployment allowed this connection's ``verify: false`` (``[dpone] allow_unverified_tls``); without it no
    client is built for a connection that relaxes TLS (``clients.client_kwargs``)."""

    def __repr__(self) -> str:
        scheme = "https" if self.options.secure else "http"
        return f"ResolvedConnection(<redacted>, scheme={scheme})"

    __str__ = __repr__

    @property
    def scheme(self) -> str:
        """``https`` exactly when the connection asks for security; there is no fallback to ``http``."""
        return "https" if self.options.secure else "http"

    def at(self, host: str, port: int) -> ResolvedConnection:
        """The same credentials, options and scheme at another endpoint."""
        return replace(self, host=host, port=port)

    def for_member(self, member: ClusterMember) -> ResolvedConnection:
        """The direct connection of one admitted member (see module docstring).

        It has no default database: every statement sent to a member names its database, and a member that lacks the
        target database must still answer (so that admission can say so) instead of refusing the connection.
        """
        endpoints = self.options.member_endpoints
        if endpoints is not None:
            key = f"{member.shard_num}:{member.replica_num}"
            if key not in endpoints:
                raise DponeError(
                    "DPONE_CLICKHOUSE_MEMBER_ENDPOINT_UNRESOLVED", f"member {member.label}: no key {key!r}"
                )
            host, _, port = endpoints[key].rpartition(":")
            return replace(self.at(host.removeprefix("[").removesuffix("]"), int(port)), database="")
        return replace(self.at(member.endpoint.host, self.options.member_http_port or self.port), database="")
