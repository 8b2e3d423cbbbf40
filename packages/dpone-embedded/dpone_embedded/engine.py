"""The real ClickHouse engine of one process (chdb), serialized behind one lock, with per-session handles.

chdb hosts one engine per OS process. Each chdb connection handle keeps its own ``USE`` and ``SET`` state, which is
exactly what a ClickHouse HTTP session is, so a session gets its own handle and a session-less request gets a fresh
handle that is closed afterwards (its ``SET``/``USE`` die with it, as on a server). Calls into the engine are
serialized per process: the HTTP server stays threaded, so pings and slow clients never wait for the engine, but
two statements never run inside the engine at once.

A result can leave the engine as a stream too (:meth:`Engine.stream`): chdb produces it block by block, each fetch
holds the engine lock and nothing holds it between fetches, so other statements run while a client reads slowly, and
a cancelled stream stops producing at once. An open stream holds its tables as a running query does: a statement that
needs one exclusively (``DROP``, ``EXCHANGE``) waits for the stream under the engine lock, and the stream cannot fetch
meanwhile, so a reader that stalls mid-result can stall that member (a delayed read waits before its stream opens).

Insert data reaches the engine as a stream: the endpoint writes the request body into a FIFO that the engine reads
with ``INSERT ... FROM INFILE``, so the body is parsed while it is still arriving and never held in memory whole.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chdb

from dpone_embedded.replicated_sql import replicated_engine
from dpone_embedded.sinks import FifoSink, Sink, SpoolSink
from dpone_embedded.sqltext import RESULT_KEYWORDS, first_keyword, quote_identifier, quote_string

# chdb and chdb-core both ship ``chdb/__init__.py``; whichever was installed last wins, and one of them declares
# ``connect`` untyped. Binding it to a typed name keeps type checking independent of the install order.
_connect: Callable[[str], Any] = chdb.connect

_CODE_RE = re.compile(r"Code: (\d+)\.")
_NAME_RE = re.compile(r"\(([A-Z][A-Z0-9_]+)\)\s*$")
_SETTING_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_KEEPS_SESSION_SETTINGS = RESULT_KEYWORDS | {"INSERT"}
"""Statements that cannot change a session's own settings (a ``SETTINGS`` clause binds only its statement)."""

SEEK_FORMATS = frozenset({"parquet", "arrow", "orc", "npy"})
"""Input formats whose readers need a seekable file: their bodies are spooled to a file, not streamed via a FIFO."""


