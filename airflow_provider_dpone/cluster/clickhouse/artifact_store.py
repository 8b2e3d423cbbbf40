"""The content-addressed, immutable artifact store on Airflow's ``ObjectStoragePath`` (file://, s3://, gs://, ...).

Layout under the configured base::

    <base>/sha256/<first two hex digits>/<sha256>.native     sealed artifacts, named by the SHA-256 of their bytes
    <base>/tmp/<random>.partial                               writes in progress (removed on success and on failure)

Why content addressing: the authority binds an artifact by its receipt (SHA-256, size, rows, schema, content digest),
never by a path, so a fresh process on another worker reopens it from the receipt alone. Why immutability: staging
may replay the artifact into a rebuilt candidate at any later attempt, and every replay must send the same bytes.

* **write** -- bytes are streamed into a temporary object while hashed and counted; the byte bound is checked
  *before* each chunk is written, so a write stops at the bound, never after it. On commit the temporary object is
  renamed to its content address; when that address already holds an object of the same size it is reused and the
  new copy discarded -- an existing object is never overwritten.
* **open** -- checks that the object exists with the receipt's size (absent from a ``file://`` store:
  ``DPONE_ARTIFACT_STORE_NOT_SHARED``, the store is one worker's directory); :meth:`VerifiedArtifact.chunks` hashes while
  streaming and withholds the final chunk until the SHA-256 is proven, so a body whose bytes differ from the receipt
  never completes (the INSERT fails instead of committing it). The bytes are read once per load, not once more to
  check them first: a member that received part of a bad stream holds a candidate the content check refuses.
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from airflow.sdk import ObjectStoragePath

from airflow_provider_dpone.cluster.values.receipts import ArtifactReceipt
from airflow_provider_dpone.core.errors import ArtifactInvalidError, DponeError

CHUNK_BYTES: Final[int] = 8 * 1024 * 1024
"""Large buffered chunks: few HTTP body writes, few object-store calls."""


def _store_failure(what: str, error: BaseException) -> DponeError:
    return DponeError("DPONE_ARTIFACT_STORE_FAILED", f"{what} ({type(error).__name__})")


@dataclass(frozen=True)
class StoredObject:
    """What a committed write produced: the content address and the size."""

    sha256: str
    byte_size: int


class ArtifactWriter:
    """One bounded, hashed write into a temporary object; :meth:`commit` or :meth:`abort` ends it."""

    def __init__(self, store: ObjectStorageArtifactStore, max_bytes: int) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError("max_bytes must be a non-negative integer")
        self.store = store
        self.max_bytes = max_bytes
        self.temp = store.base / "tmp" / f"{uuid.uuid4().hex}.partial"
        self._hash = hashlib.sha256()
        self._size = 0
        try:
            self.temp.parent.mkdir(parents=True, exist_ok=True)
            self._file: Any = self.temp.open("wb")  # type: ignore[no-untyped-call]
        except Exception as error:  # noqa: BLE001 -- any store failure has one code
            raise _store_failure("open temporary object", error) from None
        self._open = True

    @property
    def size(self) -> int:
        return self._size

    def write(self, chunk: bytes) -> None:
        """Append ``chunk``; refuse (and write nothing of it) when it would cross ``max_bytes``."""
        if self._size + len(chunk) > self.max_bytes:
            self.abort()
            raise DponeError(
                "DPONE_ARTIFACT_SOURCE_BYTES_EXCEEDED", f"more than {self.max_bytes} bytes; stopped at {self._size}"
            )
        try:
            self._file.write(chunk)
        except Exception as error:  # noqa: BLE001
            self.abort()
            raise _store_failure("write", error) from None
        self._hash.update(chunk)
        self._size += len(chunk)

    def commit(self) -> StoredObject:
        """Seal: rename to the content address, or reuse an identical existing object (never overwrite)."""
        sha = self._hash.hexdigest()
        try:
            self._file.close()
            self._open = False
            final = self.store.object_path(sha)
            if final.exists():
                if int(final.stat().st_size) != self._size:
                    raise ArtifactInvalidError("an object under this content address has another size")
                self.temp.unlink()
            else:
                final.parent.mkdir(parents=True, exist_ok=True)
                self.temp.rename(final)
        except ArtifactInvalidError:
            self.abort()
            raise DponeError("DPONE_ARTIFACT_STORE_FAILED", f"sha256 {sha[:16]}: stored object differs") from None
        except Exception as error:  # noqa: BLE001
            self.abort()
            raise _store_failure("commit", error) from None
        return StoredObject(sha, self._size)

    def abort(self) -> None:
        """Discard the temporary object (best effort: it is never a sealed artifact)."""
        if self._open:
            self._open = False
            with contextlib.suppress(Exception):
                self._file.close()
        with contextlib.suppress(Exception):
            if self.temp.exists():
                self.temp.unlink()

    def __enter__(self) -> ArtifactWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc is not None:
            self.abort()


class VerifiedArtifact:
    """An opened artifact whose size matched its receipt and whose bytes are verified as they stream
    (``ArtifactHandle``)."""

    def __init__(self, path: ObjectStoragePath, receipt: ArtifactReceipt, chunk_bytes: int) -> None:
        self.path = path
        self._receipt = receipt
        self.chunk_bytes = chunk_bytes

    @property
    def receipt(self) -> ArtifactReceipt:
        return self._receipt

    def chunks(self) -> Iterator[bytes]:
        """The bytes in large chunks; the last chunk is yielded only after the whole stream hashed correctly."""
        return verified_chunks(self.path, self._receipt.sha256, self._receipt.byte_size, self.chunk_bytes)


def verified_chunks(path: ObjectStoragePath, sha256: str, byte_size: int, chunk_bytes: int) -> Iterator[bytes]:
    digest = hashlib.sha256()
    size = 0
    pending: bytes | None = None
    try:
        with path.open("rb") as handle:  # type: ignore[no-untyped-call]
            while chunk := handle.read(chunk_bytes):
                digest.update(chunk)
                size += len(chunk)
                if size > byte_size:
                    break
                if pending is not None:
                    yield pending
                pending = chunk
    except OSError as error:
        raise ArtifactInvalidError(f"read failed ({type(error).__name__})") from None
    if size != byte_size or digest.hexdigest() != sha256:
        raise ArtifactInvalidError("artifact bytes changed: size or sha256 differs from the receipt")
    if pending is not None:
        yield pending


class ObjectStorageArtifactStore:
    """``ArtifactStore`` port plus the write side used by extraction and adoption."""

    def __init__(self, base: ObjectStoragePath | str, *, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.base = base if isinstance(base, ObjectStoragePath) else ObjectStoragePath(base)
        self.chunk_bytes = chunk_bytes

    def object_path(self, sha256: str) -> ObjectStoragePath:
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise ArtifactInvalidError("not a SHA-256 content address")
        return self.base / "sha256" / sha256[:2] / f"{sha256}.native"

    def writer(self, max_bytes: int) -> ArtifactWriter:
        return ArtifactWriter(self, max_bytes)

    def exists(self, sha256: str) -> bool:
        return bool(self.object_path(sha256).exists())

    def stream(self, stored: StoredObject) -> Iterator[bytes]:
        """The committed object's bytes, verified while read (for the reference digest before a receipt exists)."""
        return verified_chunks(self.object_path(stored.sha256), stored.sha256, stored.byte_size, self.chunk_bytes)

    def open(self, receipt: ArtifactReceipt) -> VerifiedArtifact:
        """Reopen by ``receipt.sha256`` after checking the size (:class:`ArtifactInvalidError` otherwise); the SHA-256
        is verified while the handle streams."""
        path = self.object_path(receipt.sha256)
        try:
            if not path.exists():
                if self.base.protocol in ("file", "local"):  # a directory of one machine: say which setting it is
                    raise DponeError("DPONE_ARTIFACT_STORE_NOT_SHARED", f"sha256 {receipt.sha256[:16]}")
                raise ArtifactInvalidError("artifact missing from the store")
            if int(path.stat().st_size) != receipt.byte_size:
                raise ArtifactInvalidError("artifact size differs from the receipt")
        except (ArtifactInvalidError, DponeError):
            raise
        except Exception as error:  # noqa: BLE001
            raise ArtifactInvalidError(f"artifact unreadable ({type(error).__name__})") from None
        return VerifiedArtifact(path, receipt, self.chunk_bytes)
