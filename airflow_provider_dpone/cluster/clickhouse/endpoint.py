"""One ClickHouse endpoint as the adapters use it: a read client, a one-shot mutation client, scratch sessions.

Clients are created lazily, once per purpose even when two threads ask at once (an entry point reads the authority
while admission reads the topology, both through the coordinator; each client costs clickhouse-connect's connect
requests, and a second one would never be closed), reused for the endpoint's lifetime, and closed together. The adapters never build clients themselves, so a test can hand them an endpoint over any
clickhouse-connect client (for example the in-process engine, which has no network to lose a response on).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from airflow_provider_dpone.core.clickhouse.clients import Handshakes, Purpose, build_client, close_client
from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection

ClientFactory = Callable[[Purpose, str | None], Any]


class Endpoint:
    """Clients of one server, by purpose (see :mod:`clients`)."""

    def __init__(self, factory: ClientFactory, *, closer: Callable[[Any], None] = close_client) -> None:
        self._factory = factory
        self._closer = closer
        self._clients: dict[Purpose, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, connection: ResolvedConnection, handshakes: Handshakes | None = None) -> Endpoint:
        """An endpoint over HTTP(S) with the hardened clients of :func:`clients.build_client` (connecting through
        ``handshakes`` when given: the adapter set's shared connect exchanges)."""
        return cls(
            lambda purpose, session: build_client(connection, purpose, session_id=session, handshakes=handshakes)
        )

    @classmethod
    def over(cls, client: Any) -> Endpoint:
        """An endpoint that uses one existing client for every purpose and never closes it (tests, in-process)."""
        return cls(lambda purpose, session: client, closer=lambda _client: None)

    def reader(self) -> Any:
        return self._client(Purpose.READ)

    def mutator(self) -> Any:
        return self._client(Purpose.MUTATION)

    def scratch(self, session_id: str) -> Any:
        """A new one-shot client bound to ``session_id``; the caller closes it with :meth:`release`."""
        return self._factory(Purpose.SCRATCH, session_id)

    def release(self, client: Any) -> None:
        self._closer(client)

    def _client(self, purpose: Purpose) -> Any:
        with self._lock:
            if purpose not in self._clients:
                self._clients[purpose] = self._factory(purpose, None)
            return self._clients[purpose]

    def close(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, {}
        for client in clients.values():
            self._closer(client)
