"""The snapshot source port on clickhouse-connect: one client = one pinned session, counted per ``connect``.

Works unchanged over HTTP(S) and over the in-process engine interface: everything goes through the ordinary
``Client`` API. The transport observation is derived from the client actually built (scheme, certificate
verification, bounded timeouts, redirect policy, pinning), never from what the caller hoped for.

Pinning over HTTP uses ClickHouse's own HTTP session: the first request creates a session on the server it reaches,
and every later request carries ``session_check=1``, so a server that does not hold the session (another replica
behind a balancer, or the same server restarted) refuses it with ``SESSION_NOT_FOUND`` instead of answering. The
metadata reads of admission and the data SELECT therefore all run on the server admission observed, or fail
(``native_transfer.source_endpoint_drift``). ``pinned`` is observed, not assumed: a request with an unknown session must
be refused, which an intermediary that drops or ignores session parameters would not do.
"""

from __future__ import annotations

import ipaddress
import logging
import ssl
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Final

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError, DatabaseError

from airflow_provider_dpone.core.clickhouse.clients import Purpose, build_client, close_client
from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection
from airflow_provider_dpone.core.clickhouse.server_codes import SESSION_NOT_FOUND
from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions, tls_relaxation
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.ports import SourceBlock
from airflow_provider_dpone.transfer.source import metadata
from airflow_provider_dpone.transfer.source.cancel import CANCEL_ON_CLOSE
from airflow_provider_dpone.transfer.source.reader import stream_blocks
from airflow_provider_dpone.transfer.source.sql import PROBE_SQL
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.query import SnapshotQuery
from airflow_provider_dpone.transfer.values.source_observation import (
    AccessObservation,
    MutationObservation,
    PhysicalObservation,
    RelationObservation,
    ReplicaObservation,
    SelectedRows,
    ServerObservation,
    SettingsObservation,
    TransportObservation,
)

log = logging.getLogger(__name__)

SESSION_TIMEOUT_SECONDS: Final = 600
"""Idle lifetime of the pinning session: covers the gaps between requests (stage and journal writes before the
SELECT, the EOF re-observation after it); a streaming SELECT keeps the session busy, so it never expires under it."""


def is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def source_transport_options(host: str, options: ClickHouseConnectionOptions) -> ClickHouseConnectionOptions:
    """The transport a native-transfer source may use: verified HTTPS unless the host is loopback.

    An extra that does not mention ``secure`` gets HTTPS; ``secure: false`` towards another host is refused unless
    ``allow_plaintext: true`` says so explicitly (and the plain read is logged, without the host).
    """
    if is_loopback(host):
        return options
    if "secure" not in options.model_fields_set:
        options = options.model_copy(update={"secure": True})
    if not options.secure:
        if not options.allow_plaintext:
            raise DponeError(
                "native_transfer.source_transport_unsupported",
                "plain HTTP to a non-loopback source needs allow_plaintext: true in the connection extra",
            )
        log.warning("native-transfer source is read over plain HTTP (allow_plaintext is set)")
    return options


class ClickHouseSnapshotSession:
    def __init__(self, client: Client, transport: TransportObservation) -> None:
        self._client = client
        self._transport = transport
        # over HTTP the server cancels a long read when the client hangs up; in process there is no connection
        self._cancel_on_close = CANCEL_ON_CLOSE if transport.scheme in ("http", "https") else {}

    @property
    def client(self) -> Client:
        return self._client

    def transport(self) -> TransportObservation:
        return self._transport

    def server(self) -> ServerObservation:
        return metadata.read_server(self._client)

    def relation(self, relation: RelationRef) -> RelationObservation:
        return metadata.read_relation(self._client, relation)

    def access(self, relation: RelationRef) -> AccessObservation:
        return metadata.read_access(self._client, relation)

    def settings(self, overlay: Mapping[str, str], names: Sequence[str]) -> SettingsObservation:
        return metadata.observe_settings(self._client, overlay, names)

    def replica(self, relation: RelationRef) -> ReplicaObservation:
        return metadata.read_replica(self._client, relation)

    def mutations(self, relation: RelationRef) -> MutationObservation:
        return metadata.read_mutations(self._client, relation)

    def physical(self, relation: RelationRef, partition_ids: Sequence[str] | None, cap: int) -> PhysicalObservation:
        return metadata.read_physical(self._client, relation, partition_ids, cap)

    def stream(self, query: SnapshotQuery) -> AbstractContextManager[Iterator[SourceBlock]]:
        return stream_blocks(self._client, query, self._cancel_on_close)

    def selected_rows(self, query: SnapshotQuery) -> SelectedRows:
        return metadata.read_selected_rows(self._client, query, self._cancel_on_close)

    def close(self) -> None:
        self._client.close()


class ClickHouseSnapshotConnector:
    """Builds one client per ``connect`` and counts the connections it opened."""

    def __init__(
        self, client_factory: Callable[[], Client], transport: Callable[[Client], TransportObservation]
    ) -> None:
        self._client_factory = client_factory
        self._transport = transport
        self.connections = 0

    def connect(self) -> ClickHouseSnapshotSession:
        client = self._client_factory()
        self.connections += 1
        return ClickHouseSnapshotSession(client, self._transport(client))

    @classmethod
    def deferred(cls, resolve: Callable[[], ClickHouseSnapshotConnector]) -> ClickHouseSnapshotConnector:
        """A connector that calls ``resolve`` (for example: read the Airflow connection) at its first ``connect``.

        Post-EOF recovery never connects to the source, so it never depends on the source's connection existing.
        """
        resolved: list[ClickHouseSnapshotConnector] = []

        def target() -> ClickHouseSnapshotConnector:
            if not resolved:
                resolved.append(resolve())
            return resolved[0]

        return cls(lambda: target()._client_factory(), lambda client: target()._transport(client))

    def decorated(self, decorate: Callable[[Callable[[], Client]], Client]) -> ClickHouseSnapshotConnector:
        """A new connector (own count) whose clients are built by ``decorate(build)``, with the same transport.

        ``decorate`` may refuse to build, or wrap the client it builds (tests count, record or deny connections).
        The transport is still observed on the client that is returned.
        """
        build = self._client_factory
        return ClickHouseSnapshotConnector(lambda: decorate(build), self._transport)


