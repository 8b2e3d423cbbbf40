"""Create-once, atomically visible objects on Airflow's ``ObjectStoragePath`` (file://, s3://, gs://, ...).

Why create-once: the recovery journal's fencing and the stage's tamper evidence both rely on an object never being
overwritten. On a local filesystem an object is written to a unique temporary file, flushed and fsynced, then
published with ``link`` (which fails if the name exists) and the directory is fsynced: readers see either nothing or
the complete bytes. On other filesystems the filesystem's exclusive-create mode (``xb``) is required (on S3 it is a
PutObject with ``If-None-Match: *``); a filesystem without it is refused rather than silently downgraded to a racy
exists-then-put. An empty object is refused on every backend: s3fs writes a zero-byte ``xb`` file without the
condition. A server that drops the condition cannot be seen from one write: :func:`probe_create_once` writes one
probe object twice and refuses a store that accepts the second write.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from typing import Final
from urllib.parse import urlsplit

from airflow.sdk import ObjectStoragePath

from airflow_provider_dpone.core.errors import DponeError

_KEY: Final[re.Pattern[str]] = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*/?")
_LOCAL: Final = frozenset({"file", "local"})
PROBE_PREFIX: Final = "_dpone_create_once_probe"
PROBE_CODE: Final = "native_transfer.stage_store_overwrites"


def require_store_url(url: str, code: str) -> str:
    """``url`` when Airflow has a filesystem for its scheme; else ``code``, naming the scheme (a typo, or the provider
    that registers it is not installed: ``s3`` needs apache-airflow-providers-amazon, ``gs`` the Google one)."""
    from airflow.sdk.io.fs import has_fs

    scheme = urlsplit(url).scheme or "file"
    if not has_fs(scheme):
        raise DponeError(code, f"no filesystem for the scheme {scheme!r} of the configured store URL")
    return url


def _check_key(key: str) -> str:
    if not _KEY.fullmatch(key) or any(part in ("", ".", "..") for part in key.rstrip("/").split("/")):
        raise DponeError("native_transfer.storage_unsupported", "object key is not a plain relative path")
    return key


class ObjectStore:
    """Objects under one root; keys are plain relative paths."""

    def __init__(self, root: ObjectStoragePath | str) -> None:
        self.root = root if isinstance(root, ObjectStoragePath) else ObjectStoragePath(root)
        self._local = self.root.protocol in _LOCAL

    def path(self, key: str) -> ObjectStoragePath:
        return self.root / _check_key(key)

    def put_once(self, key: str, data: bytes, *, create_parents: bool = True) -> None:
        """Create ``key`` with ``data``; ``FileExistsError`` if it already exists (never overwritten).

        Without ``create_parents`` a local put into a missing (retired) directory fails with ``FileNotFoundError``
        instead of recreating it: that is how a retired stage prefix fences a late writer.
        """
        target = self.path(key)
        if not data:
            raise DponeError("native_transfer.storage_unsupported", "an empty object cannot be created once")
        if self._local:
            self._put_local(target.path, data, create_parents=create_parents)
            return
        if create_parents:
            target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with target.open("xb") as handle:  # type: ignore[no-untyped-call]
                handle.write(data)
        except FileExistsError:
            raise
        except (ValueError, NotImplementedError, TypeError):
            raise DponeError("native_transfer.storage_unsupported", "filesystem lacks exclusive create") from None

    @staticmethod
    def _put_local(final: str, data: bytes, *, create_parents: bool) -> None:
        directory = os.path.dirname(final)
        if create_parents:
            os.makedirs(directory, exist_ok=True)
        temporary = os.path.join(directory, f".tmp-{uuid.uuid4().hex}")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
        try:
            with os.fdopen(descriptor, "wb", buffering=1024 * 1024) as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.link(temporary, final)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        directory_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)

    def get(self, key: str) -> bytes:
        return self.path(key).read_bytes()

    def exists(self, key: str) -> bool:
        return self.path(key).exists()

    def list(self, prefix: str) -> list[str]:
        """Names directly under ``prefix`` (temporary files excluded), sorted."""
        directory = self.path(prefix)
        if not directory.exists():
            return []
        return sorted(child.name for child in directory.iterdir() if not child.name.startswith((".tmp-", ".retired-")))

    def make_prefix(self, prefix: str) -> None:
        """Create the directory of ``prefix`` (on object stores a no-op, as it was before every put)."""
        if self._local:
            os.makedirs(self.path(prefix).path, exist_ok=True)
        else:
            self.path(prefix).mkdir(parents=True, exist_ok=True)

    def delete(self, key: str) -> None:
        """Remove one object; an absent object is already removed."""
        with contextlib.suppress(FileNotFoundError):
            self.path(key).unlink()

    def delete_prefix(self, prefix: str) -> None:
        """Remove every object under ``prefix``.

        Locally the directory is first renamed away atomically, so a writer still holding the old path can neither
        create a file in the tree being removed (no ``Directory not empty``) nor recreate the prefix when its puts
        use ``create_parents=False``. Object stores have no directories: the writer-side fence covers them.
        """
        directory = self.path(prefix)
        if not self._local:
            if directory.exists():
                directory.fs.rm(directory.path, recursive=True)
            return
        parent, name = os.path.split(directory.path.rstrip("/"))
        with contextlib.suppress(FileNotFoundError):
            os.rename(os.path.join(parent, name), os.path.join(parent, f".retired-{name}-{uuid.uuid4().hex}"))
        try:
            leftovers = [entry for entry in os.listdir(parent) if entry.startswith(f".retired-{name}-")]
        except FileNotFoundError:
            return
        for entry in leftovers:  # this retirement's tree and any an interrupted one left
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(os.path.join(parent, entry))


def probe_create_once(store: ObjectStore) -> None:
    """Write one fresh probe object twice: the second write must be refused and leave the first bytes.

    A store that accepts it (an S3-compatible server that ignores ``If-None-Match``, a filesystem whose ``xb`` is an
    ordinary write) would let two tries overwrite each other's journal records and stage objects silently:
    ``native_transfer.stage_store_overwrites``. The probe object is removed either way. Cost: two writes, one read, one delete.
    """
    key = f"{PROBE_PREFIX}/{uuid.uuid4().hex}"
    first = b"dpone create-once probe: first write"
    store.put_once(key, first)
    try:
        try:
            store.put_once(key, b"dpone create-once probe: second write")
        except FileExistsError:
            if store.get(key) == first:
                return
            raise DponeError(PROBE_CODE, "the refused second write changed the probe object") from None
        raise DponeError(PROBE_CODE, "a second write of the probe object was accepted")
    finally:
        store.delete(key)
