"""Create-once, atomically visible stage and journal objects on ObjectStoragePath (file://)."""

from __future__ import annotations

import errno
import shutil

import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.storage import ObjectStore
from airflow_provider_dpone.transfer.storage import ObjectJournalStore, ObjectStageStore

OPERATION = "0" * 32


def test_objects_are_created_once_and_never_overwritten(tmp_path) -> None:
    stage = ObjectStageStore(f"file://{tmp_path}", OPERATION)
    stage.open_prefix("stage/a/")
    stage.put("stage/a/00000000.chunk", b"first")
    with pytest.raises(DponeError) as again:
        stage.put("stage/a/00000000.chunk", b"second")
    assert again.value.code == "native_transfer.stage_integrity_failed"
    assert stage.get("stage/a/00000000.chunk") == b"first"
    assert not list(tmp_path.rglob(".tmp-*")), "no temporary file survives a publish"
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


def test_journal_appends_are_exclusive_and_read_in_order(tmp_path) -> None:
    journal = ObjectJournalStore(f"file://{tmp_path}", OPERATION)
    for seq in (0, 1, 2):
        journal.append(seq, f"record {seq}".encode())
    with pytest.raises(DponeError) as conflict:
        ObjectJournalStore(f"file://{tmp_path}", OPERATION).append(1, b"late writer")
    assert conflict.value.code == "native_transfer.journal_conflict"
    assert journal.read_all() == [(0, b"record 0"), (1, b"record 1"), (2, b"record 2")]
    (tmp_path / OPERATION / "journal" / "stray.txt").write_bytes(b"x")
    with pytest.raises(DponeError) as stray:
        journal.read_all()
    assert stray.value.code == "native_transfer.journal_corrupt"


@pytest.mark.parametrize("key", ["../escape", "a/../../b", "/absolute", "a//b", "a b", ""])
def test_keys_are_plain_relative_paths(tmp_path, key: str) -> None:
    with pytest.raises(DponeError) as info:
        ObjectStore(f"file://{tmp_path}").put_once(key, b"x")
    assert info.value.code == "native_transfer.storage_unsupported"
