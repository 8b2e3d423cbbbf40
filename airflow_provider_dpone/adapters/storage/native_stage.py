"""The durable stage of the native transfer route (``StageStore`` port) on an ``ObjectStoragePath`` root."""

from __future__ import annotations

from airflow.sdk import ObjectStoragePath

from airflow_provider_dpone.adapters.storage.object_store import ObjectStore
from airflow_provider_dpone.contracts.errors import DponeError


class ObjectStageStore:
    """Stage objects of one operation under ``<root>/<operation_id>/``."""

    def __init__(self, root: ObjectStoragePath | str, operation_id: str) -> None:
        base = root if isinstance(root, ObjectStoragePath) else ObjectStoragePath(root)
        self._store = ObjectStore(base / operation_id)

    def put(self, key: str, data: bytes) -> None:
        try:
            self._store.put_once(key, data)
        except FileExistsError:
            raise DponeError("mssql_native.stage_integrity_failed", "stage object already exists") from None

    def get(self, key: str) -> bytes:
        try:
            return self._store.get(key)
        except FileNotFoundError:
            raise DponeError("mssql_native.stage_integrity_failed", "stage object is missing") from None

    def exists(self, key: str) -> bool:
        return self._store.exists(key)

    def delete_prefix(self, prefix: str) -> None:
        self._store.delete_prefix(prefix)
