"""The recovery journal on a create-once store: sequence, hash chain and closed records.

Every append but a lease's is reported to the progress sink (a chunk as sealed, any other record as its phase).
Appends are create-once at the next sequence number, so two writers can never both append record ``n``: the loser
gets ``native_transfer.journal_conflict`` and must stop. That is the fencing primitive the writer lease builds on.
"""

from __future__ import annotations

from pydantic import BaseModel

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.progress import ProgressSink, report
from airflow_provider_dpone.transfer.ports import JournalStore
from airflow_provider_dpone.transfer.values.chunk import ChunkReceipt
from airflow_provider_dpone.transfer.values.journal_records import (
    GENESIS,
    JournalRecord,
    LeaseRecord,
    RecordKind,
    decode_record,
    encode_record,
)
from airflow_provider_dpone.transfer.values.progress import ChunkSealed, JournalRecorded


class RouteJournal:
    """The decoded, chain-verified records of one operation, and appends that extend the chain."""

    def __init__(self, store: JournalStore, progress: ProgressSink | None = None) -> None:
        self._store = store
        self._progress = progress
        self._records: list[JournalRecord] = []

    @property
    def records(self) -> list[JournalRecord]:
        return list(self._records)

    def load(self) -> list[JournalRecord]:
        records: list[JournalRecord] = []
        previous = GENESIS
        for expected, (seq, raw) in enumerate(self._store.read_all()):
            if seq != expected:
                raise DponeError("native_transfer.journal_corrupt", f"record {expected} is missing")
            record = decode_record(raw)
            if record.seq != seq:
                raise DponeError("native_transfer.journal_corrupt", f"record {seq} names sequence {record.seq}")
            if record.prev_sha256 != previous:
                raise DponeError("native_transfer.journal_corrupt", f"record {seq} breaks the hash chain")
            previous = record.sha256
            records.append(record)
        self._records = records
        return self.records

    def append(self, kind: RecordKind, body: BaseModel) -> JournalRecord:
        seq = len(self._records)
        previous = self._records[-1].sha256 if self._records else GENESIS
        raw = encode_record(seq, previous, kind, body)
        self._store.append(seq, raw)
        record = decode_record(raw)
        self._records.append(record)
        if isinstance(body, ChunkReceipt):
            report(self._progress, ChunkSealed(body.ordinal, body.rows, body.object_bytes))
        elif not isinstance(body, LeaseRecord):
            report(self._progress, JournalRecorded(kind))
        return record
