"""The relay the real-cluster contract backend loses replies with: it forwards a request unchanged, reads the server's
whole answer and, for an armed statement, closes the client's connection without it (the server ran it; the client
never learns the outcome). Every other request gets the server's answer byte for byte."""

from __future__ import annotations

import http.client

import pytest

from tests.support.http_servers import ReplyLoss, ok_reply, relay, serve

pytestmark = pytest.mark.adapter


def _post(port: int, path: str, body: bytes) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    connection.request("POST", path, body=body)
    return connection.getresponse()


def test_an_armed_statement_reaches_the_server_and_its_reply_is_lost_once() -> None:
    loss = ReplyLoss()
    with serve(ok_reply(b"7\n")) as server, relay(("127.0.0.1", server.port), loss) as front:
        loss.arm("^INSERT INTO")
        assert _post(front.port, "/?query=SELECT+1", b"").read() == b"7\n"  # not armed for it: answered
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            _post(front.port, "/?query=INSERT+INTO+t+FORMAT+Native", b"\x01\x02")
        assert len(server.requests) == 2, "the lost statement reached the server"
        assert server.requests[-1].endswith(b"\x01\x02") and b"INSERT+INTO+t" in server.requests[-1]
        assert _post(front.port, "/?query=INSERT+INTO+t+FORMAT+Native", b"\x03").read() == b"7\n"  # once only
        assert loss.armed == [] and len(loss.lost) == 1 and len(server.requests) == 3


def test_a_statement_in_the_body_is_matched_and_a_compressed_body_is_not_read() -> None:
    loss = ReplyLoss()
    with serve(ok_reply()) as server, relay(("127.0.0.1", server.port), loss) as front:
        loss.arm("ON CLUSTER")
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            _post(front.port, "/?session_id=s", b"EXCHANGE TABLES d.a AND d.b ON CLUSTER c")
        loss.arm("ON CLUSTER")
        connection = http.client.HTTPConnection("127.0.0.1", front.port, timeout=5)
        connection.request("POST", "/", body=b"ON CLUSTER", headers={"Content-Encoding": "lz4"})
        assert connection.getresponse().read() == b"1\n"
        assert len(server.requests) == 2 and len(loss.armed) == 1
