"""clickhouse-connect clients built from a resolved connection, hardened for a fenced protocol: the one client factory
of both routes (the cluster's adapters and the transfer's source session).

Every client:

* speaks ``https`` with certificate and host-name verification exactly when the connection says ``secure`` (an
  implicit downgrade to ``http`` never happens); a connection with ``verify: false`` gets no client at all, before
  any request, unless the deployment allowed it for that connection (``ResolvedConnection.unverified_tls_allowed``,
  from ``[dpone] allow_unverified_tls``);
* uses its own urllib3 pool (no environment proxy, one pinned server) that forces ``Retry(total=0)`` and
  ``redirect=False`` on every request, including the ones clickhouse-connect sends while connecting: no urllib3
  retry and **no redirect** -- a 3xx fails the request instead of sending it to another server;
* has bounded connect and send/receive timeouts, response compression, ``async_insert = 0`` and no automatic
  session id; errors are reported without URLs or hosts (``show_clickhouse_errors="scrub"``).

The **mutation** client is additionally one-shot. clickhouse-connect 1.12 replays a request once when the server
closes the connection before answering, for requests it classifies as retryable -- and it classifies ``raw_insert``
and ``insert`` as retryable (``QueryRuntime(retryable=True)`` in ``_backendclient.py``), so a lost INSERT response
with a bytes body is silently sent twice (``http_sync.HttpSyncBackend.request``). For mutations the backend's
``request`` is wrapped to force ``retryable=False``, ``retries=0`` and no ``retry_body``: a mutation leaves the
process at most once, and a lost response surfaces as an error the adapter reports as "outcome unknown".

Connecting a client costs clickhouse-connect three requests (server version and time zone, ``system.settings``, the
protocol-version probe). The clients of one adapter set (one task) share them through :class:`Handshakes`: the first
client of a server records its connect exchange, the others of that server replay it (same server, same user, same
settings, moments apart); nothing is shared between adapter sets.

The async client (triggers, read-only) has the same options; its aiohttp session is built without following
redirects.
"""

from __future__ import annotations

import logging
import threading
import warnings
from enum import StrEnum
from typing import Any, Final

import aiohttp
from clickhouse_connect.driver.asyncclient import AsyncClient
from clickhouse_connect.driver.httpclient import HttpClient
from clickhouse_connect.driver.httputil import get_pool_manager_options
from urllib3 import PoolManager
from urllib3.util.retry import Retry

from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection
from airflow_provider_dpone.core.connection_options import tls_relaxation
from airflow_provider_dpone.core.errors import DponeError

NO_RETRY: Final[Retry] = Retry(total=0, connect=0, read=0, redirect=0, status=0, other=0, raise_on_redirect=True)
"""urllib3 policy of every request: never resend, never follow a redirect."""

BASE_SETTINGS: Final[dict[str, Any]] = {"async_insert": 0}
CLIENT_NAME: Final[str] = "airflow-provider-dpone"
POOL_SIZE: Final[int] = 4


