"""HTTP session checks that hold on the embedded cluster and on a real ClickHouse server alike.

``test_http_contract.py`` runs them on the embedded cluster and ``test_real_cluster.py`` on the docker-compose one,
so the double's session emulation is held to what a real server answers. A check gets a clickhouse-connect client
bound to a session of its own.
"""

from __future__ import annotations

from typing import Any


def check_request_settings_bind_only_the_request(client: Any) -> None:
    """A request's settings bind that request only (``HTTPHandler::processQuery`` applies them to the query's
    context, a copy of the session's), whatever the session ``SET`` before or after it."""
    current = "SELECT getSetting('log_comment'), getSetting('max_threads')"
    assert client.query(current, settings={"log_comment": "one", "max_threads": 2}).result_rows == [("one", 2)]
    default_threads = client.query(current).result_rows[0][1]
    assert client.query(current).result_rows == [("", default_threads)]
    client.command("SET log_comment = 'session'")
    assert client.query(current, settings={"log_comment": "two"}).result_rows == [("two", default_threads)]
    assert client.query(current).result_rows == [("session", default_threads)]
    client.command("SET max_threads = 3")
    assert client.query(current, settings={"max_threads": 1}).result_rows == [("session", 1)]
    assert client.query(current).result_rows == [("session", 3)]
