"""Run one serialized trigger as the triggerer does, in a fresh interpreter, and report what held its event loop.

``python -m tests.support.airflow.trigger_loop_probe`` reads ``{"classpath": ..., "kwargs": ...}`` on stdin. With only
what a triggerer process has imported (``airflow.jobs.triggerer_job_runner``), it starts an event loop in asyncio's
debug mode, imports the trigger class *inside* the loop (``TriggerRunner.get_trigger_by_classpath`` runs there),
rebuilds the trigger from its kwargs and collects every event of ``run()``. It prints one JSON line:

* ``slow``: every callback that held the loop's thread for more CPU time than
  ``[triggerer] blocked_main_thread_warning_threshold`` (0.2 s, the triggerer's own warning threshold). CPU time, not
  the wall time asyncio's debug mode reports, so that a loaded machine descheduling the process is not taken for a
  callback that works too long; a callback that waits without working is what ``blocking`` catches;
* ``imports``: every module first imported on the loop's thread while the loop ran (a finder on ``sys.meta_path``
  sees only modules not imported yet);
* ``blocking``: every call on the loop's thread that can wait on the network: a ``connect``/``send``/``recv`` on a
  socket in blocking mode (asyncio's own transports use non-blocking sockets) and ``socket.getaddrinfo`` (asyncio
  resolves names in its executor);
* ``events``: the trigger's event payloads.
"""

from __future__ import annotations

import asyncio
import importlib.abc
import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import airflow.jobs.triggerer_job_runner  # noqa: F401 - what a triggerer process has imported before any trigger runs
from airflow._shared.module_loading import import_string  # what TriggerRunner.get_trigger_by_classpath calls

THRESHOLD_SECONDS = 0.2
"""``[triggerer] blocked_main_thread_warning_threshold``'s default: the triggerer warns of a loop held longer."""


class LoopWatch(importlib.abc.MetaPathFinder):
    """Records imports, blocking network calls and callbacks over the threshold on the loop's thread."""

    def __init__(self) -> None:
        self.thread: int | None = None
        self.imports: list[str] = []
        self.blocking: list[str] = []
        self.slow: list[str] = []

    def on_loop(self) -> bool:
        return self.thread is not None and threading.get_ident() == self.thread

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if self.on_loop():
            self.imports.append(fullname)
        return None

    def guard(self, owner: Any, name: str, blocking: Callable[[Any], bool]) -> None:
        original = getattr(owner, name)

        def watched(*args: Any, **kwargs: Any) -> Any:
            if self.on_loop() and blocking(args[0] if args else None):
                self.blocking.append(name)
            return original(*args, **kwargs)

        setattr(owner, name, watched)

    def time_callbacks(self) -> None:
        original = asyncio.events.Handle._run

        def timed(handle: asyncio.events.Handle) -> None:
            started = time.thread_time()
            try:
                original(handle)
            finally:
                spent = time.thread_time() - started
                if spent > THRESHOLD_SECONDS and self.on_loop():
                    self.slow.append(f"{handle!r:.200} held the loop for {spent:.3f} s of CPU")

        asyncio.events.Handle._run = timed  # type: ignore[method-assign]


def _blocking_socket(sock: Any) -> bool:
    return isinstance(sock, socket.socket) and sock.gettimeout() != 0.0


def main() -> None:
    spec = json.loads(sys.stdin.read())
    watch = LoopWatch()
    sys.meta_path.insert(0, watch)
    watch.time_callbacks()
    for name in ("connect", "connect_ex", "send", "sendall", "recv", "recv_into"):
        watch.guard(socket.socket, name, _blocking_socket)
    watch.guard(socket, "getaddrinfo", lambda _: True)

    async def run() -> list[dict[str, Any]]:
        watch.thread = threading.get_ident()
        trigger_class = import_string(spec["classpath"])
        trigger = trigger_class(**spec["kwargs"])
        return [event.payload async for event in trigger.run()]

    loop = asyncio.new_event_loop()
    loop.set_debug(True)  # asyncio's own checks (coroutines never awaited, calls from other threads) as well
    try:
        events = loop.run_until_complete(run())
    finally:
        watch.thread = None
        loop.close()
    print(json.dumps({"events": events, "slow": watch.slow, "imports": watch.imports, "blocking": watch.blocking}))


if __name__ == "__main__":
    main()
