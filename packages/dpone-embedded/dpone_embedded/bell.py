"""The cluster's doorbell: every write to the shared state rings it, and a thread waiting for work sleeps until it rings.

A ring is a change of the bell file's timestamps (``os.utime``, one system call, from any process); each process
watches the file with inotify(7) on one thread blocked in ``read``, which counts the rings. A waiter reads the count
before it looks at the state and then waits for the count to move, so a ring between the look and the wait is never
lost. Where inotify is not available (not Linux, the instance limit reached, the file removed) a wait lasts at most
:data:`FALLBACK_SECONDS`: the cluster then polls, as it did before it had a bell.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import threading
from pathlib import Path
from typing import Final

FALLBACK_SECONDS: Final = 0.02
"""How long a wait lasts at most when rings cannot be seen."""

_IN_ATTRIB: Final = 0x00000004
_IN_DELETE_SELF: Final = 0x00000400
_IN_MOVE_SELF: Final = 0x00000800
_IN_IGNORED: Final = 0x00008000
_IN_CLOEXEC: Final = 0o2000000
_EVENT: Final = struct.Struct("iIII")


class Bell:
    """The bell at ``path``: :meth:`ring` from anywhere; :meth:`generation` then :meth:`wait` to sleep until a ring."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._changed = threading.Condition()
        self._generation = 0
        self._watching = False
        self._started = False

    def ring(self) -> None:
        """Wake every thread of every process waiting on this bell (a missing bell file is created)."""
        try:
            os.utime(self.path)
        except FileNotFoundError:
            with contextlib.suppress(OSError):
                self.path.touch()

    def generation(self) -> int:
        """The rings counted so far; rings from now on are counted (the first call starts this process's watch)."""
        with self._changed:
            if not self._started:
                self._started = True
                self._watching = self._watch()
            return self._generation

    def wait(self, seen: int, timeout: float) -> int:
        """Sleep until the count moves past ``seen`` or ``timeout`` seconds pass; the count then."""
        with self._changed:
            if self._generation == seen:
                self._changed.wait(timeout if self._watching else min(timeout, FALLBACK_SECONDS))
            return self._generation

    def interrupt(self) -> None:
        """Wake this process's waiters without a ring (a worker being stopped)."""
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def _watch(self) -> bool:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            init, add = libc.inotify_init1, libc.inotify_add_watch
        except (OSError, AttributeError):
            return False
        with contextlib.suppress(OSError):  # the file exists before it is watched
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        descriptor = int(init(_IN_CLOEXEC))
        if descriptor < 0:
            return False
        mask = _IN_ATTRIB | _IN_DELETE_SELF | _IN_MOVE_SELF
        if int(add(descriptor, os.fsencode(self.path), mask)) < 0:
            os.close(descriptor)
            return False
        threading.Thread(target=self._count, args=(descriptor,), name="bell", daemon=True).start()
        return True

    def _count(self, descriptor: int) -> None:
        watching = True
        while watching:
            try:
                data = os.read(descriptor, 4096)
            except OSError:
                data = b""
            watching = bool(data) and not any(mask & _IN_IGNORED for mask in _masks(data))
            with self._changed:
                self._generation += 1
                self._watching = watching
                self._changed.notify_all()
        os.close(descriptor)


def _masks(data: bytes) -> list[int]:
    masks, offset = [], 0
    while offset + _EVENT.size <= len(data):
        _, mask, _, length = _EVENT.unpack_from(data, offset)
        masks.append(mask)
        offset += _EVENT.size + length
    return masks
