"""The cluster's bell: a write to the shared state, from any process, wakes a waiting thread at once."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from dpone_embedded.bell import Bell
from dpone_embedded.launcher import package_root
from dpone_embedded.store import Store

pytestmark = [
    pytest.mark.embedded,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the bell is watched with inotify"),
]

PATIENCE = 30.0
"""A wait's timeout: a lost ring would make the wait last this long."""


def _woken_by(bell: Bell, ring: object) -> tuple[bool, float]:
    seen = bell.generation()
    started = time.monotonic()
    if callable(ring):
        ring()
    moved = bell.wait(seen, PATIENCE) != seen
    return moved, time.monotonic() - started


def test_a_ring_from_another_process_wakes_a_waiter(tmp_path: Path) -> None:
    bell = Bell(tmp_path / "state.sqlite-bell")
    code = f"import sys; sys.path.insert(0, {package_root()!r}); from dpone_embedded.bell import Bell; Bell(sys.argv[1]).ring()"
    moved, waited = _woken_by(bell, lambda: subprocess.run([sys.executable, "-c", code, str(bell.path)], check=True))
    assert moved and waited < PATIENCE / 2


def test_a_changing_write_rings_and_a_heartbeat_does_not(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    Store(path).initialize()
    waiter, writer = Store(path, reuse_connections=True), Store(path)
    moved, waited = _woken_by(waiter.bell, lambda: writer.arm("member1", "pause"))
    assert moved and waited < PATIENCE / 2
    assert waiter.faults("member1")[0].kind == "pause"  # the reused connection sees the other writer's commit
    seen = waiter.bell.generation()
    writer.heartbeat("member1", ("127.0.0.1", 9000), 1, paused=False)
    writer.disarm("nobody")  # a write that changes no row
    assert waiter.bell.wait(seen, 0.5) == seen
