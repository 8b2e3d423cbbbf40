"""The recovery journal of the native transfer route (``JournalStore`` port) on an ``ObjectStoragePath`` root.

Records live at ``<root>/<operation_id>/journal/<seq:08d>.json``; each is created exactly once.
"""

from __future__ import annotations

import re
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
