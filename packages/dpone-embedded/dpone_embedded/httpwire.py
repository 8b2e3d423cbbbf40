"""Byte-level pieces of ClickHouse's HTTP interface: request bodies, content codings, headers, error bodies.

Kept apart from the request handler so each rule is stated once: how a body is framed (``Content-Length`` or
chunked), how it is decoded (``Content-Encoding``), which response coding a client gets (ClickHouse's preference
order over ``Accept-Encoding``), which HTTP status an exception code maps to, and how ClickHouse spells an error.
"""

from __future__ import annotations

import io
import json
import secrets
import string
import zlib
from collections.abc import Iterator
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

import lz4.frame

from dpone_embedded.sinks import Sink

try:  # clickhouse-connect depends on backports.zstd below Python 3.14
    from backports import zstd as _zstd
except ImportError:  # pragma: no cover - Python 3.14+
    from compression import zstd as _zstd  # type: ignore[no-redef]

CHUNK = 1 << 20

RESPONSE_CODINGS = ("zstd", "lz4", "gzip", "deflate")
"""Codings the endpoint can produce, in ClickHouse's order of preference (``br`` is not available here)."""

RESERVED_PARAMS = frozenset(
    {
        "query",
        "database",
        "default_format",
        "session_id",
        "session_timeout",
        "session_check",
        "query_id",
        "quota_key",
        "user",
        "password",
        "compress",
        "decompress",
        "buffer_size",
        "wait_end_of_query",
        "client_protocol_version",
        "role",
        "stacktrace",
        "send_progress_in_http_headers",
        "http_headers_progress_interval_ms",
        "enable_http_compression",
        "http_wait_end_of_query",
        "http_response_buffer_size",
    }
)
"""URL parameters that steer the HTTP layer; every other non-``param_`` parameter is a query setting."""

_BAD_REQUEST = {
    "BAD_ARGUMENTS", "CANNOT_COMPILE_REGEXP", "CANNOT_PARSE_TEXT", "CANNOT_PARSE_ESCAPE_SEQUENCE",
    "CANNOT_PARSE_QUOTED_STRING", "CANNOT_PARSE_DATE", "CANNOT_PARSE_DATETIME", "CANNOT_PARSE_NUMBER",
    "CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING", "CANNOT_PARSE_IPV4", "CANNOT_PARSE_IPV6",
    "CANNOT_PARSE_INPUT_ASSERTION_FAILED", "CANNOT_PARSE_UUID", "DUPLICATE_COLUMN", "ILLEGAL_COLUMN",
    "UNKNOWN_ELEMENT_IN_AST", "UNKNOWN_TYPE_OF_AST_NODE", "THERE_IS_NO_COLUMN", "TOO_DEEP_AST", "TOO_BIG_AST",
    "UNEXPECTED_AST_STRUCTURE", "SYNTAX_ERROR", "INCORRECT_DATA", "TYPE_MISMATCH",
    "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE",
}  # fmt: skip
_NOT_FOUND = {
    "UNKNOWN_TABLE", "UNKNOWN_FUNCTION", "UNKNOWN_IDENTIFIER", "UNKNOWN_TYPE", "UNKNOWN_STORAGE",
    "UNKNOWN_DATABASE", "UNKNOWN_SETTING", "UNKNOWN_DIRECTION_OF_SORTING", "UNKNOWN_AGGREGATE_FUNCTION",
    "UNKNOWN_FORMAT", "UNKNOWN_DATABASE_ENGINE", "UNKNOWN_TYPE_OF_QUERY", "UNKNOWN_ROLE",
}  # fmt: skip
_STATUS_BY_NAME = {
    "REQUIRED_PASSWORD": 401,
    "UNKNOWN_USER": 403,
    "WRONG_PASSWORD": 403,
    "AUTHENTICATION_FAILED": 403,
    "SET_NON_GRANTED_ROLE": 403,
    "ACCESS_DENIED": 403,
    "QUERY_IS_TOO_LARGE": 413,
    "NOT_IMPLEMENTED": 501,
    "SOCKET_TIMEOUT": 503,
    "CANNOT_OPEN_FILE": 503,
    "HTTP_LENGTH_REQUIRED": 411,
    "TIMEOUT_EXCEEDED": 408,
    "CANNOT_SCHEDULE_TASK": 503,
    "UNSUPPORTED_MEDIA_TYPE": 415,
}