def inprocess_transport(path: str) -> Callable[[Client], TransportObservation]:
    """The embedded engine: no network, so nothing to verify, TLS is not requested, and the one engine of this
    process answers every request (pinned by construction)."""

    def observe(client: Client) -> TransportObservation:
        return TransportObservation(
            scheme="inprocess",
            tls_verified=False,
            requires_tls=False,
            bounded_timeouts=True,
            pinned=True,
            endpoint_authority=f"inprocess:{path}",
        )

    return observe


def open_pinning_session(client: Client) -> None:
    """Create this client's HTTP session on the server the next request reaches, then require it on every request."""
    client.set_client_setting("session_id", uuid.uuid4().hex)
    client.set_client_setting("session_timeout", str(SESSION_TIMEOUT_SECONDS))
    try:
        client.query(PROBE_SQL)
    except ClickHouseError as exc:
        raise metadata.source_failure(exc, "native_transfer.source_query_failed", "open session") from None
    client.set_client_setting("session_check", "1")


def observe_pinning(client: Client) -> bool:
    """Whether every request of ``client`` can only be answered by the server holding its session.

    True only when the client requires its session on every request AND the endpoint refuses a request naming a
    session it does not hold: an intermediary that strips or ignores the session parameters answers that probe, so
    it is reported unpinned rather than trusted.
    """
    if not client.get_client_setting("session_id") or client.get_client_setting("session_check") != "1":
        return False
    try:
        client.query(PROBE_SQL, settings={"session_id": uuid.uuid4().hex, "session_check": 1})
    except DatabaseError as exc:
        if getattr(exc, "code", None) == SESSION_NOT_FOUND:
            return True
        raise metadata.source_failure(exc, "native_transfer.source_metadata_unavailable", "session probe") from None
    return False


def http_transport(
    host: str, port: int, options: ClickHouseConnectionOptions
) -> Callable[[Client], TransportObservation]:
    """Observe the HTTP(S) client actually built: URL scheme, redirect policy and session pinning, not the intent."""
    from urllib3.util import Retry

    def observe(client: Client) -> TransportObservation:
        url = str(getattr(client, "url", ""))
        retries = getattr(getattr(client, "_backend", None), "http_retries", None)
        no_redirects = isinstance(retries, Retry) and retries.redirect == 0 and retries.total == 0
        secure = url.startswith("https://")
        return TransportObservation(
            scheme="https" if secure else "http",
            tls_verified=secure and options.verify,
            requires_tls=options.secure,
            bounded_timeouts=True,
            follows_redirects=not no_redirects,
            pinned=observe_pinning(client),
            endpoint_authority=f"{host}:{port}",
        )

    return observe


def http_connector(
    host: str, port: int, username: str, password: str, options: ClickHouseConnectionOptions
) -> ClickHouseSnapshotConnector:
    """A direct HTTP(S) source on the one client factory (``core.clickhouse.clients.build_client``, purpose
    ``SOURCE``): its own pool with no environment proxy, no client retries, no redirects, bounded timeouts,
    verification as configured, no downgrade; and every request after the first pinned to the server that holds the
    client's session.

    A connection that relaxes TLS (``verify: false``) is refused here, before any client exists: admission would
    refuse the unverified transport anyway, and by then the handshake would have sent the password to an endpoint
    nobody verified. ``[dpone] allow_unverified_tls`` does not apply to a source.
    """
    relaxed = tls_relaxation(options)
    if relaxed is not None:
        raise DponeError(
            "native_transfer.source_transport_unsupported", f"{relaxed}; a source is read over verified TLS only"
        )
    connection = ResolvedConnection(host=host, port=port, username=username, password=password, options=options)

    def build() -> Client:
        try:
            client = build_client(connection, Purpose.SOURCE)
        except ClickHouseError as exc:
            # the driver's message names the host and port: only the kind of failure is reported
            if (failure := _tls_failure(exc)) is not None:
                raise DponeError(
                    "native_transfer.source_transport_unsupported", f"TLS handshake failed: {failure}"
                ) from None
            raise DponeError("native_transfer.source_query_failed", f"connect: {type(exc).__name__}") from None
        try:
            open_pinning_session(client)
        except BaseException:
            close_client(client)
            raise
        return client

    return ClickHouseSnapshotConnector(build, http_transport(host, port, options))


def _tls_failure(exc: BaseException) -> str | None:
    """Why a connect failure was a TLS handshake failure, or ``None`` (the driver chains urllib3's ``SSLError``)."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    found: str | None = None
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return "the server certificate did not verify (chain, host name or validity)"
        if isinstance(current, ssl.SSLError) or type(current).__name__ == "SSLError":
            found = "the endpoint speaks no TLS or refused the handshake"
        reason = getattr(current, "reason", None)
        pending.extend([current.__cause__, current.__context__, reason if isinstance(reason, BaseException) else None])
    return found
