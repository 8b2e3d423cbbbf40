"""Ports of the native transfer route: the snapshot source, the durable stage and journal, a clock, the target.

The protocol drives these and nothing else. Counting :meth:`SnapshotSourceConnector.connect` calls is how tests prove
that post-EOF recovery never opens the source. The target interface here is this route's narrow expectation of the
target port (prepare, load, verify, publish, reconcile, discard); it is kept in one place so it can be reconciled
with the target adapters' own port module.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

from airflow_provider_dpone.contracts.native_chunk import RelationRef
from airflow_provider_dpone.contracts.native_query import SnapshotQuery
from airflow_provider_dpone.contracts.native_schema import NativeColumn
from airflow_provider_dpone.contracts.native_source_observation import (
    AccessObservation,
    MutationObservation,
    PhysicalObservation,
    RelationObservation,
    ReplicaObservation,
    ServerObservation,
    SettingsObservation,
    TransportObservation,
)
from airflow_provider_dpone.contracts.native_window import UtcWindow


@dataclass(frozen=True)
class SourceBlock:
    """One block of the data SELECT: projection columns, each row's typed hash and, separately, provenance.

    ``columns`` is in the stage schema (``contracts/native_arrow_chunk.stage_schema``); ``row_hashes`` holds each
    row's SHA-256 over the canonical typed encoding (``contracts/typed_digest.row_hash``), computed by the source in
    the same SELECT. ``columns`` never contains ``_part``/``_part_offset``: provenance travels only in
    ``parts``/``offsets`` and is consumed by the coverage check, so it can never reach a stage object or the target.
    """

    columns: pa.Table
    row_hashes: pa.Array
    rows: int
    parts: Sequence[str] | None = None
    offsets: Sequence[int] | None = None


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

    def close(self) -> None: ...


class SnapshotSourceConnector(Protocol):
    def connect(self) -> SnapshotSourceSession: ...


class StageStore(Protocol):
    """Durable stage objects: create-once, atomically visible, never overwritten."""

    def put(self, key: str, data: bytes) -> None: ...

    def get(self, key: str) -> bytes: ...

    def exists(self, key: str) -> bool: ...

    def delete_prefix(self, prefix: str) -> None: ...


class JournalStore(Protocol):
    """Create-once records of one operation, addressed by sequence number."""

    def append(self, seq: int, data: bytes) -> None:
        """Create record ``seq``; raise ``mssql_native.journal_conflict`` if it already exists."""
        ...

    def read_all(self) -> list[tuple[int, bytes]]:
        """Every record as ``(seq, bytes)`` in sequence order."""
        ...


class Clock(Protocol):
    def now(self) -> dt.datetime: ...


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


@dataclass(frozen=True)
class ChunkEvidence:
    """A sealed chunk's count and typed sum (hex), as its receipt records them."""

    ordinal: int
    rows: int
    typed_sum: str


@dataclass(frozen=True)
class TargetPublicationReceipt:
    """Proof, read from the target, that the invocation's one publication committed."""

    publication_id: str
    rows: int
    workload_digest: str
    receipt_sha256: str


class TransferTargetExpectation(Protocol):
    """This route's narrow expectation of the target port (ports/transfer_target.py mirrors it one to one).

    Every mutation is one-shot. ``prepare`` recreates the invocation's staging empty; ``publish`` writes the data and
    its receipt in one transaction and commits at most once per invocation; ``reconcile`` returns the receipt, or
    ``None`` when absence is final, and raises while a publication may still be in flight.
    """

    def admit(self, invocation: TargetInvocation) -> None:
        """Refuse a column layout or window the target cannot store losslessly (pure, before any row I/O)."""
        ...

    def prepare(self, invocation: TargetInvocation) -> None: ...

    def load_chunk(self, invocation: TargetInvocation, ordinal: int, rows: pa.Table) -> None:
        """Stage one chunk (a table in the stage schema) under ``ordinal``."""
        ...

    def verify_chunk(self, invocation: TargetInvocation, expected: ChunkEvidence) -> ChunkEvidence:
        """Read the staged rows of one ordinal back and return their count and typed sum as the target computes them."""
        ...

    def publish(self, invocation: TargetInvocation, chunks: Sequence[ChunkEvidence]) -> TargetPublicationReceipt: ...

    def reconcile(self, invocation: TargetInvocation) -> TargetPublicationReceipt | None: ...

    def cleanup(self, invocation: TargetInvocation) -> None:
        """Drop the invocation's staging objects (idempotent); never touches published data."""
        ...