class _WithholdDetails(logging.Filter):
    """clickhouse-connect logs transport failures with tracebacks whose text names the server (host, port, URL).
    Keep the record (level, logger, a fixed message) and withhold everything that could carry an endpoint."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info or record.args or "://" in str(record.msg):
            record.msg = f"clickhouse-connect {record.levelname.lower()} (details withheld: they may name the server)"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


def withhold_driver_log_details() -> None:
    """Attach the filter to every clickhouse-connect logger that exists (filters do not inherit)."""
    names = [name for name in logging.root.manager.loggerDict if name.startswith("clickhouse_connect")]
    for name in ["clickhouse_connect", *names]:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, _WithholdDetails) for existing in logger.filters):
            logger.addFilter(_WithholdDetails())


withhold_driver_log_details()


class Purpose(StrEnum):
    READ = "read"
    """Observation only: read-only SQL may be retried by the driver (it has no effect to be unsure about)."""
    MUTATION = "mutation"
    """One-shot: no driver retry of any kind (see module docstring)."""
    SCRATCH = "scratch"
    """One-shot with an explicit session (temporary tables of the reference digest)."""
    SOURCE = "source"
    """A transfer source's reads: never resent on an error status (``query_retries = 0``); the source opens its own
    pinning session on the client, so a request is answered only by the server that holds it."""


def client_kwargs(connection: ResolvedConnection, purpose: Purpose, *, session_id: str | None = None) -> dict[str, Any]:
    """The keyword arguments of :class:`HttpClient` for ``purpose`` (pure: no I/O, testable); refuses a connection
    that relaxes TLS without the deployment's leave, so no credential is sent to an unverified endpoint."""
    options = connection.options
    relaxed = tls_relaxation(options)
    if relaxed is not None and not connection.unverified_tls_allowed:
        raise DponeError("DPONE_CLICKHOUSE_TRANSPORT_UNVERIFIED", relaxed)
    kwargs: dict[str, Any] = {
        "interface": connection.scheme,
        "host": connection.host,
        "port": connection.port,
        "username": connection.username,
        "password": connection.password,
        "database": connection.database or None,
        "compress": True,
        "connect_timeout": options.connect_timeout_seconds,
        "send_receive_timeout": options.send_receive_timeout_seconds,
        "query_retries": 2 if purpose is Purpose.READ else 0,
        "client_name": CLIENT_NAME,
        "settings": dict(BASE_SETTINGS),
        "autogenerate_session_id": False,
        "show_clickhouse_errors": "scrub",
    }
    if purpose is Purpose.SCRATCH:
        if not session_id:
            raise ValueError("a scratch client needs an explicit session id")
        kwargs["session_id"] = session_id
    if connection.scheme == "https":
        kwargs["verify"] = options.verify
        if options.ca_cert:
            kwargs["ca_cert"] = options.ca_cert
    return kwargs


class PinnedPoolManager(PoolManager):
    """A urllib3 pool manager that never resends and never follows a redirect, whatever a caller asks for.

    clickhouse-connect passes its own ``retries`` with every request (an integer, 1 by default, also while the client
    connects), which would override a pool-level policy; this manager overrides it back. A 3xx is returned as is and
    fails the query as an HTTP error.
    """

    def urlopen(self, method: str, url: str, redirect: bool = True, **kw: Any) -> Any:  # type: ignore[override]
        kw["retries"] = NO_RETRY
        return super().urlopen(method, url, redirect=False, **kw)


def _pool(connection: ResolvedConnection) -> PinnedPoolManager:
    options = connection.options
    secure = connection.scheme == "https"
    return PinnedPoolManager(
        **get_pool_manager_options(
            ca_cert=options.ca_cert if secure else None,
            verify=options.verify if secure else True,
            retries=NO_RETRY,
            maxsize=POOL_SIZE,
        )
    )


def make_one_shot(backend: Any) -> None:
    """Wrap ``backend.request`` so no call can be replayed by the driver (see module docstring)."""
    original = backend.request

    def request(*args: Any, **kwargs: Any) -> Any:
        kwargs["retries"] = 0
        kwargs["retryable"] = False
        kwargs["retry_body"] = None
        return original(*args, **kwargs)

    backend.request = request


class Handshakes:
    """clickhouse-connect's connect exchange per server, recorded by the first client that connects to it and replayed
    to the later clients of the same adapter set (see module docstring). One per adapter set, never process-wide."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._locks: dict[tuple[Any, ...], threading.Lock] = {}
        self._transcripts: dict[tuple[Any, ...], list[tuple[Any, Any, BaseException | None]]] = {}

    def lock(self, key: tuple[Any, ...]) -> threading.Lock:
        """Held while a client of ``key`` connects, so a second one waits for the first one's transcript."""
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())

    def transcript(self, key: tuple[Any, ...]) -> list[tuple[Any, Any, BaseException | None]] | None:
        return self._transcripts.get(key)

    def remember(self, key: tuple[Any, ...], transcript: list[tuple[Any, Any, BaseException | None]]) -> None:
        self._transcripts[key] = transcript


