"""The transfer target: where verified chunks are staged and atomically published (SQL Server, PostgreSQL, fakes).

The port is intent-based and narrow. Every call takes the invocation's :class:`TargetPlan`, from which the target
derives every name it touches, so any worker process can make any call after a crash without in-memory state.

Lifecycle of one invocation::

    prepare(plan)                          create the invocation's empty staging table (and the receipt table)
    load_chunk(plan, ordinal, rows)  *     one transaction per chunk; refused if that ordinal is already staged
    verify_chunk(plan, expectation)  *     read the chunk back from staging and recompute its typed digest
    publish(plan, request)                 ONE transaction: swap or window replace + the publication receipt
    reconcile(plan)                        committed | absent, by the receipt (after a lost acknowledgement)
    cleanup(plan)                          drop the invocation's staging objects

Rules every implementation keeps:

* Every mutation is one-shot: no client retry, no reconnect replay. A failure either proves nothing changed
  (``target_publication_failed``, ``target_load_failed`` with the transaction rolled back) or says the outcome is
  unknown (``target_publication_outcome_unknown``); an unknown outcome is resolved by ``reconcile`` / ``verify_chunk``,
  never by repeating the mutation.
* ``publish`` writes the receipt row in the same transaction as the data, keyed by ``plan.publication_id``, and
  serializes with ``reconcile`` on a per-publication lock: reconcile never answers while a publishing transaction
  can still commit (it raises ``target_publication_in_flight`` instead), so ``absent`` is final.
* ``publish`` refuses when the receipt already exists (``target_publication_already_committed``), when staging does
  not hold exactly the requested chunk row counts, or (window replace) when a staged row lies outside the window.
* Readers of the target table see the old rows or the new rows, never a mixture.
* Rows are sequences of Python values in ``plan.columns`` order: ``int`` (integers, UInt64 included), ``Decimal``,
  ``bytes``/``str`` (strings; ``str`` is taken as UTF-8), ``bool``, ``datetime.date``, ``datetime.datetime`` (aware
  UTC, or naive meaning UTC), ``uuid.UUID``, and ``None`` for NULL in a nullable column. A chunk may also arrive as
  an Arrow table in the stage schema (``contracts/native_arrow_chunk.py``), as the route hands it over: a bulk
  target loads it as is, a row target reads it through ``native_arrow_chunk.chunk_rows``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeAlias, runtime_checkable

import pyarrow as pa

from airflow_provider_dpone.contracts.transfer_target import TargetPlan
from airflow_provider_dpone.contracts.transfer_target_receipts import (
    ChunkExpectation,
    ChunkLoad,
    ChunkVerification,
    CleanupReport,
    PublicationObservation,
    PublicationReceipt,
    PublicationRequest,
    StagingReady,
)

Row = Sequence[object]
ChunkData: TypeAlias = pa.Table | Iterable[Row]


@runtime_checkable
class TransferTarget(Protocol):
    """Stage, verify and atomically publish one invocation's rows into one target table."""

    def prepare(self, plan: TargetPlan) -> StagingReady:
        """Create the invocation's staging table empty (dropping a leftover of the same invocation).

        Also creates the receipt table if absent and, for ``window_replace``, checks that the target table exists
        with the planned columns. Refused with ``target_publication_already_committed`` once the publication
        committed, so a late retry can never rebuild staging after the swap.
        """
        ...

    def load_chunk(self, plan: TargetPlan, ordinal: int, rows: ChunkData) -> ChunkLoad:
        """Load one chunk into staging in one transaction, tagged with ``ordinal`` (not published)."""
        ...

    def verify_chunk(self, plan: TargetPlan, expectation: ChunkExpectation) -> ChunkVerification:
        """Read the staged rows of ``expectation.ordinal`` back and compare count and typed digest (no mutation)."""
        ...

    def discard_chunk(self, plan: TargetPlan, ordinal: int) -> int:
        """Delete the staged rows of one ordinal (after a failed verification); returns the rows deleted."""
        ...

    def publish(self, plan: TargetPlan, request: PublicationRequest) -> PublicationReceipt:
        """Publish staging into the target and write the receipt, in one transaction."""
        ...

    def reconcile(self, plan: TargetPlan) -> PublicationObservation:
        """Observe whether the publication committed, by its receipt; never changes anything."""
        ...

    def cleanup(self, plan: TargetPlan) -> CleanupReport:
        """Drop the invocation's staging objects (idempotent; waits out an in-flight publication via its lock)."""
        ...


__all__ = ["Row", "TransferTarget"]
