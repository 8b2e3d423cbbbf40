"""The HTTP(S) transport observation reflects the client actually built (scheme, verification, redirects, pinning).

The clients here are stand-ins for the attributes the observer reads; pinning against real engines behind a balancer
is proved in ``tests/transfer/source/test_native_source_pinning.py``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError
from urllib3.util import Retry

from airflow_provider_dpone.core.clickhouse.clients import PinnedPoolManager
from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.route.admission import check_transport
from airflow_provider_dpone.transfer.source.session import (
    http_connector,
    http_transport,
    open_pinning_session,
    source_transport_options,
)

pytestmark = pytest.mark.unit


class SessionServer:
    """What a ClickHouse server does with HTTP sessions: creates one on first use, refuses an unknown one that a
    request requires (``session_check=1``) with SESSION_NOT_FOUND - unless ``enforced`` is False, as behind an
    intermediary that drops the session parameters."""

    def __init__(self, *, enforced: bool = True) -> None:
        self.enforced = enforced
        self.sessions: set[str] = set()
        self.requests: list[dict[str, str]] = []

    def request(self, params: dict[str, str]) -> None:
        self.requests.append(dict(params))
        session = params.get("session_id")
        if not self.enforced or not session:
            return
        if session not in self.sessions:
            if params.get("session_check") == "1":
                raise DatabaseError("Code: 372. Session not found", code=372)
            self.sessions.add(session)


class StubClient(SimpleNamespace):
    """The attributes and calls of a clickhouse-connect HTTP client the connector and the observer use."""

    def __init__(self, url: str, retries: object, server: SessionServer | None = None) -> None:
        super().__init__(url=url, _backend=SimpleNamespace(http_retries=retries), params={}, closed=False)
        self.server = server or SessionServer()

    def set_client_setting(self, key: str, value: object) -> None:
        self.params[key] = str(value)

    def get_client_setting(self, key: str) -> str | None:
        return self.params.get(key)

    def query(self, sql: str, settings: dict[str, object] | None = None) -> None:
        self.server.request({**self.params, **{k: str(v) for k, v in (settings or {}).items()}})

    def close(self) -> None:
        self.closed = True


def client(url: str, retries: object, server: SessionServer | None = None) -> StubClient:
    """A client whose pinning session is open, as ``http_connector`` leaves it."""
    built = StubClient(url, retries, server)
    open_pinning_session(built)  # type: ignore[arg-type]
    return built


EXAMPLE_MANIFEST = Path(__file__).resolve().parents[3] / "dags_examples/manifests/clickhouse_to_mssql_raw_snapshot.yaml"
NO_REDIRECTS = Retry(total=0, redirect=0, raise_on_redirect=True)


def test_verified_https_without_redirects_is_admitted() -> None:
    observe = http_transport("ch.internal", 8443, ClickHouseConnectionOptions(secure=True, verify=True))
    observed = observe(client("https://ch.internal:8443", NO_REDIRECTS))
    assert check_transport(observed).scheme == "https" and observed.endpoint_authority == "ch.internal:8443"
    assert observed.pinned


def test_the_session_is_created_once_then_required_on_every_request() -> None:
    server = SessionServer()
    built = client("https://h:8443", NO_REDIRECTS, server)
    http_transport("h", 8443, ClickHouseConnectionOptions(secure=True))(built)
    created, probe = server.requests
    assert "session_check" not in created and created["session_timeout"] == "600"
    assert probe["session_check"] == "1" and probe["session_id"] != created["session_id"], "an unknown session"
    assert built.get_client_setting("session_check") == "1" and server.sessions == {created["session_id"]}


@pytest.mark.parametrize(
    ("server", "session_check"),
    [(SessionServer(enforced=False), "1"), (SessionServer(), None)],
    ids=["the endpoint answers an unknown session", "the client does not require its session"],
)
def test_pinning_is_reported_only_when_observed(server: SessionServer, session_check: str | None) -> None:
    built = client("https://h:8443", NO_REDIRECTS, server)
    if session_check is None:
        built.params.pop("session_check")
    observed = http_transport("h", 8443, ClickHouseConnectionOptions(secure=True))(built)
    assert not observed.pinned
    with pytest.raises(DponeError) as refused:
        check_transport(observed)
    assert refused.value.code == "native_transfer.replica_scope_unproven"


@pytest.mark.parametrize(
    ("options", "url", "retries", "code"),
    [
        (
            ClickHouseConnectionOptions(secure=True, verify=False),
            "https://h:8443",
            NO_REDIRECTS,
            "source_transport_unsupported",
        ),
        (ClickHouseConnectionOptions(secure=True), "http://h:8123", NO_REDIRECTS, "source_transport_unsupported"),
        (ClickHouseConnectionOptions(secure=False), "http://h:8123", 1, "source_transport_unsupported"),
        (ClickHouseConnectionOptions(secure=False), "http://h:8123", Retry(total=3), "source_transport_unsupported"),
    ],
)
def test_unverified_downgraded_or_redirecting_transports_are_refused(options, url, retries, code) -> None:
    with pytest.raises(DponeError) as info:
        check_transport(http_transport("h", 1, options)(client(url, retries)))
    assert info.value.code == "native_transfer." + code


# -- transport policy of the source connection (TLS by default, explicit plaintext, no proxy, lazy resolution) ---------
def test_a_non_loopback_source_gets_verified_https_when_the_extra_says_nothing() -> None:
    options = source_transport_options("ch.internal", ClickHouseConnectionOptions())
    assert options.secure and options.verify


def test_plain_http_to_a_non_loopback_source_is_refused_without_allow_plaintext() -> None:
    with pytest.raises(DponeError, match="allow_plaintext") as info:
        source_transport_options("10.1.2.3", ClickHouseConnectionOptions(secure=False))
    assert info.value.code == "native_transfer.source_transport_unsupported"


def test_allow_plaintext_is_explicit_and_logged_without_the_host(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        options = source_transport_options(
            "ch.internal", ClickHouseConnectionOptions(secure=False, allow_plaintext=True)
        )
    assert not options.secure
    assert "plain HTTP" in caplog.text and "ch.internal" not in caplog.text


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "::1", "[::1]"])
def test_loopback_sources_keep_their_configuration(host: str) -> None:
    assert not source_transport_options(host, ClickHouseConnectionOptions()).secure


def test_the_source_client_uses_its_own_pool_and_ignores_environment_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    from urllib3 import ProxyManager

    from airflow_provider_dpone.core.clickhouse import clients

    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    built: dict[str, object] = {}

    def http_client(**kwargs: object) -> StubClient:  # what the one client factory constructs
        built.update(kwargs)
        return StubClient("https://ch.internal:8443", None)

    monkeypatch.setattr(clients, "HttpClient", http_client)
    options = ClickHouseConnectionOptions(secure=True)
    http_connector("ch.internal", 8443, "u", "p", options).connect()
    pool = built["pool_mgr"]
    assert isinstance(pool, PinnedPoolManager) and not isinstance(pool, ProxyManager)


def test_the_hook_resolves_the_source_connection_only_when_it_connects(monkeypatch: pytest.MonkeyPatch) -> None:
    """Post-EOF recovery never connects: a deleted or retyped source connection cannot block it."""
    from airflow_provider_dpone.core.manifest import load_manifest
    from airflow_provider_dpone.hooks.native_transfer import DponeNativeTransferHook

    manifest = load_manifest(EXAMPLE_MANIFEST)
    resolved: list[str] = []

    def get_connection(conn_id: str) -> object:
        resolved.append(conn_id)
        raise DponeError("DPONE_CONNECTION_INVALID", f"connection {conn_id}: not found")

    hook = DponeNativeTransferHook(manifest)  # type: ignore[arg-type]
    monkeypatch.setattr(hook, "get_connection", get_connection)
    connector = hook.source_connector()
    assert resolved == [] and connector.connections == 0
    with pytest.raises(DponeError, match="not found"):
        connector.connect()
    assert resolved == [manifest.source.connection_id]  # type: ignore[union-attr]


def test_a_session_that_stays_locked_is_refused_after_bounded_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_dpone.transfer.source import metadata

    pauses: list[float] = []
    monkeypatch.setattr(metadata.time, "sleep", pauses.append)
    calls: list[int] = []

    def locked() -> None:
        calls.append(1)
        raise DatabaseError("Code: 373. Session is locked", code=373)

    with pytest.raises(DatabaseError):
        metadata.on_session(locked)
    assert len(calls) == len(metadata.LOCKED_PAUSES) + 1 and sum(pauses) == pytest.approx(1.55)

    def unknown_table() -> None:
        calls.append(2)
        raise DatabaseError("Code: 60. Unknown table", code=60)

    with pytest.raises(DatabaseError):
        metadata.on_session(unknown_table)
    assert calls.count(2) == 1 and len(pauses) == len(metadata.LOCKED_PAUSES), "other refusals: sent once"