def http_status(error_name: str) -> int:
    """ClickHouse's mapping of an exception to an HTTP status (``exceptionCodeToHTTPStatus``)."""
    if error_name in _BAD_REQUEST:
        return 400
    if error_name in _NOT_FOUND:
        return 404
    return _STATUS_BY_NAME.get(error_name, 500)


_CONTENT_TYPES = {
    "tabseparated": "text/tab-separated-values; charset=UTF-8",
    "tsv": "text/tab-separated-values; charset=UTF-8",
    "csv": "text/csv; charset=UTF-8; header=absent",
    "csvwithnames": "text/csv; charset=UTF-8; header=present",
    "json": "application/json; charset=UTF-8",
    "jsoncompact": "application/json; charset=UTF-8",
    "jsoneachrow": "application/x-ndjson; charset=UTF-8",
    "xml": "application/xml; charset=UTF-8",
}
_BINARY_FORMATS = ("native", "rowbinary", "arrow", "parquet", "orc", "avro", "protobuf", "capnproto", "msgpack", "npy")


def content_type(fmt: str) -> str:
    lowered = fmt.lower()
    if lowered in _CONTENT_TYPES:
        return _CONTENT_TYPES[lowered]
    if lowered.startswith(_BINARY_FORMATS):
        return "application/octet-stream"
    if lowered.startswith(("tabseparated", "tsv")):
        return _CONTENT_TYPES["tsv"]
    return "text/plain; charset=UTF-8"


def summary_header(**counters: int) -> str:
    """``X-ClickHouse-Summary``: ClickHouse sends every counter as a decimal string."""
    return json.dumps({name: str(value) for name, value in counters.items()}, separators=(",", ":"))


def error_body(message: str, version: str) -> bytes:
    """ClickHouse's plain-text exception body: the message and the server version, one line."""
    return f"{message} (version {version} (official build))\n".encode()


EXCEPTION_MARKER = "__exception__"
EXCEPTION_TAG_LENGTH = 16
MAX_EXCEPTION_SIZE = 16 * 1024
_EXCEPTION_FRAME = 2 + len(EXCEPTION_MARKER) + 2 + EXCEPTION_TAG_LENGTH + 2 + 8 + 1 + EXCEPTION_TAG_LENGTH + 2
_EXCEPTION_FRAME += len(EXCEPTION_MARKER) + 2


def exception_tag() -> str:
    """A response's ``X-ClickHouse-Exception-Tag``: 16 random lowercase letters, fresh for every response
    (``WriteBufferFromHTTP1ServerResponse``'s constructor, ``getRandomASCIIString(EXCEPTION_TAG_LENGTH)``)."""
    return "".join(secrets.choice(string.ascii_lowercase) for _ in range(EXCEPTION_TAG_LENGTH))


def exception_block(message: str, tag: str) -> bytes:
    """The block a server writes into a response body whose headers are already sent when the query fails.

    ``WriteBufferFromHTTP1ServerResponse::cancelWithException`` (src/Server/HTTP/WriteBufferFromHTTPServerResponse.cpp,
    ClickHouse 25.11 and later): ``\\r\\n__exception__\\r\\n<tag>\\r\\n<message>\\n<length> <tag>\\r\\n__exception__\\r\\n``,
    the message cut to fit 16 KiB with the frame, ``length`` counting the message and its newline. The server then
    cancels the buffer: no last chunk follows and the connection closes.
    """
    data = message.encode()[: MAX_EXCEPTION_SIZE - _EXCEPTION_FRAME]
    if not data.endswith(b"\n"):
        data += b"\n"
    head = f"\r\n{EXCEPTION_MARKER}\r\n{tag}\r\n".encode()
    return head + data + f"{len(data)} {tag}\r\n{EXCEPTION_MARKER}\r\n".encode()


def choose_coding(accept_encoding: str) -> str | None:
    """The response coding ClickHouse would pick for this ``Accept-Encoding`` (first match in its order)."""
    offered = {part.split(";")[0].strip().lower() for part in accept_encoding.split(",") if part.strip()}
    for coding in RESPONSE_CODINGS:
        if coding in offered:
            return coding
    return None


def encode(data: bytes, coding: str | None) -> bytes:
    if coding is None:
        return data
    if coding == "zstd":
        return bytes(_zstd.compress(data, 1))
    if coding == "lz4":
        return bytes(lz4.frame.compress(data))
    if coding == "gzip":
        compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
        return compressor.compress(data) + compressor.flush()
    if coding == "deflate":
        return zlib.compress(data, 1)
    raise ValueError(coding)


