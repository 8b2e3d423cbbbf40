"""Where an insert's data goes on its way into the engine: a FIFO the engine reads while data arrives, or a spool file.

A sink is fed by the request body. When the engine stops reading (it failed, or finished early), the sink turns
into a drain: it keeps accepting data and discards it, so the HTTP request is always consumed to its end and the
connection stays usable. From a plain socket body, the FIFO sink moves data with ``splice(2)``: socket to pipe inside
the kernel, without passing through Python.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

_F_SETPIPE_SZ = 1031
_PIPE_SIZE = 1 << 20
_DRAIN = 1 << 20


class Sink:
    """Base sink: accepts data, discards it once :attr:`open` is false."""

    open = True
    can_splice = False

    def write(self, data: bytes | memoryview) -> None:
        raise NotImplementedError

    def splice_from(self, source_fd: int, count: int) -> int:
        """Move up to ``count`` bytes from ``source_fd``; 0 means the source is at its end."""
        data = os.read(source_fd, min(count, _DRAIN))
        if data:
            self.write(data)
        return len(data)

    def close(self) -> None:
        return None


class FifoSink(Sink):
    """The write end of the FIFO that ``INSERT ... FROM INFILE`` reads in the engine thread ``runner``."""

    can_splice = hasattr(os, "splice")

    def __init__(self, path: Path, runner: threading.Thread) -> None:
        self._runner = runner
        self._fd = _open_writer(path, runner)
        self.open = self._fd is not None

    def _wait_writable(self) -> None:
        if not self._runner.is_alive():
            self._stop()
            return
        assert self._fd is not None
        select.select([], [self._fd], [], 0.05)

    def _stop(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.open = False

    def write(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view and self.open and self._fd is not None:
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:
                self._wait_writable()
            except BrokenPipeError:
                self._stop()

    def splice_from(self, source_fd: int, count: int) -> int:
        while self.open and self._fd is not None:
            try:
                return os.splice(source_fd, self._fd, count)
            except BlockingIOError:
                self._wait_writable()
            except BrokenPipeError:
                self._stop()
        return len(os.read(source_fd, min(count, _DRAIN)))  # the engine stopped reading: drain the socket

    def close(self) -> None:
        """End of data: the engine reads EOF."""
        self._stop()


class SpoolSink(Sink):
    """A file the engine reads after the body has arrived (for formats whose readers seek, and for inserts into
    replicated tables, whose bytes the other replicas insert again); ``digest`` hashes the bytes on the way."""

    def __init__(self, path: Path, digest: Any = None) -> None:
        self._file: BinaryIO = open(path, "wb", buffering=_DRAIN)  # noqa: SIM115 - closed by close()
        self._digest = digest

    def write(self, data: bytes | memoryview) -> None:
        if self._digest is not None:
            self._digest.update(data)
        self._file.write(data)

    def close(self) -> None:
        self._file.close()


def _open_writer(path: Path, runner: threading.Thread) -> int | None:
    """Open the FIFO's write end once the engine has opened its read end; ``None`` if the engine never does.

    Data written before a reader exists would be discarded with the pipe, so the writer waits for the reader.
    """
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            if not runner.is_alive():
                return None
            time.sleep(0.0005)
            continue
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_SIZE)
        return fd