class EngineError(Exception):
    """A ClickHouse exception: numeric code, symbolic name and ClickHouse's message text (``Code: N. DB::...``)."""

    def __init__(self, code: int, message: str, name: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.name = name

    @classmethod
    def from_engine(cls, exc: BaseException) -> EngineError:
        text = str(exc).strip()
        start = text.find("Code: ")
        if start > 0:
            text = text[start:]
        match = _CODE_RE.search(text)
        code = int(match.group(1)) if match else 1001
        name_match = _NAME_RE.search(text)
        if not match:
            text = f"Code: 1001. DB::Exception: {text}. (STD_EXCEPTION)"
        return cls(code, text, name_match.group(1) if name_match else "STD_EXCEPTION")


@dataclass(frozen=True)
class EngineResult:
    data: bytes
    rows_read: int = 0
    bytes_read: int = 0
    rows_written: int = 0
    bytes_written: int = 0
    elapsed_ns: int = 0


class Handle:
    """One chdb connection: a session's (or one request's) ``USE``/``SET`` state.

    ``settings`` remembers the session's own value of each setting a request has overridden (value, ``changed``), so
    the next request that overrides it restores it without reading ``system.settings`` again (a read of that table
    costs the engine about four times a ``SELECT 1``). Only the session's own statements change those values: any
    statement that is not a read or an ``INSERT`` forgets them (``SET``, ``SET ROLE``, ``USE`` ...).
    """

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.database: str | None = None
        self.settings: dict[str, tuple[str, bool]] = {}

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.connection.close()


class EngineStream:
    """A result being produced block by block (:meth:`Engine.stream`): ``fetch`` until ``None``, ``cancel`` to stop."""

    def __init__(self, engine: Engine, handle: Handle, own: bool, restore: dict[str, tuple[str, bool]], result: Any):
        self._engine = engine
        self._handle = handle
        self._own = own
        self._restore = restore
        self._result: Any = result

    def fetch(self) -> Any:
        """The next block (chdb's result object: ``bytes()``, ``rows_read()``), or ``None`` at the end."""
        if self._result is None:
            return None
        with self._engine.lock:
            try:
                block = self._result.fetch()
            except Exception as exc:  # noqa: BLE001 - chdb raises plain exceptions carrying ClickHouse errors
                self._result = None
                raise EngineError.from_engine(exc) from None
        if block is None:
            self._result = None
        return block

    def cancel(self) -> None:
        """Stop producing: the engine abandons the query."""
        result, self._result = self._result, None
        if result is not None:
            with self._engine.lock, contextlib.suppress(Exception):
                result.cancel()

    def close(self) -> None:
        """Cancel what is left, restore the session's settings (or close the one-request handle)."""
        self.cancel()
        with self._engine.lock:
            if self._restore:
                self._engine._restore(self._handle, self._restore)
            if self._own:
                self._handle.close()


class Engine:
    """The process's engine. ``execute`` and ``insert_stream`` are the only ways in."""

    def __init__(self, data_dir: Path, config_file: Path, spool_dir: Path) -> None:
        self._uri = f"file:{data_dir}?config-file={config_file}"
        self._spool = Path(spool_dir)
        self._spool.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self._root = _connect(self._uri)  # keeps the engine alive while handles come and go
        self.version = self._root.query("SELECT version()", "TabSeparated").bytes().decode().strip()
        rows = self._root.query(
            "SELECT number, errorCodeToName(number) FROM numbers(2000) WHERE errorCodeToName(number) != ''",
            "TabSeparated",
        )
        self.error_names: dict[int, str] = {}
        for line in rows.bytes().decode().splitlines():
            code, name = line.split("\t")
            self.error_names[int(code)] = name
        self.error_codes = {name: code for code, name in self.error_names.items()}

    def error(self, code: int, text: str) -> EngineError:
        """An emulated ClickHouse exception with the engine's own name for ``code``."""
        name = self.error_names.get(code, "UNKNOWN_EXCEPTION")
        return EngineError(code, f"Code: {code}. DB::Exception: {text}. ({name})", name)

    def open_handle(self) -> Handle:
        with self.lock:
            return Handle(_connect(self._uri))

    def close(self) -> None:
        with self.lock, contextlib.suppress(Exception):
            self._root.close()

    # -- statements -----------------------------------------------------------------------------------------------

    def execute(
        self,
        sql: str,
        fmt: str = "TabSeparated",
        *,
        handle: Handle | None = None,
        database: str | None = None,
        settings: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> EngineResult:
        """Run one statement; ``handle`` is a session's handle, ``None`` for a one-request handle."""
        engine_name = replicated_engine(sql) if "Replicated" in sql else None
        if engine_name is not None:
            # chdb's own replication would hang the engine: replicas reach it as local tables (replicas.py)
            raise self.error(48, f"{engine_name} is not available to the engine of the embedded cluster")
        with self.lock:
            own = handle is None
            current = self.open_handle() if handle is None else handle
            try:
                return self._run(current, own, sql, fmt, database, dict(settings or {}), dict(params or {}))
            finally:
                if own:
                    current.close()

    def stream(
        self,
        sql: str,
        fmt: str,
        *,
        handle: Handle | None = None,
        database: str | None = None,
        settings: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> EngineStream:
        """Start one result statement whose blocks are fetched one at a time (close the stream when done)."""
        with self.lock:
            own = handle is None
            current = self.open_handle() if handle is None else handle
            restore: dict[str, tuple[str, bool]] = {}
            try:
                values = self._prepare(current, own, sql, database, dict(settings or {}))
                if values:
                    if not own:
                        restore = self._snapshot(current, values)
                    current.connection.query("SET " + _assignments(values), "TabSeparated")
                result = current.connection.send_query(sql, fmt, params=dict(params or {}))
            except Exception as exc:
                if restore:
                    self._restore(current, restore)
                if own:
                    current.close()
                if isinstance(exc, EngineError):
                    raise
                raise EngineError.from_engine(exc) from None
        return EngineStream(self, current, own, restore, result)

    def insert_stream(
        self,
        statement: Callable[[str], str],
        fmt: str,
        feed: Callable[[Sink], None],
        *,
        handle: Handle | None = None,
        database: str | None = None,
        settings: Mapping[str, str] | None = None,
    ) -> EngineResult:
        """Run ``statement(path)`` (an ``INSERT ... FROM INFILE path``) while ``feed`` writes the data into a sink.

        Streamable formats go through a FIFO that the engine reads while the data still arrives; formats that need
        a seekable file are spooled first. ``feed`` must deliver all of its data even after the sink stops reading
        (the sink then discards it); the engine's outcome is what the caller gets.
        """
        path = self._spool / f"insert-{uuid.uuid4().hex}"
        if fmt.lower() in SEEK_FORMATS:
            spool = SpoolSink(path)
            try:
                try:
                    feed(spool)
                finally:
                    spool.close()
                return self.execute(statement(str(path)), handle=handle, database=database, settings=settings)
            finally:
                path.unlink(missing_ok=True)
        os.mkfifo(path)
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["result"] = self.execute(
                    statement(str(path)), handle=handle, database=database, settings=settings
                )
            except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
                outcome["error"] = exc

        runner = threading.Thread(target=run, name="engine-insert", daemon=True)
        runner.start()
        sink = FifoSink(path, runner)
        try:
            feed(sink)
        finally:
            sink.close()
            runner.join()
            path.unlink(missing_ok=True)
        if "error" in outcome:
            raise outcome["error"]
        result: EngineResult = outcome["result"]
        return result

    # -- internals ------------------------------------------------------------------------------------------------

    def _run(
        self,
        handle: Handle,
        own: bool,
        sql: str,
        fmt: str,
        database: str | None,
        settings: dict[str, str],
        params: dict[str, str],
    ) -> EngineResult:
        connection = handle.connection
        try:
            settings = self._prepare(handle, own, sql, database, settings)
            restore: dict[str, tuple[str, bool]] = {}
            if settings:
                if not own:
                    restore = self._snapshot(handle, settings)
                connection.query("SET " + _assignments(settings), "TabSeparated")
            if not own and first_keyword(sql) not in _KEEPS_SESSION_SETTINGS:
                handle.settings.clear()
            try:
                result = connection.query(sql, fmt, params=params)
            finally:
                if restore:
                    self._restore(handle, restore)
        except EngineError:
            raise
        except Exception as exc:  # noqa: BLE001 - chdb raises plain exceptions carrying ClickHouse errors
            raise EngineError.from_engine(exc) from None
        return EngineResult(
            data=result.bytes() or b"",
            rows_read=int(result.rows_read()),
            bytes_read=int(result.bytes_read()),
            rows_written=int(result.rows_written()),
            bytes_written=int(result.bytes_written()),
            elapsed_ns=int(result.elapsed() * 1e9),
        )

    def _prepare(
        self, handle: Handle, own: bool, sql: str, database: str | None, settings: dict[str, str]
    ) -> dict[str, str]:
        """``USE`` the request's database; the settings to ``SET`` for this statement.

        ``readonly`` cannot be set back once set, so on a session's handle it is not ``SET``: a statement that is not
        a read is refused as the engine would refuse it (Code 164), and the session keeps its own value.
        """
        if database and database != handle.database:
            handle.connection.query(f"USE {quote_identifier(database)}", "TabSeparated")
            handle.database = database
        if own or "readonly" not in settings:
            return settings
        settings = dict(settings)
        if settings.pop("readonly") not in ("", "0") and first_keyword(sql) not in RESULT_KEYWORDS:
            raise self.error(164, "Cannot execute query in readonly mode")
        return settings

    @staticmethod
    def _snapshot(handle: Handle, settings: Mapping[str, str]) -> dict[str, tuple[str, bool]]:
        """The session's own value of each setting a request overrides: remembered, or read once."""
        unknown = [_setting_name(name) for name in settings if name not in handle.settings]
        if unknown:
            names = ", ".join(quote_string(name) for name in unknown)
            rows = handle.connection.query(
                f"SELECT name, value, changed FROM system.settings WHERE name IN ({names})", "TabSeparatedRaw"
            )
            read = dict.fromkeys(unknown, ("", False))
            for line in rows.bytes().decode().splitlines():
                name, value, changed = line.split("\t")
                read[name] = (value, changed == "1")
            handle.settings.update(read)
        return {name: handle.settings[name] for name in settings}

    @staticmethod
    def _restore(handle: Handle, snapshot: Mapping[str, tuple[str, bool]]) -> None:
        for name, (value, changed) in snapshot.items():
            try:
                literal = quote_string(value) if changed else "DEFAULT"
                handle.connection.query(f"SET {name} = {literal}", "TabSeparated")
            except Exception:  # noqa: BLE001 - the session keeps whatever value it has; it is read again next time
                handle.settings.pop(name, None)


def _setting_name(name: str) -> str:
    if not _SETTING_NAME_RE.match(name):
        raise EngineError(
            115, f"Code: 115. DB::Exception: Unknown setting '{name}'. (UNKNOWN_SETTING)", "UNKNOWN_SETTING"
        )
    return name


def _assignments(settings: Mapping[str, str]) -> str:
    return ", ".join(f"{_setting_name(name)} = {quote_string(str(value))}" for name, value in settings.items())
