"""Create-once, atomically visible stage and journal objects on ObjectStoragePath.

The contract runs on both backends of ``store_backend`` (tests/support/fixtures/object_store.py): ``file://`` and ``s3://``
against moto's S3 API server, where create-once is a PutObject with ``If-None-Match: *``. The retirement fence of a
local prefix (a late put cannot recreate a retired directory) is a ``file://`` property: object stores have no
directories, and the writer-side lease fences them.
"""

from __future__ import annotations

import concurrent.futures
import errno
import shutil
import threading

import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.storage import ObjectStore, probe_create_once
from airflow_provider_dpone.transfer.storage import ObjectJournalStore, ObjectStageStore
from tests.support.fixtures.object_store import StoreBackend

pytestmark = pytest.mark.unit

OPERATION = "0" * 32


def test_objects_are_created_once_and_never_overwritten(store_backend: StoreBackend) -> None:
    stage = ObjectStageStore(store_backend.url, OPERATION)
    stage.open_prefix("stage/a/")
    stage.put("stage/a/00000000.chunk", b"first")
    with pytest.raises(DponeError) as again:
        stage.put("stage/a/00000000.chunk", b"second")
    assert again.value.code == "native_transfer.stage_integrity_failed"
    assert stage.get("stage/a/00000000.chunk") == b"first"
    assert store_backend.objects() == [f"{OPERATION}/stage/a/00000000.chunk"], "no temporary object survives a put"
    with pytest.raises(DponeError) as missing:
        stage.get("stage/a/00000001.chunk")
    assert missing.value.code == "native_transfer.stage_integrity_failed"
    stage.delete_prefix("stage/a/")
    assert not stage.exists("stage/a/00000000.chunk")


def test_a_retired_prefix_refuses_late_puts_and_is_not_recreated(tmp_path) -> None:
    stage = ObjectStageStore(f"file://{tmp_path}", OPERATION)
    with pytest.raises(DponeError) as unopened:
        stage.put("stage/a/00000000.chunk", b"x")
    assert unopened.value.code == "native_transfer.stage_integrity_failed"
    stage.open_prefix("stage/a/")
    stage.put("stage/a/00000000.chunk", b"first")
    stage.delete_prefix("stage/a/")
    with pytest.raises(DponeError) as late:
        stage.put("stage/a/00000001.chunk", b"late")
    assert late.value.code == "native_transfer.stage_integrity_failed"
    assert not [p for p in (tmp_path / OPERATION).rglob("*") if p.is_file()], "nothing survives the retirement"
    assert not (tmp_path / OPERATION / "stage" / "a").exists(), "a late put never recreates a retired prefix"
    stage.delete_prefix("stage/a/")  # retiring an absent prefix is a no-op
    stage.delete("stage/a/00000000.chunk")  # so is removing an absent object


def test_a_storage_refusal_in_retirement_is_a_stable_error(tmp_path, monkeypatch) -> None:
    stage = ObjectStageStore(f"file://{tmp_path}", OPERATION)
    stage.open_prefix("stage/a/")
    stage.put("stage/a/00000000.chunk", b"first")

    def refuse(path: str, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr(shutil, "rmtree", refuse)
    with pytest.raises(DponeError) as refused:
        stage.delete_prefix("stage/a/")
    assert refused.value.code == "native_transfer.stage_retirement_failed"
    assert refused.value.error.action


def test_journal_appends_are_exclusive_and_read_in_order(store_backend: StoreBackend) -> None:
    journal = ObjectJournalStore(store_backend.url, OPERATION)
    for seq in (0, 1, 2):
        journal.append(seq, f"record {seq}".encode())
    with pytest.raises(DponeError) as conflict:
        ObjectJournalStore(store_backend.url, OPERATION).append(1, b"late writer")
    assert conflict.value.code == "native_transfer.journal_conflict"
    assert journal.read_all() == [(0, b"record 0"), (1, b"record 1"), (2, b"record 2")]
    store_backend.plant(f"{OPERATION}/journal/stray.txt", b"x")
    with pytest.raises(DponeError) as stray:
        journal.read_all()
    assert stray.value.code == "native_transfer.journal_corrupt"


@pytest.mark.parametrize("key", ["../escape", "a/../../b", "/absolute", "a//b", "a b", ""])
def test_keys_are_plain_relative_paths(store_backend: StoreBackend, key: str) -> None:
    with pytest.raises(DponeError) as info:
        ObjectStore(store_backend.url).put_once(key, b"x")
    assert info.value.code == "native_transfer.storage_unsupported"
    assert store_backend.objects() == []


def test_an_empty_object_is_refused_rather_than_written_without_the_condition(store_backend: StoreBackend) -> None:
    """s3fs writes a zero-byte ``xb`` file as a plain PutObject, without ``If-None-Match``: it could overwrite."""
    store = ObjectStore(store_backend.url)
    for _ in range(2):
        with pytest.raises(DponeError) as empty:
            store.put_once("journal/00000000.json", b"")
        assert empty.value.code == "native_transfer.storage_unsupported"
    assert store_backend.objects() == []


def test_two_writers_racing_on_one_key_leave_exactly_one_winner(store_backend: StoreBackend) -> None:
    store = ObjectStore(store_backend.url)
    payloads = [f"writer {n}".encode() for n in range(4)]
    barrier = threading.Barrier(len(payloads))

    def write(data: bytes) -> bool:
        barrier.wait()
        try:
            store.put_once("journal/00000007.json", data)
        except FileExistsError:
            return False
        return True

    with concurrent.futures.ThreadPoolExecutor(len(payloads)) as pool:
        won = list(pool.map(write, payloads))
    assert won.count(True) == 1
    assert store.get("journal/00000007.json") == payloads[won.index(True)]
    assert store_backend.objects() == ["journal/00000007.json"]


def test_the_create_once_probe_accepts_a_store_that_refuses_the_second_write(store_backend: StoreBackend) -> None:
    probe_create_once(ObjectStore(store_backend.url))
    assert store_backend.objects() == [], "the probe object is removed"


def test_the_create_once_probe_refuses_a_store_that_accepts_the_second_write(store_backend: StoreBackend) -> None:
    store = ObjectStore(store_backend.url)
    with store_backend.ignoring_conditional_writes():
        store.put_once("journal/00000000.json", b"first")
        store.put_once("journal/00000000.json", b"second")  # the fault: what put_once alone cannot tell
        assert store.get("journal/00000000.json") == b"second"
        with pytest.raises(DponeError) as caught:
            probe_create_once(store)
    assert caught.value.code == "native_transfer.stage_store_overwrites"
    assert caught.value.error.action
    assert store_backend.objects() == ["journal/00000000.json"], "the probe object is removed"