STREAM_FORMATS = frozenset(
    {"arrowstream", "native", "tabseparated", "tsv", "tabseparatedraw", "tsvraw", "csv", "rowbinary", "jsoneachrow"}
)
"""Result formats sent block by block: each block is framed on its own (``ArrowStream`` is re-framed as one stream)."""


class StreamEncoder:
    """One response coding applied chunk by chunk, each chunk flushed so the client can decode it at once."""

    def __init__(self, coding: str | None) -> None:
        self.coding = coding
        self._zstd: Any = _zstd.ZstdCompressor(1) if coding == "zstd" else None
        self._lz4: Any = lz4.frame.LZ4FrameCompressor(auto_flush=True) if coding == "lz4" else None
        self._zlib: Any = None
        if coding in ("gzip", "deflate"):
            self._zlib = zlib.compressobj(1, zlib.DEFLATED, 31 if coding == "gzip" else 15)
        self._started = False

    def encode(self, data: bytes) -> bytes:
        if self._zstd is not None:
            return bytes(self._zstd.compress(data, _zstd.ZstdCompressor.FLUSH_BLOCK))
        if self._lz4 is not None:
            head = b"" if self._started else self._lz4.begin()
            self._started = True
            return bytes(head + self._lz4.compress(data))
        if self._zlib is not None:
            return bytes(self._zlib.compress(data) + self._zlib.flush(zlib.Z_SYNC_FLUSH))
        return data

    def finish(self) -> bytes:
        if self._zstd is not None:
            return bytes(self._zstd.flush(_zstd.ZstdCompressor.FLUSH_FRAME))
        if self._lz4 is not None:
            head = b"" if self._started else self._lz4.begin()
            self._started = True
            return bytes(head + self._lz4.flush())
        if self._zlib is not None:
            return bytes(self._zlib.flush())
        return b""


