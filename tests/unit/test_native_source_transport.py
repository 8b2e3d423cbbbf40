"""The HTTP(S) transport observation reflects the client actually built (scheme, verification, redirects)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from urllib3.util import Retry

from airflow_provider_dpone.adapters.clickhouse.snapshot_session import http_transport
from airflow_provider_dpone.contracts.connection import ClickHouseConnectionOptions
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.protocol.native_transfer.admission import check_transport


def client(url: str, retries: object) -> SimpleNamespace:
    return SimpleNamespace(url=url, _backend=SimpleNamespace(http_retries=retries))


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
