"""Progress logging of the native transfer operator: what the journal records and what the target was given.

Both wrap a port and pass every call through unchanged; they log phases, chunk ordinals, rows and bytes, never values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from airflow_provider_dpone.transfer.ports import (
    JournalStore,
    TargetInvocation,
    TransferTarget,
)
from airflow_provider_dpone.transfer.values.chunk import ChunkReceipt
from airflow_provider_dpone.transfer.values.journal_records import LeaseRecord, decode_record
from airflow_provider_dpone.transfer.values.target_receipts import ChunkEvidence, TargetPublicationReceipt


class ProgressJournal:
    """A journal store that logs every record it appends: phases, and per-chunk rows and bytes (no values)."""

    def __init__(self, store: JournalStore, log: Any) -> None:
        self._store = store
        self._log = log

    def append(self, seq: int, data: bytes) -> None:
        self._store.append(seq, data)
        record = decode_record(data)
        body = record.body
        if isinstance(body, LeaseRecord):
            return
        if isinstance(body, ChunkReceipt):
            self._log.info("chunk %d sealed: %d rows, %d bytes", body.ordinal, body.rows, body.object_bytes)
        else:
            self._log.info("phase %s", record.kind)

    def read_all(self) -> list[tuple[int, bytes]]:
        return self._store.read_all()


class ProgressTarget:
    """The target, logging each chunk as it was loaded and as the target verified it (counts only)."""

    def __init__(self, target: TransferTarget, log: Any) -> None:
        self._target = target
        self._log = log
        self.reads_wait_for_writers = target.reads_wait_for_writers
        self.row_digests = target.row_digests

    def admit(self, invocation: TargetInvocation) -> None:
        self._target.admit(invocation)

    def prepare(self, invocation: TargetInvocation) -> None:
        self._target.prepare(invocation)

    def load_chunk(self, invocation: TargetInvocation, ordinal: int, rows: pa.Table) -> None:
        self._target.load_chunk(invocation, ordinal, rows)
        self._log.info("chunk %d loaded into target staging: %d rows", ordinal, rows.num_rows)

    def verify_chunk(self, invocation: TargetInvocation, expected: ChunkEvidence) -> ChunkEvidence:
        observed = self._target.verify_chunk(invocation, expected)
        self._log.info("chunk %d verified by the target: %d rows", observed.ordinal, observed.rows)
        return observed

    def publish(self, invocation: TargetInvocation, chunks: Sequence[ChunkEvidence]) -> TargetPublicationReceipt:
        return self._target.publish(invocation, chunks)

    def reconcile(self, invocation: TargetInvocation) -> TargetPublicationReceipt | None:
        return self._target.reconcile(invocation)

    def cleanup(self, invocation: TargetInvocation) -> None:
        self._target.cleanup(invocation)