class _SharedHandshakeClient(HttpClient):
    """An :class:`HttpClient` whose connect exchange is recorded into, or replayed from, its :class:`Handshakes`.

    clickhouse-connect runs the exchange through ``_execute_operation`` while ``__init__`` connects; the replay
    answers the same operations, in the same order, with the recorded results (a different operation is refused)."""

    def __init__(self, *, handshakes: Handshakes, **kwargs: Any) -> None:
        settings = tuple(sorted((kwargs.get("settings") or {}).items()))
        fields = ("interface", "host", "port", "username", "database")
        self._handshake_key = (*(kwargs.get(name) for name in fields), settings)
        self._handshakes = handshakes
        self._recording: list[tuple[Any, Any, BaseException | None]] | None = None
        self._replaying: list[tuple[Any, Any, BaseException | None]] | None = None
        with handshakes.lock(self._handshake_key):
            recorded = handshakes.transcript(self._handshake_key)
            if recorded is None:
                self._recording = []
            else:
                self._replaying = list(recorded)
            try:
                super().__init__(**kwargs)
                if self._recording is not None:
                    handshakes.remember(self._handshake_key, self._recording)
            finally:
                self._recording = self._replaying = None

    def _execute_operation(self, operation: Any) -> Any:
        if self._replaying is not None:
            expected, result, error = self._replaying.pop(0) if self._replaying else (None, None, None)
            if expected != operation:
                raise RuntimeError("the connect exchange differs from the recorded one")
            if error is not None:
                raise error
            return result
        try:
            result = super()._execute_operation(operation)
        except Exception as error:
            if self._recording is not None:
                self._recording.append((operation, None, error))
            raise
        if self._recording is not None:
            self._recording.append((operation, result, None))
        return result


def build_client(
    connection: ResolvedConnection,
    purpose: Purpose = Purpose.READ,
    *,
    session_id: str | None = None,
    handshakes: Handshakes | None = None,
) -> HttpClient:
    """A connected sync client for ``purpose``; with ``handshakes``, connected through the shared exchange of its
    server. The caller closes it (``close_client``)."""
    kwargs = client_kwargs(connection, purpose, session_id=session_id)
    pool = _pool(connection)
    try:
        if handshakes is None:
            client = HttpClient(pool_mgr=pool, **kwargs)
        else:
            client = _SharedHandshakeClient(pool_mgr=pool, handshakes=handshakes, **kwargs)
    except Exception:
        pool.clear()
        raise
    if connection.scheme == "https" and not client.url.startswith("https://"):
        close_client(client)
        raise DponeError("DPONE_CLICKHOUSE_TRANSPORT_INSECURE", "client url scheme")
    client.http_retries = NO_RETRY  # type: ignore[assignment]
    if purpose in (Purpose.MUTATION, Purpose.SCRATCH):
        make_one_shot(client._backend)
    return client


def close_client(client: Any) -> None:
    """Close a sync client and the pool it was given (clickhouse-connect closes only pools it created)."""
    try:
        client.close()
    finally:
        pool = getattr(getattr(client, "_backend", None), "http", None)
        if pool is not None:
            pool.clear()


with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)

    class _NoRedirectSession(aiohttp.ClientSession):
        """An aiohttp session whose requests never follow a redirect (a 3xx is returned, and fails the query)."""

        def request(self, method: str, url: Any, **kwargs: Any) -> Any:
            kwargs["allow_redirects"] = False
            return super().request(method, url, **kwargs)


def _no_redirect_sessions(client: AsyncClient) -> None:
    backend = client._backend

    def new_session() -> aiohttp.ClientSession:
        from clickhouse_connect.driver._backend.http_async import _TCPConnector

        return _NoRedirectSession(
            connector=_TCPConnector(**backend.connector_kwargs),
            timeout=backend.timeout,
            headers=backend.headers,
            trust_env=False,
            auto_decompress=False,
            skip_auto_headers={"Accept-Encoding"},
        )

    backend._new_session = new_session  # type: ignore[method-assign]


async def build_async_client(connection: ResolvedConnection) -> AsyncClient:
    """A connected async client (read-only use: pollers and triggers)."""
    kwargs = client_kwargs(connection, Purpose.READ)
    kwargs["query_retries"] = 0
    client = AsyncClient(**kwargs)
    client._backend.proxy_url = None  # pinned: no proxy from the environment
    _no_redirect_sessions(client)
    try:
        await client._initialize()
    except BaseException:
        await client.close()
        raise
    return client
