"""A fenced writer's stage-writer thread still putting a chunk while a recovery retires its stage.

Deterministic: the writer runs in its own thread; its stage-writer thread is held inside the ``put`` of the last
chunk (after its lease check passed) and the recovery runs once the writer's main thread has journaled every other
receipt and can only wait for that put. ``late``: the put resumes after the retirement;
``during_retirement``: the put resumes between the listing and the removal of the stage directory (the interleaving
that once surfaced as ``OSError: Directory not empty``). Either way the recovery must succeed, the fenced writer must
stop as fenced with its threads joined, and no stage object of the retired invocation may remain.
``late_without_directories``: as ``late`` on a store whose puts recreate any prefix (an object store has no
directory to retire), so only the writer's own lease check after the put keeps the retirement true.
"""

from __future__ import annotations

import os
import threading

import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.storage import ObjectStageStore
from tests.support.fakes.transfer_target import SimulatedCrash
from tests.support.transfer.native_route_harness import LEASE, OPERATION, crash_at, make_harness, multiset
from tests.transfer.route.test_native_route_admission import kinds

pytestmark = pytest.mark.protocol

WAIT = 30
LAST = 3  # seven rows in chunks of two: ordinals 0..3


class GatedStage(ObjectStageStore):
    """Holds the stage-writer thread's put of the last chunk until released; other puts pass straight through."""

    def __init__(self, root: str, *, directories: bool = True) -> None:
        super().__init__(root, OPERATION)
        self._directories = directories
        self.entered = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()

    def put(self, key: str, data: bytes) -> None:
        if not key.endswith(f"/{LAST:08d}.chunk"):
            super().put(key, data)
            return
        self.entered.set()
        assert self.release.wait(WAIT), "the test never released the held put"
        try:
            if not self._directories:
                self.open_prefix(key.rsplit("/", 1)[0] + "/")
            super().put(key, data)
        finally:
            self.finished.set()


def stage_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("dpone-stage")]


def files(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in (root / OPERATION).rglob("*") if p.is_file())


@pytest.mark.parametrize("resume", ["late", "during_retirement", "late_without_directories"])
def test_a_fenced_writers_held_put_never_outlives_the_retirement(tmp_path, monkeypatch, resume) -> None:
    harness = make_harness(tmp_path)
    gated = GatedStage(f"file://{tmp_path}", directories=resume != "late_without_directories")
    outcome: dict[str, BaseException] = {}
    receipts = []
    quiet = threading.Event()

    def only_the_held_put_remains(point: str) -> None:
        if point == "chunk_sealed":
            receipts.append(point)
            if len(receipts) == LAST:
                quiet.set()

    def write() -> None:
        try:
            harness.run(only_the_held_put_remains, stage=gated)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome["writer"] = exc

    writer = threading.Thread(target=write, name="fenced-writer")
    writer.start()
    assert gated.entered.wait(WAIT) and quiet.wait(WAIT), "the writer never reached its last chunk"
    fenced = next(p.name for p in (tmp_path / OPERATION / "stage").iterdir())

    if resume == "during_retirement":
        rmdir = os.rmdir

        def resume_the_put_then_rmdir(path, *args, **kwargs):  # type: ignore[no-untyped-def]
            if fenced in os.fspath(path) and not gated.release.is_set():
                gated.release.set()
                assert gated.finished.wait(WAIT)
            return rmdir(path, *args, **kwargs)

        monkeypatch.setattr(os, "rmdir", resume_the_put_then_rmdir)

    harness.clock.advance(LEASE * 2)
    recovered = harness.run()
    assert recovered.settled_invocations == (recovered.settled_invocations[0],) and recovered.rows == 7
    retired = files(tmp_path)
    gated.release.set()
    writer.join(WAIT)

    assert not writer.is_alive()
    assert isinstance(outcome.get("writer"), DponeError), outcome
    assert outcome["writer"].code == "native_transfer.journal_conflict"
    assert not stage_threads(), "a stage-writer thread outlived its invocation"
    assert files(tmp_path) == retired, "the fenced writer left an object behind the retirement"
    assert not any(f"stage/{fenced}/" in name for name in retired)
    assert multiset(harness.target.rows()) == harness.source_rows()
    assert harness.run().resumed_from.value == "succeeded"


def test_a_refused_retirement_keeps_the_invocation_unsettled_and_custody_held(tmp_path, monkeypatch) -> None:
    harness = make_harness(tmp_path)
    with pytest.raises(SimulatedCrash):
        harness.run(crash_at("chunk_sealed"))
    harness.expire_lease()

    def refuse(path: str, *args: object, **kwargs: object) -> None:
        raise OSError(13, "Permission denied", path)

    with monkeypatch.context() as storage_down:
        storage_down.setattr("shutil.rmtree", refuse)
        with pytest.raises(DponeError) as refused:
            harness.run()
    assert refused.value.code == "native_transfer.stage_retirement_failed"
    assert "invocation_settled" not in kinds(harness)
    assert kinds(harness)[-1] == "lease" and harness.target.calls.count("prepare") == 0
    with pytest.raises(DponeError) as held:
        harness.run()
    assert held.value.code == "native_transfer.custody_held", "an unproven retirement keeps custody held"
    harness.expire_lease()
    result = harness.run()
    assert len(result.settled_invocations) == 1 and multiset(harness.target.rows()) == harness.source_rows()
