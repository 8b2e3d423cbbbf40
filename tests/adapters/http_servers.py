"""Tiny loopback HTTP servers that misbehave on purpose (count requests, drop responses, redirect)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


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
