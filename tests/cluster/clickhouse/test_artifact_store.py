"""The content-addressed artifact store on ObjectStoragePath (file://), as the protocol and a fresh process use it."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from airflow.sdk import ObjectStoragePath

import airflow_provider_dpone
from airflow_provider_dpone.cluster.clickhouse.artifact_source import copy_bounded
from airflow_provider_dpone.cluster.clickhouse.artifact_store import ObjectStorageArtifactStore
from airflow_provider_dpone.cluster.values.receipts import CURRENT_CONTENT_DIGEST, ArtifactColumn, ArtifactReceipt
from airflow_provider_dpone.core.errors import ArtifactInvalidError, DponeError

pytestmark = pytest.mark.adapter


def store_at(tmp_path: Path, chunk_bytes: int = 4) -> ObjectStorageArtifactStore:
    return ObjectStorageArtifactStore(ObjectStoragePath(f"file://{tmp_path}/artifacts"), chunk_bytes=chunk_bytes)


def receipt_for(data: bytes, **changes: object) -> ArtifactReceipt:
    values: dict[str, object] = {
        "sha256": hashlib.sha256(data).hexdigest(),
        "byte_size": len(data),
        "row_count": 1,
        "columns": (ArtifactColumn(name="id", type="UInt64"),),
        "content_digest": "c" * 64,
        "content_digest_version": CURRENT_CONTENT_DIGEST,
        "replayable": True,
    }
    values.update(changes)
    return ArtifactReceipt.model_validate(values)


def write(store: ObjectStorageArtifactStore, data: bytes, bound: int = 1 << 20) -> str:
    writer = store.writer(bound)
    with writer:
        copy_bounded(io.BytesIO(data).read, writer, 3)
        return writer.commit().sha256


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_written_bytes_are_addressed_by_sha256_and_reopened_verified(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    data = b"native bytes of one artifact"
    sha = write(store, data)
    assert sha == hashlib.sha256(data).hexdigest()
    assert files_under(tmp_path / "artifacts") == [f"sha256/{sha[:2]}/{sha}.native"]
    handle = store.open(receipt_for(data))
    assert b"".join(handle.chunks()) == data
    assert all(len(chunk) <= 4 for chunk in handle.chunks())


def test_an_existing_object_is_reused_never_overwritten(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    data = b"same bytes"
    sha = write(store, data)
    path = tmp_path / "artifacts" / "sha256" / sha[:2] / f"{sha}.native"
    before = path.stat().st_mtime_ns, path.stat().st_ino
    assert write(store, data) == sha
    assert (path.stat().st_mtime_ns, path.stat().st_ino) == before
    assert files_under(tmp_path / "artifacts") == [f"sha256/{sha[:2]}/{sha}.native"]


def test_the_byte_bound_stops_the_write_at_the_bound_and_keeps_nothing(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    writer = store.writer(10)
    written: list[int] = []

    def feed() -> None:
        with writer:
            for chunk in (b"aaaa", b"bbbb", b"cccc", b"dddd"):
                writer.write(chunk)
                written.append(writer.size)

    with pytest.raises(DponeError) as caught:
        feed()
    assert caught.value.code == "DPONE_ARTIFACT_SOURCE_BYTES_EXCEEDED"
    assert written == [4, 8]  # the third chunk would cross 10 bytes: nothing of it was written
    assert files_under(tmp_path / "artifacts") == []


def test_exactly_the_bound_is_accepted(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    assert write(store, b"0123456789", bound=10) == hashlib.sha256(b"0123456789").hexdigest()


def test_empty_artifact_is_a_valid_object(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    sha = write(store, b"")
    assert sha == hashlib.sha256(b"").hexdigest()
    assert b"".join(store.open(receipt_for(b"")).chunks()) == b""


def test_open_refuses_missing_and_resized_objects_and_a_tampered_one_never_streams_whole(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    data = b"0123456789abcdef"
    with pytest.raises(DponeError) as missing:  # a file:// store is one machine's directory: it says which setting
        store.open(receipt_for(data))
    assert missing.value.code == "DPONE_ARTIFACT_STORE_NOT_SHARED" and "[dpone] artifact_base" in str(missing.value)
    sha = write(store, data)
    with pytest.raises(ArtifactInvalidError):
        store.open(receipt_for(data, byte_size=len(data) + 1))
    path = tmp_path / "artifacts" / "sha256" / sha[:2] / f"{sha}.native"
    path.write_bytes(b"X" + data[1:])  # same size, other bytes: found by the hash while streaming, not by open
    handle = store.open(receipt_for(data))
    with pytest.raises(ArtifactInvalidError):
        b"".join(handle.chunks())


def test_bytes_changed_after_open_never_complete_the_stream(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    data = b"0123456789abcdef"
    sha = write(store, data)
    handle = store.open(receipt_for(data))
    path = tmp_path / "artifacts" / "sha256" / sha[:2] / f"{sha}.native"
    path.write_bytes(data[:-1] + b"X")
    received: list[bytes] = []

    def consume() -> None:
        for chunk in handle.chunks():
            received.append(chunk)

    with pytest.raises(ArtifactInvalidError):
        consume()
    assert len(b"".join(received)) < len(data)  # the final chunk was withheld


def test_a_fresh_process_reopens_the_artifact_from_the_receipt_alone(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    data = os.urandom(100_000)
    write(store, data)
    receipt = receipt_for(data)
    script = (
        "import sys, hashlib\n"
        "from airflow.sdk import ObjectStoragePath\n"
        "from airflow_provider_dpone.cluster.clickhouse.artifact_store import ObjectStorageArtifactStore\n"
        "from airflow_provider_dpone.cluster.values.receipts import ArtifactReceipt\n"
        "receipt = ArtifactReceipt.model_validate_json(sys.stdin.read())\n"
        f"store = ObjectStorageArtifactStore(ObjectStoragePath('file://{tmp_path}/artifacts'))\n"
        "print(hashlib.sha256(b''.join(store.open(receipt).chunks())).hexdigest())\n"
    )
    root = str(Path(airflow_provider_dpone.__file__).resolve().parent.parent)
    result = subprocess.run(
        [sys.executable, "-c", script],
        input=receipt.model_dump_json(),
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": root},
        timeout=120,
        check=True,
    )
    assert result.stdout.strip() == receipt.sha256
