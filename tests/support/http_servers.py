"""Tiny loopback HTTP servers that misbehave on purpose (count requests, drop responses, redirect, balance, lose the
reply of a statement the server ran)."""

from __future__ import annotations

import http.client
import re
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit


@dataclass
class Recorder:
    port: int = 0
    requests: list[bytes] = field(default_factory=list)


def _read_request(conn: socket.socket) -> bytes:
    """Read one HTTP request (headers, then a Content-Length or chunked body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    headers = head.lower()
    if b"transfer-encoding: chunked" in headers:
        while not body.endswith(b"0\r\n\r\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
    else:
        length = 0
        for line in headers.split(b"\r\n"):
            if line.startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
    return head + b"\r\n\r\n" + body


@contextmanager
def serve(reply: bytes | None) -> Iterator[Recorder]:
    """Accept connections; record each request; answer ``reply`` (or close without answering when ``None``)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    recorder = Recorder(port=listener.getsockname()[1])
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                request = _read_request(conn)
                if request:
                    recorder.requests.append(request)
                    if reply is not None:
                        conn.sendall(reply)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield recorder
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def ok_reply(body: bytes = b"1\n") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body


def redirect_reply(port: int) -> bytes:
    return (
        b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:"
        + str(port).encode()
        + b"/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )


_HOP_BY_HOP: Final = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "proxy-connection", "te", "upgrade"}
)


@dataclass
class Balancer:
    """A layer-7 balancer in front of several HTTP servers; ``routed`` lists ``(backend, query_id)`` per request."""

    port: int = 0
    routed: list[tuple[str, str]] = field(default_factory=list)


Route = Callable[[dict[str, list[str]], int], str]


class ReplyLoss:
    """Armed statement patterns; each loses the reply of the first statement it matches, once (thread-safe)."""

    def __init__(self) -> None:
        self.armed: list[re.Pattern[str]] = []
        self.lost: list[str] = []
        self._lock = threading.Lock()

    def arm(self, pattern: str) -> None:
        with self._lock:
            self.armed.append(re.compile(pattern, re.DOTALL))

    def __call__(self, statement: str) -> bool:
        with self._lock:
            for pattern in self.armed:
                if pattern.search(statement):
                    self.armed.remove(pattern)
                    self.lost.append(statement[:200])
                    return True
        return False


def statement_of(parameters: dict[str, list[str]], body: bytes, content_encoding: str | None) -> str:
    """What a ClickHouse HTTP request asks the server to run: the ``query`` parameter followed by the body (the server
    concatenates them), the body only where it is not compressed."""
    text = parameters.get("query", [""])[0]
    if not content_encoding:
        text += body.decode("utf-8", errors="replace")
    return text


@contextmanager
def balance(
    backends: dict[str, tuple[str, int]],
    route: Route,
    drop: frozenset[str] = frozenset(),
    lose: Callable[[str], bool] | None = None,
) -> Iterator[Balancer]:
    """Forward each request to ``backends[route(url_parameters, request_number)]``, as a balancer does per request.

    ``drop`` names URL parameters removed before forwarding (an intermediary that terminates sessions itself).
    Bodies are forwarded as they came (compressed or not) and answers are returned whole, with their status and
    ClickHouse headers, so the client sees exactly what the chosen server said. When ``lose`` answers true for a
    request's statement (:func:`statement_of`), the server's whole answer is read and the client's connection is
    closed without it: the effect happened, the reply is lost.
    """
    balancer = Balancer()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            return None

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return body
                    body += self.rfile.read(size)
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _forward(self) -> None:
            url = urlsplit(self.path)
            parameters = parse_qs(url.query, keep_blank_values=True)
            with lock:
                number = len(balancer.routed)
                name = route(parameters, number)
                balancer.routed.append((name, parameters.get("query_id", [""])[0]))
            kept = urlencode([(k, v) for k, values in parameters.items() if k not in drop for v in values])
            body = self._body()
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            upstream = http.client.HTTPConnection(*backends[name], timeout=60)
            try:
                upstream.request(self.command, urlunsplit(("", "", url.path, kept, "")), body=body, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
            finally:
                upstream.close()
            if lose is not None and lose(statement_of(parameters, body, self.headers.get("Content-Encoding"))):
                self.close_connection = True
                return
            self.send_response(answer.status, answer.reason)
            for key, value in answer.getheaders():
                if key.lower() not in _HOP_BY_HOP:
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _forward  # noqa: N815 - the handler's method names

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    balancer.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield balancer
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def relay(server: tuple[str, int], lose: Callable[[str], bool]) -> Iterator[Balancer]:
    """A transparent relay in front of one server that loses the replies ``lose`` picks (see :func:`balance`)."""
    with balance({"server": server}, lambda parameters, number: "server", lose=lose) as front:
        yield front
