"""The queries one process is running, and the record of those it ran: ``system.processes``, ``system.query_log`` and
``KILL QUERY`` with ClickHouse's documented rules.

A ``query_id`` may not be reused while a query with that id is still running (Code 216). A running query is listed
with its user, id, text, elapsed time, rows produced so far and ``is_cancelled``; when it ends it is recorded once,
as ``QueryFinish`` or ``ExceptionWhileProcessing`` with its exception code (a cancelled query: 394
``QUERY_WAS_CANCELLED``). ``KILL QUERY WHERE <condition over system.processes> [ASYNC|SYNC]`` marks every matching
running query as cancelled; ``ASYNC`` (the default) answers at once with ``kill_status = 'waiting'``, ``SYNC`` waits
until each has ended and answers ``finished``. A query stops at the next point it checks for cancellation (a streamed
result checks before each block; a statement answered whole runs to its end).
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final

from dpone_embedded.engine import Engine, EngineError
from dpone_embedded.httpwire import escape_param

QUERY_WAS_CANCELLED: Final = 394
NETWORK_ERROR: Final = 210
KEPT_RECORDS: Final = 1000
SYNC_WAIT_SECONDS: Final = 300.0

PROCESSES_STRUCTURE: Final = (
    "user String, query_id String, elapsed Float64, is_cancelled UInt8, read_rows UInt64, result_rows UInt64, "
    "query String"
)
"""The columns of ``system.processes`` that are modelled (ClickHouse's names and types)."""
QUERY_LOG_STRUCTURE: Final = (
    "type Enum8('QueryStart' = 1, 'QueryFinish' = 2, 'ExceptionBeforeStart' = 3, 'ExceptionWhileProcessing' = 4), "
    "event_time DateTime, query_duration_ms UInt64, read_rows UInt64, result_rows UInt64, exception_code Int32, "
    "exception String, user String, query_id String, query String"
)
"""The columns of ``system.query_log`` that are modelled (ClickHouse's names and types)."""
KILL_STRUCTURE: Final = "kill_status String, query_id String, user String, query String"
"""The answer of ``KILL QUERY``: one row per matching query."""

_TABLES: Final = {"processes": "__embedded_processes", "query_log": "__embedded_query_log"}


def table_sql(table: str) -> str:
    """What a reference to ``system.<table>`` is rewritten to; its rows ride in two query parameters."""
    name = _TABLES[table]
    return f"format(JSONEachRow, {{{name}_structure:String}}, {{{name}_rows:String}})"


@dataclass
class Process:
    """One query: running until ``done`` is set, then its outcome."""

    query_id: str
    query: str
    user: str
    started: float = field(default_factory=time.time)
    read_rows: int = 0
    result_rows: int = 0
    kill: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    outcome: str | None = None
    exception_code: int = 0
    exception: str = ""
    finished: float | None = None

    def finish(self) -> None:
        """The query ended normally (a no-op once an outcome is set)."""
        if self.outcome is None:
            self.outcome = "QueryFinish"

    def fail(self, code: int, message: str) -> None:
        """The query ended with an exception (a no-op once an outcome is set)."""
        if self.outcome is None:
            self.outcome = "ExceptionWhileProcessing"
            self.exception_code = code
            self.exception = message


class Processes:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._running: dict[str, Process] = {}
        self._log: collections.deque[Process] = collections.deque(maxlen=KEPT_RECORDS)

    @contextmanager
    def running(self, query_id: str, query: str, user: str) -> Iterator[Process]:
        process = Process(query_id, query, user)
        with self._lock:
            if query_id in self._running:
                raise self._engine.error(216, f"Query with id = {query_id} is already running")
            self._running[query_id] = process
        try:
            yield process
        except EngineError as exc:
            process.fail(exc.code, exc.message)
            raise
        except BaseException as exc:
            process.fail(int(getattr(exc, "code", 0) or 1001), f"{type(exc).__name__}: {exc}")
            raise
        else:
            process.finish()
        finally:
            process.finished = time.time()
            with self._lock:
                self._running.pop(query_id, None)
                self._log.append(process)
            process.done.set()

    def params(self, table: str) -> dict[str, str]:
        """The query parameters that carry the current rows of ``system.<table>`` into :func:`table_sql`."""
        now = time.time()
        with self._lock:
            running = list(self._running.values())
            logged = list(self._log)
        if table == "processes":
            structure = PROCESSES_STRUCTURE
            rows = [
                {
                    "user": p.user,
                    "query_id": p.query_id,
                    "elapsed": now - p.started,
                    "is_cancelled": int(p.kill.is_set()),
                    "read_rows": p.read_rows,
                    "result_rows": p.result_rows,
                    "query": p.query,
                }
                for p in running
            ]
        else:
            structure = QUERY_LOG_STRUCTURE
            rows = [
                {
                    "type": p.outcome or "QueryFinish",
                    "event_time": int(p.finished or now),
                    "query_duration_ms": int(((p.finished or now) - p.started) * 1000),
                    "read_rows": p.read_rows,
                    "result_rows": p.result_rows,
                    "exception_code": p.exception_code,
                    "exception": p.exception,
                    "user": p.user,
                    "query_id": p.query_id,
                    "query": p.query,
                }
                for p in logged
            ]
        name = _TABLES[table]
        return {
            f"{name}_structure": escape_param(structure),
            f"{name}_rows": escape_param("\n".join(json.dumps(row, separators=(",", ":")) for row in rows)),
        }

    def kill(self, query_ids: list[str], sync: bool) -> list[dict[str, str]]:
        """Mark the running queries ``query_ids`` cancelled; with ``sync``, wait until each has ended."""
        with self._lock:
            found = [self._running[query_id] for query_id in query_ids if query_id in self._running]
        for process in found:
            process.kill.set()
        rows = []
        for process in found:
            status = "waiting"
            if sync:
                status = "finished" if process.done.wait(SYNC_WAIT_SECONDS) else "waiting"
            rows.append(
                {"kill_status": status, "query_id": process.query_id, "user": process.user, "query": process.query}
            )
        return rows
