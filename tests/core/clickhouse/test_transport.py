"""The HTTP transport of clickhouse-connect 1.12 as the adapters configure it, against real loopback sockets.

The controls show the hazards are real (the stock configuration replays an INSERT whose response was lost, and
follows a redirect to another server); the same requests through the adapters' configuration are sent once and
refuse the redirect.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from clickhouse_connect.driver._backend.http_sync import HttpSyncBackend
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError
from clickhouse_connect.driver.httputil import get_pool_manager, get_pool_manager_options
from urllib3 import Timeout

from airflow_provider_dpone.core.clickhouse.clients import PinnedPoolManager, Purpose, client_kwargs, make_one_shot
from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection
from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
from airflow_provider_dpone.core.errors import DponeError
from tests.support.http_servers import ok_reply, redirect_reply, serve

pytestmark = pytest.mark.adapter

INSERT_BODY = b"INSERT INTO `db`.`t` FORMAT Native\n" + b"\x00" * 64


def backend(port: int, *, hardened: bool) -> HttpSyncBackend:
    pool = PinnedPoolManager(**get_pool_manager_options()) if hardened else get_pool_manager()
    instance = HttpSyncBackend(
        url=f"http://127.0.0.1:{port}",
        pool_manager=pool,
        owns_pool_manager=True,
        headers={},
        params={},
        timeout=Timeout(connect=2, read=2),
        server_host_name=None,
        token_provider=None,
        autogenerate_query_id=False,
    )
    if hardened:
        make_one_shot(instance)
    return instance


def send_insert(instance: HttpSyncBackend) -> Any:
    # exactly how HttpClient.raw_insert sends a bytes block: QueryRuntime(retryable=True), server_wait=False
    return instance.request(INSERT_BODY, {"query_id": "dpone-load-x"}, server_wait=False, retryable=True)


def test_stock_transport_replays_an_insert_whose_response_was_lost() -> None:
    with serve(reply=None) as server, pytest.raises(OperationalError):
        send_insert(backend(server.port, hardened=False))
    assert len(server.requests) == 2


def test_one_shot_transport_sends_an_insert_once_when_the_response_is_lost() -> None:
    with serve(reply=None) as server, pytest.raises(OperationalError):
        send_insert(backend(server.port, hardened=True))
    assert len(server.requests) == 1


def test_one_shot_transport_does_not_retry_a_retryable_status() -> None:
    unavailable = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    with serve(reply=unavailable) as server:
        instance = backend(server.port, hardened=True)
        with pytest.raises(OperationalError):
            instance.request(b"SELECT 1", {}, retries=3, retryable=True)
    assert len(server.requests) == 1


def test_stock_transport_follows_a_redirect_to_another_server() -> None:
    with serve(reply=ok_reply()) as elsewhere, serve(reply=redirect_reply(elsewhere.port)) as server:
        response = backend(server.port, hardened=False).request(b"SELECT 1", {}, retryable=True)
        assert response.status == 200
    assert len(elsewhere.requests) == 1


def test_hardened_transport_refuses_a_redirect() -> None:
    with serve(reply=ok_reply()) as elsewhere, serve(reply=redirect_reply(elsewhere.port)) as server:
        instance = backend(server.port, hardened=True)
        with pytest.raises(DatabaseError):  # the 307 itself is the (failed) answer
            instance.request(b"SELECT 1", {}, retryable=True)
    assert len(server.requests) == 1
    assert elsewhere.requests == []


# --- client options --------------------------------------------------------------------------------------------


def connection(**options: Any) -> ResolvedConnection:
    return ResolvedConnection(
        host="ch.internal",
        port=8443,
        username="u",
        password="secret-pw",
        database="db",
        options=ClickHouseConnectionOptions(**options),
    )


def test_secure_connection_is_https_with_verification_and_bounded_timeouts() -> None:
    kwargs = client_kwargs(
        connection(secure=True, ca_cert="/ca.pem", connect_timeout_seconds=3, send_receive_timeout_seconds=30),
        Purpose.MUTATION,
    )
    assert kwargs["interface"] == "https"
    assert kwargs["verify"] is True and kwargs["ca_cert"] == "/ca.pem"
    assert (kwargs["connect_timeout"], kwargs["send_receive_timeout"]) == (3, 30)
    assert kwargs["query_retries"] == 0
    assert kwargs["settings"] == {"async_insert": 0}
    assert kwargs["autogenerate_session_id"] is False
    assert kwargs["compress"] is True


def test_insecure_connection_is_plain_http_only_when_asked() -> None:
    assert client_kwargs(connection(), Purpose.READ)["interface"] == "http"
    allowed = replace(connection(secure=True, verify=False), unverified_tls_allowed=True)
    assert client_kwargs(allowed, Purpose.READ)["verify"] is False


@pytest.mark.parametrize("purpose", list(Purpose))
def test_no_client_is_built_for_unverified_tls_the_deployment_did_not_allow(purpose: Purpose) -> None:
    with pytest.raises(DponeError) as caught:
        client_kwargs(connection(secure=True, verify=False), purpose, session_id="s1")
    assert caught.value.code == "DPONE_CLICKHOUSE_TRANSPORT_UNVERIFIED"


def test_scratch_clients_need_an_explicit_session() -> None:
    with pytest.raises(ValueError):
        client_kwargs(connection(), Purpose.SCRATCH)
    assert client_kwargs(connection(), Purpose.SCRATCH, session_id="s1")["session_id"] == "s1"


def test_resolved_connection_never_shows_host_or_password() -> None:
    text = repr(connection(secure=True)) + str(connection())
    assert "secret-pw" not in text and "ch.internal" not in text


def test_driver_log_records_that_could_name_the_server_are_withheld(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    logger = logging.getLogger("clickhouse_connect.driver._backend.http_sync")
    with caplog.at_level(logging.DEBUG, logger="clickhouse_connect"):
        try:
            raise OSError("connect to ch-secret.internal:8443 failed")
        except OSError:
            logger.warning("Unexpected Http Driver Exception", exc_info=True)
        logger.warning("Error executing HTTP request (%s)", "http://ch-secret.internal:8443")
        logger.debug("plain message")
    text = caplog.text
    assert "ch-secret.internal" not in text
    assert text.count("details withheld") == 2 and "plain message" in text
