"""The durable storage of the native transfer route on an ``ObjectStoragePath`` root: write-once objects only.

* :class:`ObjectStageStore` (``StageStore`` port): the sealed stage objects of one operation under
  ``<root>/<operation_id>/``;
* :class:`ObjectJournalStore` (``JournalStore`` port): the recovery journal, one record per object at
  ``<root>/<operation_id>/journal/<seq:08d>.json``, each created exactly once (a second writer of a sequence number
  fails with ``native_transfer.journal_conflict``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Final

from airflow.sdk import ObjectStoragePath

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.storage import ObjectStore

_NAME: Final[re.Pattern[str]] = re.compile(r"(\d{8})\.json")


class ObjectJournalStore:
    def __init__(self, root: ObjectStoragePath | str, operation_id: str) -> None:
        base = root if isinstance(root, ObjectStoragePath) else ObjectStoragePath(root)
        self._store = ObjectStore(base / operation_id)

    def append(self, seq: int, data: bytes) -> None:
        try:
            self._store.put_once(f"journal/{seq:08d}.json", data)
        except FileExistsError:
            raise DponeError(
                "native_transfer.journal_conflict", f"another process appended record {seq} first"
            ) from None

    def read_all(self) -> list[tuple[int, bytes]]:
        records: list[tuple[int, bytes]] = []
        for name in self._store.list("journal"):
            match = _NAME.fullmatch(name)
            if match is None:
                raise DponeError("native_transfer.journal_corrupt", "unexpected object in the journal")
            records.append((int(match.group(1)), self._store.get(f"journal/{name}")))
        return sorted(records)


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
