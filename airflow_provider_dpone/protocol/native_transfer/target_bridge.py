"""The bridge from the route's narrow target expectation to the transfer-target port (SQL Server, PostgreSQL, fakes).

The route speaks :class:`~airflow_provider_dpone.ports.transfer.TransferTargetExpectation` (an invocation, chunk
evidence, a receipt or ``None``); the target adapters implement
:class:`~airflow_provider_dpone.ports.transfer_target.TransferTarget` (a :class:`TargetPlan`, chunk expectations,
publication observations). This module maps one onto the other and decides nothing of its own:

* every call derives the same :class:`TargetPlan` from the invocation and the bound target table, so a retry in
  another process touches exactly the same staging table and reads exactly the same receipt;
* ``reconcile``: COMMITTED -> the receipt, ABSENT -> ``None`` (absence is final at the port); a publication that may
  still be in flight raises (``target_publication_in_flight``), so the run stays held and nothing is republished;
* a receipt whose rows or digest differ from the requested publication is refused, never recorded as success.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from airflow_provider_dpone.contracts.canonical import tagged_digest
from airflow_provider_dpone.contracts.transfer_target import (
    PublicationMode,
    TargetColumn,
    TargetPlan,
)
from airflow_provider_dpone.contracts.transfer_target import UtcWindow as TargetWindow
from airflow_provider_dpone.contracts.transfer_target_receipts import (
    ChunkExpectation,
    PublicationReceipt,
    PublicationRequest,
    PublicationState,
)
from airflow_provider_dpone.contracts.transfer_target_types import StringMapping
from airflow_provider_dpone.ports.transfer import ChunkEvidence, TargetInvocation, TargetPublicationReceipt
from airflow_provider_dpone.ports.transfer_target import TransferTarget


@dataclass(frozen=True)
class TargetTable:
    """The one target table an operation publishes into (from the manifest's sink)."""

    schema: str
    table: str
    string_mapping: StringMapping = StringMapping.BINARY


def target_plan(invocation: TargetInvocation, table: TargetTable) -> TargetPlan:
    """The deterministic target plan of one invocation (validates names and column types; no I/O)."""
    window = invocation.window
    return TargetPlan(
        invocation_id=invocation.invocation_id,
        target_schema=table.schema,
        target_table=table.table,
        columns=tuple(
            TargetColumn(name=column.name, source_type=column.source_type, string_mapping=table.string_mapping)
            for column in invocation.columns
        ),
        mode=PublicationMode.FULL_REFRESH if window is None else PublicationMode.WINDOW_REPLACE,
        window=None if window is None else TargetWindow(column=window.column, start=window.start_at, end=window.end_at),
    )


def receipt_sha256(receipt: PublicationReceipt) -> str:
    """Digest of the receipt row as the target stored it (bound into the journal's ``published`` record)."""
    return tagged_digest("dpone.target-receipt.v1", receipt.model_dump(mode="json"))


def route_receipt(receipt: PublicationReceipt) -> TargetPublicationReceipt:
    return TargetPublicationReceipt(
        publication_id=receipt.publication_id,
        rows=receipt.rows,
        workload_digest=receipt.digest,
        receipt_sha256=receipt_sha256(receipt),
    )


class TargetPortBridge:
    """Implements the route's target expectation on a :class:`TransferTarget` bound to one target table."""

    def __init__(self, target: TransferTarget, table: TargetTable) -> None:
        self._target = target
        self._table = table

    @property
    def table(self) -> TargetTable:
        return self._table

    def plan(self, invocation: TargetInvocation) -> TargetPlan:
        return target_plan(invocation, self._table)

    def admit(self, invocation: TargetInvocation) -> None:
        """Building the plan refuses unsupported types, reserved names and a window on a non-temporal column."""
        self.plan(invocation)

    def prepare(self, invocation: TargetInvocation) -> None:
        self._target.prepare(self.plan(invocation))

    def load_chunk(self, invocation: TargetInvocation, ordinal: int, rows: pa.Table) -> None:
        self._target.load_chunk(self.plan(invocation), ordinal, rows)

    def verify_chunk(self, invocation: TargetInvocation, expected: ChunkEvidence) -> ChunkEvidence:
        expectation = ChunkExpectation(ordinal=expected.ordinal, rows=expected.rows, typed_sum=expected.typed_sum)
        observed = self._target.verify_chunk(self.plan(invocation), expectation)
        return ChunkEvidence(
            ordinal=observed.ordinal, rows=observed.observed_rows, typed_sum=observed.observed_typed_sum
        )

    def publish(self, invocation: TargetInvocation, chunks: Sequence[ChunkEvidence]) -> TargetPublicationReceipt:
        request = PublicationRequest(
            chunks=tuple(
                ChunkExpectation(ordinal=chunk.ordinal, rows=chunk.rows, typed_sum=chunk.typed_sum) for chunk in chunks
            )
        )
        receipt = self._target.publish(self.plan(invocation), request)
        return route_receipt(receipt.require_matches(request))

    def reconcile(self, invocation: TargetInvocation) -> TargetPublicationReceipt | None:
        observation = self._target.reconcile(self.plan(invocation))
        if observation.state is PublicationState.ABSENT or observation.receipt is None:
            return None
        return route_receipt(observation.receipt)

    def cleanup(self, invocation: TargetInvocation) -> None:
        self._target.cleanup(self.plan(invocation))