class _Collect:
    """A write-only file for pyarrow that hands out what was written since the last ``take``."""

    closed = False

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._total = 0

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._parts.append(chunk)
        self._total += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self._total

    def flush(self) -> None:
        return

    def writable(self) -> bool:
        return True

    def take(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data


class ResultFraming:
    """The body bytes of each streamed block, and the rows it holds.

    The engine encodes each block as a complete result of its own; ``ArrowStream`` blocks are re-framed into one
    IPC stream (one schema message, the batches, one end-of-stream marker), the other :data:`STREAM_FORMATS` simply
    follow each other.
    """

    def __init__(self, fmt: str) -> None:
        self._arrow = fmt.lower() == "arrowstream"
        self._sink = _Collect()
        self._writer: Any = None

    def block(self, data: bytes, rows: int) -> tuple[bytes, int]:
        if not self._arrow:
            return data, rows
        import pyarrow as pa

        reader = pa.ipc.open_stream(data)
        if self._writer is None:
            self._writer = pa.ipc.new_stream(pa.PythonFile(self._sink, mode="w"), reader.schema)
        produced = 0
        for batch in reader:
            self._writer.write_batch(batch)
            produced += batch.num_rows
        return self._sink.take(), produced

    def end(self) -> bytes:
        if self._writer is None:
            return b""
        self._writer.close()
        return self._sink.take()


class UnsupportedCodingError(ValueError):
    """The request body uses a ``Content-Encoding`` this endpoint cannot decode."""


_DECODERS: dict[str, Any] = {
    "gzip": lambda: zlib.decompressobj(31),
    "deflate": zlib.decompressobj,
    "zstd": _zstd.ZstdDecompressor,
    "lz4": lz4.frame.LZ4FrameDecompressor,
}


class _Decoder:
    """Streaming decoder for a body that may hold several frames/members back to back (clients send one per block)."""

    def __init__(self, coding: str) -> None:
        if coding not in _DECODERS:
            raise UnsupportedCodingError(coding)
        self._factory = _DECODERS[coding]
        self._current = self._factory()

    def decompress(self, data: bytes) -> bytes:
        out = []
        while data:
            out.append(self._current.decompress(data))
            if getattr(self._current, "eof", False):
                data = self._current.unused_data
                self._current = self._factory()
            else:
                data = b""
        return b"".join(out)


class RequestBody:
    """The request body as a stream of decoded chunks; it can always be drained to keep the connection in sync."""

    def __init__(self, rfile: io.BufferedReader, headers: Any) -> None:
        self._rfile = rfile
        self._chunked = "chunked" in (headers.get("Transfer-Encoding") or "").lower()
        length = headers.get("Content-Length")
        self._remaining = int(length) if length and not self._chunked else 0
        self._chunk_left = 0
        self._done = not self._chunked and self._remaining == 0
        coding = (headers.get("Content-Encoding") or "").strip().lower()
        self.coding = coding if coding not in ("", "identity") else None
        self._decode: _Decoder | None = _Decoder(self.coding) if self.coding else None
        self._pushback: list[bytes] = []

    @property
    def raw_empty(self) -> bool:
        return self._done and not self._pushback

    def _raw(self, limit: int = CHUNK) -> bytes:
        if self._done:
            return b""
        if not self._chunked:
            data = self._rfile.read(min(limit, self._remaining))
            if not data:
                raise ConnectionError("request body ended early")
            self._remaining -= len(data)
            self._done = self._remaining == 0
            return data
        if self._chunk_left == 0:
            line = self._rfile.readline(1024)
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self._rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass
                self._done = True
                return b""
            self._chunk_left = size
        data = self._rfile.read(min(limit, self._chunk_left))
        if not data:
            raise ConnectionError("request body ended early")
        self._chunk_left -= len(data)
        if self._chunk_left == 0:
            self._rfile.readline(16)
        return data

    def chunks(self, limit: int = CHUNK) -> Iterator[bytes]:
        while self._pushback:
            yield self._pushback.pop(0)
        while not self._done:
            data = self._raw(limit)
            if self._decode is not None:
                data = self._decode.decompress(data)
            if data:
                yield data

    def read_prefix(self, size: int) -> bytes:
        """At least ``size`` decoded bytes (or all of them); they are handed out again by ``chunks``."""
        parts: list[bytes] = []
        total = 0
        for chunk in self.chunks(size):
            parts.append(chunk)
            total += len(chunk)
            if total >= size:
                break
        prefix = b"".join(parts)
        self._pushback = [prefix] if prefix else []
        return prefix

    def feed(self, sink: Sink) -> None:
        """Deliver the rest of the body into ``sink``: spliced from the socket when the body is not content-coded
        (whole, or chunk by chunk for chunked framing), through Python otherwise."""
        for chunk in self._pushback:
            sink.write(chunk)
        self._pushback = []
        if self._decode is not None or not sink.can_splice:
            for chunk in self.chunks():
                sink.write(chunk)
            return
        if not self._chunked:
            self._splice(sink, self._remaining)
            self._remaining = 0
            self._done = True
            return
        while not self._done:
            if self._chunk_left == 0:
                size = int(self._rfile.readline(1024).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self._rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    self._done = True
                    return
                self._chunk_left = size
            self._splice(sink, self._chunk_left)
            self._chunk_left = 0
            self._rfile.readline(16)

    def _splice(self, sink: Sink, count: int) -> None:
        """Move ``count`` body bytes into ``sink``: first what the buffered reader holds, then from the socket."""
        if count:
            buffered = self._rfile.peek(1)[:count]
            if buffered:
                sink.write(self._rfile.read(len(buffered)))
                count -= len(buffered)
        source = self._rfile.fileno()
        while count:
            moved = sink.splice_from(source, min(count, CHUNK))
            if moved <= 0:
                raise ConnectionError("request body ended early")
            count -= moved

    def forget_prefix(self) -> None:
        """Drop the bytes :meth:`read_prefix` handed back: the caller has consumed them."""
        self._pushback = []

    def read_all(self) -> bytes:
        return b"".join(self.chunks())

    def drain(self) -> None:
        self._pushback = []
        self._decode = None
        while not self._done:
            self._raw()


def multipart_fields(content_type_header: str, body: bytes) -> tuple[dict[str, str], list[str]]:
    """Text fields of a ``multipart/form-data`` body, and the names of file fields (external data)."""
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type_header.encode("latin-1") + b"\r\n\r\n" + body
    )
    fields: dict[str, str] = {}
    files: list[str] = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        if part.get_filename():
            files.append(name)
            continue
        payload = part.get_payload(decode=True)
        fields[name] = payload.decode() if isinstance(payload, bytes) else ""
    return fields, files


def escape_param(value: str) -> str:
    """A query parameter value in ClickHouse's escaped form (how ``param_*`` values travel)."""
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
