"""HTTP sessions, with ClickHouse's rules (running query ids: ``processes.py``).

A session (``session_id``) owns one engine handle, so ``SET`` and ``USE`` persist across its requests; it expires
after ``session_timeout`` seconds of idleness and admits one request at a time (``SESSION_IS_LOCKED`` otherwise).
A server restart (or its emulation, ``faults.py``) loses every session opened before
it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from dpone_embedded.engine import Engine, EngineError, Handle

DEFAULT_SESSION_TIMEOUT = 60
MAX_SESSION_TIMEOUT = 3600


@dataclass
class _Session:
    handle: Handle | None
    timeout: float
    last_used: float
    opened_at: float
    """Wall time it was opened (compared with the server's last start)."""
    busy: bool = False


class Sessions:
    def __init__(self, engine: Engine, started_at: Callable[[], float | None] = lambda: None) -> None:
        """``started_at``: the wall time this server last started (or ``None``)."""
        self._engine = engine
        self._started_at = started_at
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}

    @contextmanager
    def session(self, session_id: str | None, timeout: str | None, check: bool) -> Iterator[Handle | None]:
        """The session's handle for the duration of one request (``None`` without a ``session_id``)."""
        if not session_id:
            yield None
            return
        seconds = _timeout(self._engine, timeout)
        expired: list[_Session] = []
        started = self._started_at()
        with self._lock:
            now = time.monotonic()
            for key, other in list(self._sessions.items()):
                idle = not other.busy and now - other.last_used > other.timeout
                if idle or (started is not None and other.opened_at < started):
                    expired.append(self._sessions.pop(key))
            current = self._sessions.get(session_id)
            if current is None:
                if check:
                    raise self._engine.error(372, f"Session {session_id} not found")
                current = _Session(None, seconds, now, time.time())
                self._sessions[session_id] = current
            elif current.busy:
                raise self._engine.error(373, f"Session {session_id} is locked by a concurrent client")
            current.busy = True
            current.timeout = seconds
        for old in expired:  # engine calls happen outside the registry lock
            if old.handle is not None:
                with self._engine.lock:
                    old.handle.close()
        try:
            if current.handle is None:
                current.handle = self._engine.open_handle()
            yield current.handle
        finally:
            with self._lock:
                current.busy = False
                current.last_used = time.monotonic()


def _timeout(engine: Engine, raw: str | None) -> float:
    if raw is None or raw == "":
        return DEFAULT_SESSION_TIMEOUT
    try:
        value = int(raw)
    except ValueError:
        raise engine.error(374, f"Invalid session timeout: '{raw}'") from None
    if value < 0 or value > MAX_SESSION_TIMEOUT:
        # the text compiled into ClickHouse 26.9 (HTTPHandler's session timeout check)
        raise engine.error(
            374,
            f"Session timeout '{raw}' is larger than max_session_timeout: {MAX_SESSION_TIMEOUT}. "
            "Maximum session timeout could be modified in configuration file",
        )
    return value


__all__ = ["EngineError", "Sessions"]
