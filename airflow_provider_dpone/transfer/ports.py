"""Ports of the native transfer route: the snapshot source, the durable stage and journal, the target (the
clock is :class:`airflow_provider_dpone.core.clock.Clock`).

The protocol drives these and nothing else. Counting :meth:`SnapshotSourceConnector.connect` calls is how tests prove
that post-EOF recovery never opens the source. :class:`TransferTarget` is the one target port: the SQL Server and
PostgreSQL adapters and the test fake implement it directly.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from airflow_provider_dpone.core.columns import NativeColumn
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.query import SnapshotQuery
from airflow_provider_dpone.transfer.values.row_digest import RowDigest
from airflow_provider_dpone.transfer.values.source_observation import (
    AccessObservation,
    MutationObservation,
    PhysicalObservation,
    RelationObservation,
    ReplicaObservation,
    SelectedRows,
    ServerObservation,
    SettingsObservation,
    TransportObservation,
)
from airflow_provider_dpone.transfer.values.target_receipts import ChunkEvidence, TargetPublicationReceipt
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow


@dataclass(frozen=True)
class SourceBlock:
    """One block of the data SELECT: projection columns, each row's typed hash and, separately, provenance.

    ``columns`` is in the stage schema (``transfer/values/arrow_chunk.stage_schema``); ``row_hashes`` holds each
    row's SHA-256 over the canonical typed encoding (``core/typed_digest.row_hash``), computed by the source in
    the same SELECT. ``columns`` never contains ``_part``/``_part_offset``: provenance travels only in
    ``parts``/``offsets`` and is consumed by the coverage check, so it can never reach a stage object or the target.
    ``offsets`` may be an integer array (a zero-copy view of the result column): coverage is summed vectorised.
    """

    columns: pa.Table
    row_hashes: pa.Array
    rows: int
    parts: Sequence[str] | None = None
    offsets: Sequence[int] | npt.NDArray[np.integer[Any]] | None = None


class SnapshotSourceSession(Protocol):
    """One pinned source session: bounded metadata reads and the one data SELECT."""

    def transport(self) -> TransportObservation: ...

    def server(self) -> ServerObservation: ...

    def relation(self, relation: RelationRef) -> RelationObservation: ...

    def access(self, relation: RelationRef) -> AccessObservation: ...

    def settings(self, overlay: Mapping[str, str], names: Sequence[str]) -> SettingsObservation: ...

    def replica(self, relation: RelationRef) -> ReplicaObservation: ...

    def mutations(self, relation: RelationRef) -> MutationObservation: ...

    def physical(self, relation: RelationRef, partition_ids: Sequence[str] | None, cap: int) -> PhysicalObservation: ...

    def stream(self, query: SnapshotQuery) -> AbstractContextManager[Iterator[SourceBlock]]:
        """Run the one SELECT; the context closes (and cancels) the stream on exit, also on error."""
        ...

    def selected_rows(self, query: SnapshotQuery) -> SelectedRows:
        """The server's count of the rows ``query`` selects (per part with provenance) and the sum of their typed row
        hashes, aggregated by the server over its own values in its own statement: no row travels, and nothing the
        stream decoded is used."""
        ...

    def close(self) -> None: ...


class SnapshotSourceConnector(Protocol):
    def connect(self) -> SnapshotSourceSession: ...


class StageStore(Protocol):
    """Durable stage objects: create-once, atomically visible, never overwritten.

    ``put`` writes only into a prefix made writable by ``open_prefix`` and never recreates a retired one;
    ``delete_prefix`` retires a prefix and raises ``native_transfer.stage_retirement_failed`` (never a bare
    ``OSError``) when it cannot.
    """

    def open_prefix(self, prefix: str) -> None: ...

    def put(self, key: str, data: bytes) -> None: ...

    def get(self, key: str) -> bytes: ...

    def exists(self, key: str) -> bool: ...

    def delete(self, key: str) -> None: ...

    def delete_prefix(self, prefix: str) -> None: ...


class JournalStore(Protocol):
    """Create-once records of one operation, addressed by sequence number."""

    def append(self, seq: int, data: bytes) -> None:
        """Create record ``seq``; raise ``native_transfer.journal_conflict`` if it already exists."""
        ...

    def read_all(self) -> list[tuple[int, bytes]]:
        """Every record as ``(seq, bytes)`` in sequence order."""
        ...


@dataclass(frozen=True)
class TargetInvocation:
    """What the target needs to derive every name it owns for one invocation (its staging, its publication id).

    The target binding (schema, table, string mapping) is held by the target adapter; ``window`` selects window
    replacement, ``None`` a full refresh.
    """

    operation_id: str
    invocation_id: str
    columns: tuple[NativeColumn, ...]
    window: UtcWindow | None
    row_digest: RowDigest = RowDigest.TYPED_SHA256


class TransferTarget(Protocol):
    """Stage, verify and atomically publish one invocation's rows into the one target table the target is bound to.

    Every call takes the invocation, from which the target derives every name it touches (its staging table, its
    publication id), so any worker process can make any call after a crash without in-memory state. Lifecycle::

        admit(invocation)                       pure: refuse a column layout or window the target cannot store
        prepare(invocation)                     recreate the invocation's staging empty (and the receipt table)
        load_chunk(invocation, ordinal, rows) * one transaction per chunk; refused if that ordinal is staged
        verify_chunk(invocation, expected)    * recompute the staged chunk's count and typed sum in the target
        publish(invocation, chunks)             ONE transaction: swap or window replace + the publication receipt
        reconcile(invocation)                   the receipt, or None (after a lost acknowledgement)
        cleanup(invocation)                     drop the invocation's staging objects

    Every mutation is one-shot: no client retry, no reconnect replay. A failure either proves nothing changed
    (``target_publication_failed``, ``target_load_failed`` rolled back) or says the outcome is unknown
    (``target_publication_outcome_unknown``), resolved by ``reconcile``, never by repeating the mutation. ``publish``
    writes its receipt in the data's transaction, commits at most once per invocation
    (``target_publication_already_committed``), and refuses staging that is not exactly the requested chunks or
    (window replace) holds a row outside the window. ``reconcile`` never answers while a publishing transaction can
    still commit (``target_publication_in_flight``), so ``None`` is final. Readers of the target table see the old
    rows or the new rows, never a mixture.

    ``reads_wait_for_writers``: whether a read of staging waits on another transaction's uncommitted load (SQL
    Server's locking READ COMMITTED: row locks, escalated to a table lock by a large bulk load; PostgreSQL's MVCC
    readers never wait). When it does, the route never verifies a chunk while another chunk is loading, so no
    verification waits into a lock timeout.

    ``row_digests``: the row digest methods the target computes over what it stores (``values/row_digest.py``), the
    one a new route plans first; a call whose invocation names another is refused
    (``native_transfer.row_digest_unsupported``).
    """

    @property
    def reads_wait_for_writers(self) -> bool: ...

    @property
    def row_digests(self) -> tuple[RowDigest, ...]: ...

    def admit(self, invocation: TargetInvocation) -> None: ...

    def prepare(self, invocation: TargetInvocation) -> None: ...

    def load_chunk(self, invocation: TargetInvocation, ordinal: int, rows: pa.Table) -> None:
        """Stage one chunk (a table in the stage schema, ``transfer/values/arrow_chunk.py``) under ``ordinal``."""
        ...

    def verify_chunk(self, invocation: TargetInvocation, expected: ChunkEvidence) -> ChunkEvidence:
        """Read the staged rows of one ordinal back and return their count and typed sum as the target computes them."""
        ...

    def publish(self, invocation: TargetInvocation, chunks: Sequence[ChunkEvidence]) -> TargetPublicationReceipt: ...

    def reconcile(self, invocation: TargetInvocation) -> TargetPublicationReceipt | None: ...

    def cleanup(self, invocation: TargetInvocation) -> None:
        """Drop the invocation's staging objects (idempotent); never touches published data."""
        ...
