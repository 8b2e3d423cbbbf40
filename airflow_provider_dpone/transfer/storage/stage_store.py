"""The durable stage of the native transfer route (``StageStore`` port) on an ``ObjectStoragePath`` root."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from airflow.sdk import ObjectStoragePath

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.storage import ObjectStore


class ObjectStageStore:
    """Stage objects of one operation under ``<root>/<operation_id>/``.

    Objects are put only into an opened prefix and never recreate it, so once ``delete_prefix`` has retired a prefix
    a late put into it fails (locally) rather than leaving an object behind the retirement.
    """

    def __init__(self, root: ObjectStoragePath | str, operation_id: str) -> None:
        base = root if isinstance(root, ObjectStoragePath) else ObjectStoragePath(root)
        self._store = ObjectStore(base / operation_id)

    def open_prefix(self, prefix: str) -> None:
        self._store.make_prefix(prefix)

    def put(self, key: str, data: bytes) -> None:
        try:
            self._store.put_once(key, data, create_parents=False)
        except FileExistsError:
            raise DponeError("native_transfer.stage_integrity_failed", "stage object already exists") from None
        except FileNotFoundError:
            raise DponeError("native_transfer.stage_integrity_failed", "stage prefix is retired or not open") from None

    def get(self, key: str) -> bytes:
        try:
            return self._store.get(key)
        except FileNotFoundError:
            raise DponeError("native_transfer.stage_integrity_failed", "stage object is missing") from None

    def exists(self, key: str) -> bool:
        return self._store.exists(key)

    def delete(self, key: str) -> None:
        with _retirement("stage object removal failed"):
            self._store.delete(key)

    def delete_prefix(self, prefix: str) -> None:
        with _retirement("stage retirement failed"):
            self._store.delete_prefix(prefix)


@contextlib.contextmanager
def _retirement(what: str) -> Iterator[None]:
    """A storage refusal while removing stage objects is a stable error (custody stays held), never a bare OSError."""
    try:
        yield
    except OSError as exc:
        raise DponeError("native_transfer.stage_retirement_failed", f"{what}: {exc.strerror}") from None
