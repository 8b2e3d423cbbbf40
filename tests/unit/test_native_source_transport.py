"""The HTTP(S) transport observation reflects the client actually built (scheme, verification, redirects)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from urllib3.util import Retry

from airflow_provider_dpone.adapters.clickhouse.clients import PinnedPoolManager
from airflow_provider_dpone.adapters.clickhouse.snapshot_session import (
    http_connector,
    http_transport,
    source_transport_options,
)
from airflow_provider_dpone.contracts.connection import ClickHouseConnectionOptions
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.protocol.native_transfer.admission import check_transport


def client(url: str, retries: object) -> SimpleNamespace:
    return SimpleNamespace(url=url, _backend=SimpleNamespace(http_retries=retries))


EXAMPLE_MANIFEST = Path(__file__).resolve().parents[2] / "dags_examples/manifests/clickhouse_to_mssql_raw_snapshot.yaml"
NO_REDIRECTS = Retry(total=0, redirect=0, raise_on_redirect=True)


def test_verified_https_without_redirects_is_admitted() -> None:
    observe = http_transport("ch.internal", 8443, ClickHouseConnectionOptions(secure=True, verify=True))
    observed = observe(client("https://ch.internal:8443", NO_REDIRECTS))
    assert check_transport(observed).scheme == "https" and observed.endpoint_authority == "ch.internal:8443"


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
    assert info.value.code == "mssql_native." + code


# -- transport policy of the source connection (TLS by default, explicit plaintext, no proxy, lazy resolution) ---------
def test_a_non_loopback_source_gets_verified_https_when_the_extra_says_nothing() -> None:
    options = source_transport_options("ch.internal", ClickHouseConnectionOptions())
    assert options.secure and options.verify


def test_plain_http_to_a_non_loopback_source_is_refused_without_allow_plaintext() -> None:
    with pytest.raises(DponeError, match="allow_plaintext") as info:
        source_transport_options("10.1.2.3", ClickHouseConnectionOptions(secure=False))
    assert info.value.code == "mssql_native.source_transport_unsupported"


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
    import clickhouse_connect
    from urllib3 import ProxyManager

    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    built: dict[str, object] = {}

    def get_client(**kwargs: object) -> SimpleNamespace:
        built.update(kwargs)
        return SimpleNamespace(_backend=SimpleNamespace(http_retries=None))

    monkeypatch.setattr(clickhouse_connect, "get_client", get_client)
    options = ClickHouseConnectionOptions(secure=True)
    http_connector("ch.internal", 8443, "u", "p", options).connect()
    pool = built["pool_mgr"]
    assert isinstance(pool, PinnedPoolManager) and not isinstance(pool, ProxyManager)


def test_the_hook_resolves_the_source_connection_only_when_it_connects(monkeypatch: pytest.MonkeyPatch) -> None:
    """Post-EOF recovery never connects: a deleted or retyped source connection cannot block it."""
    from airflow_provider_dpone.contracts.manifest import load_manifest
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
