"""ClickHouse's HTTP interface in front of one process's engine: what clickhouse-connect's clients talk to.

Per request: authenticate, reassemble the query (URL ``query`` + body, or multipart fields), split settings,
``param_*`` values and transport parameters, take the session and the query id, consult armed faults, then either
stream an ``INSERT``'s data into the engine, initiate an ``ON CLUSTER`` statement, or run the statement and send its
result with ClickHouse's headers. A ``SELECT`` in a block-wise format is streamed (chunked), block by block, while its
query id and session stay busy; before each block the query stops if ``KILL QUERY`` marked it, or if the client closed
the connection while ``readonly > 0`` and ``cancel_http_readonly_queries_on_client_close = 1`` (ClickHouse's rule);
a failed write ends it too (``processes.py`` keeps the record). ``uptime()`` is emulated (chdb has no server; its own answer is always 0): the
seconds since this process started, or since its last emulated restart; so is ``serverUUID()`` after an emulated
restart that lost the data directory (``faults.emulate_restart``), otherwise the engine answers it. Every exception leaves as ClickHouse's error response (status, exception-code
header, one-line body) so clients raise the same exception types with the same codes.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import select
import socket
import ssl
import time
import traceback
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit

from dpone_embedded import httpwire, processes
from dpone_embedded.ddl import QUEUE_TABLE_SQL, Initiator, ServerRestartedError, queue_params
from dpone_embedded.engine import Engine, EngineError, EngineResult, EngineStream, Handle
from dpone_embedded.layout import ProcessSpec
from dpone_embedded.processes import Process, Processes
from dpone_embedded.replicas import Replication
from dpone_embedded.sessions import Sessions
from dpone_embedded.sinks import Sink
from dpone_embedded.sqltext import (
    external_access,
    first_keyword,
    insert_with_data,
    kill_query,
    on_cluster,
    output_format,
    produces_result,
    quote_string,
    replace_call,
    replace_table_reference,
)
from dpone_embedded.store import Store

PREFIX_BYTES = 64 * 1024
_NOT_DDL = frozenset({"SELECT", "WITH", "INSERT", "SHOW", "DESCRIBE", "DESC", "EXISTS", "EXPLAIN", "SET", "USE", "("})
_NO_HANDLER = (
    "There is no handle {path}\n\nUse / or /ping for health checks.\nOr /replicas_status for more sophisticated "
    "health checks.\n\nSend queries from your program with POST method or GET /?query=...\n"
)


@dataclass
class EndpointContext:
    """What every request thread of one process shares."""

    spec: ProcessSpec
    engine: Engine
    store: Store
    replication: Replication
    sessions: Sessions = field(init=False)
    processes: Processes = field(init=False)
    initiator: Initiator = field(init=False)
    timezone: str = field(init=False)

    def __post_init__(self) -> None:
        self.sessions = Sessions(self.engine, lambda: self.store.started_at(self.spec.name))
        self.processes = Processes(self.engine)
        self.initiator = Initiator(self.spec, self.engine, self.store)
        self.timezone = self.engine.execute("SELECT timezone()").data.decode().strip()
        self.store.server_started(self.spec.name)

    def uptime_seconds(self) -> int:
        """Whole seconds since this process's server started (or its emulated restart, ``faults.py``)."""
        started = self.store.started_at(self.spec.name)
        return 0 if started is None else max(0, int(time.time() - started))


@dataclass
class Answer:
    """A successful response before encoding: body, format header (result statements only) and counters."""

    data: bytes
    fmt: str | None
    result: EngineResult | None = None
    stream: EngineStream | None = None
    """A result sent block by block instead of ``data``."""
    watch_client: bool = False
    """Stop the stream when the client closes the connection (``readonly > 0`` and
    ``cancel_http_readonly_queries_on_client_close = 1``)."""


class _LostResponseError(Exception):
    """The statement took effect; the armed fault says the client must not learn that."""


class EndpointServer(ThreadingHTTPServer):
    """The process's HTTP endpoint; with ``tls`` (certificate and key files) every connection is HTTPS only.

    The TLS handshake runs in the connection's own thread (a client that never completes it blocks nobody else), and
    the certificate files are read for each connection, so a rotated certificate applies to the next connection.
    A connection that does not speak TLS is closed without an answer: there is no plain-HTTP fallback.
    """

    daemon_threads = True
    request_queue_size = 128
    HANDSHAKE_TIMEOUT: float = 10.0

    def __init__(self, sock: socket.socket, context: EndpointContext, tls: tuple[str, str] | None = None) -> None:
        super().__init__(sock.getsockname()[:2], EndpointHandler, bind_and_activate=False)
        self.socket.close()
        self.socket = sock
        self.context = context
        self.tls = tls

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_cert_chain(*self.tls)
            request.settimeout(self.HANDSHAKE_TIMEOUT)
            try:
                request = context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return  # not TLS, or the client refused our certificate: nothing is served
            request.settimeout(None)
        super().finish_request(request, client_address)


class EndpointHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: EndpointServer
    _exception_tag = ""

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    # -- routing --------------------------------------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        origin = self.headers.get("Origin")
        port = self.server.server_address[1]
        scheme = "https" if self.server.tls is not None else "http"
        if origin is not None and origin not in (f"{scheme}://127.0.0.1:{port}", f"{scheme}://localhost:{port}"):
            # a web page the user visits must not drive the loopback cluster (the browser sends its Origin)
            httpwire.RequestBody(cast(io.BufferedReader, self.rfile), self.headers).drain()
            self._send(403, {"Content-Type": "text/plain; charset=UTF-8"}, b"Cross-origin requests are refused.\n")
            return
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        if url.path in ("/ping", "/replicas_status") or (url.path == "/" and method == "GET" and "query" not in params):
            httpwire.RequestBody(cast(io.BufferedReader, self.rfile), self.headers).drain()
            self._send(200, {"Content-Type": "text/html; charset=UTF-8"}, b"Ok.\n")
            return
        if url.path != "/":
            httpwire.RequestBody(cast(io.BufferedReader, self.rfile), self.headers).drain()
            self._send(404, {"Content-Type": "text/plain; charset=UTF-8"}, _NO_HANDLER.format(path=url.path).encode())
            return
        self._query(method, params)

    def _query(self, method: str, params: dict[str, str]) -> None:
        context = self.server.context
        query_id = params.get("query_id") or str(uuid.uuid4())
        self._exception_tag = httpwire.exception_tag()
        body = None
        try:
            body = httpwire.RequestBody(cast(io.BufferedReader, self.rfile), self.headers)
            self._authenticate(params)
            session_check = params.get("session_check") in ("1", "true")
            tail: bytes | None = None
            with (
                context.processes.running(query_id, "", context.spec.user) as process,
                context.sessions.session(
                    params.get("session_id"), params.get("session_timeout"), session_check
                ) as handle,
            ):
                answer, statement = self._execute(method, params, body, handle, process)
                if answer.stream is not None:
                    try:  # an error before the first block is still an ordinary error response
                        first = answer.stream.fetch()
                    except BaseException:
                        answer.stream.close()
                        raise
                    tail = self._stream_answer(answer, answer.stream, first, query_id, params, process)
                else:
                    process.finish()  # the statement took effect, whatever the response
                    self._after_effect(statement)  # a delayed response keeps its query id and session busy
        except (_LostResponseError, ServerRestartedError):
            self._drop_connection()
            return
        except EngineError as exc:
            self._send_error(exc, query_id, body)
            return
        except httpwire.UnsupportedCodingError as exc:
            self._send_error(context.engine.error(48, f"Unsupported Content-Encoding '{exc}'"), query_id, body)
            return
        except (ConnectionError, OSError):
            self.close_connection = True
            return
        except Exception as exc:  # noqa: BLE001 - a server answers every failure with an exception, never a hang-up
            traceback.print_exc()  # into the process log, for diagnosis
            failure = context.engine.error(1001, f"{type(exc).__name__}: {exc}")
            self._send_error(failure, query_id, body)
            return
        if answer.stream is None:
            self._send_answer(answer, query_id, params)
        elif tail:  # the end of a streamed body leaves after the session and the query id are free again
            with contextlib.suppress(OSError):
                self.wfile.write(tail)

    # -- the query pipeline ---------------------------------------------------------------------------------------

    def _execute(
        self,
        method: str,
        params: dict[str, str],
        body: httpwire.RequestBody,
        handle: Handle | None,
        process: Process,
    ) -> tuple[Answer, str]:
        context = self.server.context
        engine = context.engine
        content_type = self.headers.get("Content-Type") or ""
        if content_type.lower().startswith("multipart/form-data"):
            fields, files = httpwire.multipart_fields(content_type, body.read_all())
            if files:
                raise engine.error(48, "External data is not supported by the embedded cluster")
            params = {**params, **fields}
        settings = {
            key: value
            for key, value in params.items()
            if key not in httpwire.RESERVED_PARAMS and not key.startswith("param_")
        }
        query_params = {key[6:]: value for key, value in params.items() if key.startswith("param_")}
        if method == "GET" and settings.get("readonly", "0") == "0":
            settings["readonly"] = "2"
        database = params.get("database") or None
        lead = params.get("query", "").encode()
        prefix = body.read_prefix(PREFIX_BYTES)
        if lead and prefix:
            lead += b"\n"
        head = lead + prefix
        shape = insert_with_data(head.decode("latin-1"))
        if shape is not None:
            statement = head[: shape.data_start].decode(errors="replace").strip()
            process.query = statement
            self._confine(statement)
            self._before_effect(statement)
            answer = self._insert(shape, head, body, handle, database, settings)
            return answer, statement
        sql = (lead + body.read_all()).decode(errors="replace")
        if not sql.strip():
            raise engine.error(62, "Empty query")
        process.query = sql
        self._confine(sql)
        self._before_effect(sql)
        for table in ("processes", "query_log"):
            if table in sql:
                rewritten = replace_table_reference(sql, "system", table, processes.table_sql(table))
                if rewritten != sql:
                    query_params.update(context.processes.params(table))
                    sql = rewritten
        kill = kill_query(sql) if first_keyword(sql) == "KILL" else None
        if kill is not None:
            fmt = output_format(sql) or params.get("default_format") or "TabSeparated"
            return self._kill(kill, fmt, query_params), sql
        if first_keyword(sql) not in _NOT_DDL:
            clause = on_cluster(sql)
            if clause is not None:
                ddl = context.initiator.run(sql, handle=handle, database=database, settings=settings)
                if ddl.select is None:
                    return Answer(b"", None), sql
                fmt = output_format(sql) or params.get("default_format") or "TabSeparated"
                result = engine.execute(ddl.select, fmt, params=ddl.params)
                return Answer(result.data, fmt, result), sql
        if "uptime" in sql.lower():  # chdb has no server: its uptime() is always 0
            sql = replace_call(sql, "uptime", f"toUInt32({context.uptime_seconds()})")
        if "serveruuid" in sql.lower():  # a server recreated without its data directory (faults.emulate_restart)
            recreated = context.store.server_uuid(context.spec.name)
            if recreated is not None:
                sql = replace_call(sql, "serverUUID", f"toUUID('{recreated}')")
        if "distributed_ddl_queue" in sql:
            rewritten = replace_table_reference(sql, "system", "distributed_ddl_queue", QUEUE_TABLE_SQL)
            if rewritten != sql:
                query_params.update(queue_params(context.store))
                sql = rewritten
        is_result = produces_result(sql)
        fmt = output_format(sql) or params.get("default_format") or "TabSeparated"
        if first_keyword(sql) in ("SELECT", "WITH") and fmt.lower() in httpwire.STREAM_FORMATS:
            # a read has no effect to take first: a delayed or lost response happens before the stream opens, so a
            # delayed reader holds no table while it waits (a DROP meanwhile would wait on it under the engine lock)
            self._after_effect(sql)
            stream = context.replication.stream(
                sql, fmt, handle=handle, database=database, settings=settings, params=query_params
            )
            watch = settings.get("readonly", "0") not in ("", "0") and settings.get(
                "cancel_http_readonly_queries_on_client_close", "0"
            ).lower() in ("1", "true")
            return Answer(b"", fmt, stream=stream, watch_client=watch), sql
        result = context.replication.execute(
            sql, fmt, handle=handle, database=database, settings=settings, params=query_params
        )
        return Answer(result.data, fmt if is_result else None, result), sql

    def _kill(self, kill: Any, fmt: str, query_params: dict[str, str]) -> Answer:
        """``KILL QUERY``: the condition selects from the running queries, each match is marked cancelled."""
        context = self.server.context
        engine = context.engine
        if kill.on_cluster:
            raise engine.error(48, "KILL QUERY ON CLUSTER is not available on the embedded cluster")
        if kill.mode == "TEST":
            raise engine.error(48, "KILL QUERY ... TEST is not available on the embedded cluster")
        listing = {**query_params, **context.processes.params("processes")}
        found = engine.execute(
            f"SELECT query_id FROM {processes.table_sql('processes')} WHERE {kill.condition}",
            "JSONEachRow",
            params=listing,
        )
        ids = [json.loads(line)["query_id"] for line in found.data.decode().splitlines() if line.strip()]
        rows = context.processes.kill(ids, sync=kill.mode == "SYNC")
        result = engine.execute(
            "SELECT * FROM format(JSONEachRow, {__embedded_kill_structure:String}, {__embedded_kill_rows:String})",
            fmt,
            params={
                "__embedded_kill_structure": httpwire.escape_param(processes.KILL_STRUCTURE),
                "__embedded_kill_rows": httpwire.escape_param("\n".join(json.dumps(row) for row in rows)),
            },
        )
        return Answer(result.data, fmt, result)

    def _confine(self, sql: str) -> None:
        """Refuse a client statement that reaches files or hosts outside the cluster directory (Code 497)."""
        reach = external_access(sql)
        if reach is not None:
            raise self.server.context.engine.error(
                497, f"Not enough privileges: {reach} is not available on the embedded cluster (ACCESS_DENIED)"
            )

    def _insert(
        self,
        shape: Any,
        head: bytes,
        body: httpwire.RequestBody,
        handle: Handle | None,
        database: str | None,
        settings: dict[str, str],
    ) -> Answer:
        statement_head = shape.head.encode("latin-1").decode(errors="replace")
        insert_settings = shape.settings.encode("latin-1").decode(errors="replace")
        first = head[shape.data_start :]

        def statement(path: str) -> str:
            clause = f" SETTINGS {insert_settings}" if insert_settings else ""
            return f"{statement_head} FROM INFILE {quote_string(path)}{clause} FORMAT {shape.fmt}"

        def feed(sink: Sink) -> None:
            body.forget_prefix()  # the prefix is already part of ``head``
            if first:
                sink.write(first)
            body.feed(sink)

        result = self.server.context.replication.insert_stream(
            statement_head,
            insert_settings,
            shape.fmt,
            statement,
            feed,
            handle=handle,
            database=database,
            settings=settings,
        )
        return Answer(b"", None, result)

    # -- faults ---------------------------------------------------------------------------------------------------

    def _before_effect(self, statement: str) -> None:
        context = self.server.context
        fault = context.store.take(context.spec.name, ("fail_statement",), statement)
        if fault is not None:
            raise context.engine.error(int(fault.code or 0), f"Fault injected on {context.spec.name}")

    def _after_effect(self, statement: str) -> None:
        context = self.server.context
        fault = context.store.take(context.spec.name, ("lose_response", "delay"), statement)
        if fault is None:
            return
        if fault.kind == "delay":
            time.sleep(float(fault.seconds or 0.0))
            return
        raise _LostResponseError

    def _drop_connection(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    # -- responses ------------------------------------------------------------------------------------------------

    def _authenticate(self, params: dict[str, str]) -> None:
        spec = self.server.context.spec
        user = params.get("user") or self.headers.get("X-ClickHouse-User")
        password = params.get("password") or self.headers.get("X-ClickHouse-Key") or ""
        authorization = self.headers.get("Authorization") or ""
        if authorization.startswith("Basic "):
            try:
                user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
            except ValueError:
                user, password = "", "?"
        user = user or "default"
        if user != spec.user or password != spec.password:
            raise self.server.context.engine.error(
                516, f"{user}: Authentication failed: password is incorrect, or there is no user with such name"
            )

    def _common_headers(self, query_id: str) -> dict[str, str]:
        context = self.server.context
        return {
            "X-ClickHouse-Server-Display-Name": context.spec.name,
            "X-ClickHouse-Query-Id": query_id,
            "X-ClickHouse-Timezone": context.timezone,
            # every response of a query carries its tag (WriteBufferFromHTTP1ServerResponse::finishSendHeaders)
            "X-ClickHouse-Exception-Tag": self._exception_tag,
        }

    def _send_answer(self, answer: Answer, query_id: str, params: dict[str, str]) -> None:
        headers = self._common_headers(query_id)
        result = answer.result
        if result is not None:
            headers["X-ClickHouse-Summary"] = httpwire.summary_header(
                read_rows=result.rows_read,
                read_bytes=result.bytes_read,
                written_rows=result.rows_written,
                written_bytes=result.bytes_written,
                total_rows_to_read=result.rows_read,
                elapsed_ns=result.elapsed_ns,
            )
        data = answer.data
        if answer.fmt is not None:
            headers["X-ClickHouse-Format"] = answer.fmt
            headers["Content-Type"] = httpwire.content_type(answer.fmt)
        else:
            headers["Content-Type"] = "text/plain; charset=UTF-8"
        if data and params.get("enable_http_compression", "1") == "1":
            coding = httpwire.choose_coding(self.headers.get("Accept-Encoding") or "")
            if coding is not None:
                data = httpwire.encode(data, coding)
                headers["Content-Encoding"] = coding
        self._send(200, headers, data)

    def _stream_answer(
        self,
        answer: Answer,
        stream: EngineStream,
        first: Any,
        query_id: str,
        params: dict[str, str],
        process: Process,
    ) -> bytes | None:
        """Send a result block by block (chunked), stopping as ClickHouse stops a query; always ends the stream.

        Returns the end of the body (last chunk and terminator) for the caller to send once the session is released,
        or ``None`` when the body was cut short.
        """
        encoder = httpwire.StreamEncoder(None)
        try:
            headers = self._common_headers(query_id)
            headers["X-ClickHouse-Summary"] = httpwire.summary_header(
                read_rows=0, read_bytes=0, written_rows=0, written_bytes=0, total_rows_to_read=0, elapsed_ns=0
            )
            fmt = answer.fmt or "TabSeparated"
            headers["X-ClickHouse-Format"] = fmt
            headers["Content-Type"] = httpwire.content_type(fmt)
            coding = None
            if params.get("enable_http_compression", "1") == "1":
                coding = httpwire.choose_coding(self.headers.get("Accept-Encoding") or "")
            if coding is not None:
                headers["Content-Encoding"] = coding
            headers["Transfer-Encoding"] = "chunked"
            encoder = httpwire.StreamEncoder(coding)
            framing = httpwire.ResultFraming(fmt)
            self._write_head(200, headers)
            block = first
            while block is not None:
                # checked before each block is written, so a client that closed while the block was produced is seen
                # as gone (Code 394) before a write to its socket can fail (Code 210); ClickHouse checks the peer in
                # the query's progress callback, while the query runs (HTTPHandler::processQuery, checkPeerConnected)
                if process.kill.is_set() or (answer.watch_client and self._client_gone()):
                    stream.cancel()
                    raise self.server.context.engine.error(processes.QUERY_WAS_CANCELLED, "Query was cancelled")
                data, rows = framing.block(block.bytes() or b"", int(block.rows_read()))
                process.read_rows += int(block.rows_read())
                process.result_rows += rows
                self._write_chunk(encoder.encode(data))
                block = stream.fetch()
            process.finish()
            last = encoder.encode(framing.end()) + encoder.finish()
            return (f"{len(last):x}\r\n".encode() + last + b"\r\n" if last else b"") + b"0\r\n\r\n"
        except (_LostResponseError, ServerRestartedError):
            stream.cancel()
            self._drop_connection()
        except (EngineError, ValueError, ArithmeticError, LookupError) as exc:
            if not isinstance(exc, EngineError):
                exc = self.server.context.engine.error(1001, f"{type(exc).__name__}: {exc}")
            stream.cancel()
            process.fail(exc.code, exc.message)
            self.close_connection = True  # the body is cut short: the client sees an incomplete response
            with contextlib.suppress(OSError):
                # WriteBufferFromHTTP1ServerResponse::cancelWithException once the headers are sent: the tagged
                # exception block in a chunk of its own (compressed like the rest), then cancel: no end of the
                # compressed stream, no last chunk
                text = httpwire.error_body(exc.message, self.server.context.engine.version).decode()
                self._write_chunk(encoder.encode(httpwire.exception_block(text, self._exception_tag)))
        except OSError:
            stream.cancel()
            process.fail(processes.NETWORK_ERROR, "Connection reset by peer, while writing to socket")
            self.close_connection = True
        finally:
            stream.close()
        return None

    def _client_gone(self) -> bool:
        """Whether the client closed its connection (ClickHouse's ``checkPeerConnected``)."""
        sock = self.connection
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
            return socket.socket.recv(sock, 1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except (OSError, ValueError):
            return True

    def _write_head(self, status: int, headers: dict[str, str]) -> None:
        lines = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def _write_chunk(self, data: bytes) -> None:
        if data:  # an empty chunk would end the body
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _send_error(self, exc: EngineError, query_id: str, body: httpwire.RequestBody | None) -> None:
        if body is None:
            self.close_connection = True
        else:
            try:
                body.drain()
            except (ConnectionError, OSError, ValueError):
                self.close_connection = True
        headers = self._common_headers(query_id)
        headers["X-ClickHouse-Exception-Code"] = str(exc.code)
        headers["Content-Type"] = "text/plain; charset=UTF-8"
        self._send(
            httpwire.http_status(exc.name),
            headers,
            httpwire.error_body(exc.message, self.server.context.engine.version),
        )

    def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
        lines = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}"]
        headers = {**headers, "Content-Length": str(len(data))}
        if self.close_connection:
            headers["Connection"] = "close"
        lines += [f"{name}: {value}" for name, value in headers.items()]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        try:
            if len(data) <= PREFIX_BYTES:
                self.wfile.write(head + data)
            else:
                self.wfile.write(head)
                self.wfile.write(data)
        except OSError:
            self.close_connection = True
