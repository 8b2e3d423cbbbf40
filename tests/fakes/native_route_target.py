"""In-memory transfer target with the target port's semantics, for the route's recovery matrix.

Mirrors ports/transfer_target.py of the target adapters: staging is per invocation and ``prepare`` recreates it empty;
a chunk ordinal loads once; ``publish`` applies the rows and writes the receipt atomically and at most once per
invocation; ``reconcile`` reads the receipt (absence is final) and refuses to answer while a publication is in flight.
Named fault points raise :class:`Crash` (a process death: nothing after it runs) before or after the commit.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from airflow_provider_dpone.contracts.canonical import tagged_digest
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.native_arrow_chunk import chunk_rows
from airflow_provider_dpone.contracts.typed_digest import MultisetDigest
from airflow_provider_dpone.ports.transfer import ChunkEvidence, TargetInvocation, TargetPublicationReceipt


class Crash(BaseException):
    """Simulated process death: not an ``Exception``, so no cleanup handler of the route runs."""


def publication_id(invocation: TargetInvocation) -> str:
    return tagged_digest("fake.publication.v1", invocation.invocation_id)


@dataclass
class FakeRouteTarget:
    table: list[tuple[object, ...]] = field(default_factory=list)
    staging: dict[str, dict[int, list[tuple[object, ...]]]] = field(default_factory=dict)
    receipts: dict[str, TargetPublicationReceipt] = field(default_factory=dict)
    faults: set[str] = field(default_factory=set)
    in_flight: set[str] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)
    corrupt_load: bool = False
    refuse_admission: bool = False

    def _fault(self, point: str) -> None:
        if point in self.faults:
            self.faults.discard(point)
            raise Crash(point)

    def admit(self, invocation: TargetInvocation) -> None:
        self.calls.append("admit")
        if self.refuse_admission:
            raise DponeError("mssql_native.source_schema_unsupported", "target cannot store a column losslessly")

    def prepare(self, invocation: TargetInvocation) -> None:
        self.calls.append("prepare")
        self._fault("prepare.before")
        if publication_id(invocation) in self.receipts:
            raise DponeError("mssql_native.publication_outcome_unknown", "already committed")
        self.staging[invocation.invocation_id] = {}
        self._fault("prepare.after")

    def load_chunk(self, invocation: TargetInvocation, ordinal: int, rows: pa.Table) -> None:
        self.calls.append(f"load:{ordinal}")
        staged = self.staging[invocation.invocation_id]
        assert ordinal not in staged, "a chunk ordinal is loaded once per staging"
        loaded = [tuple(row) for row in chunk_rows(rows, [column.logical for column in invocation.columns])]
        if self.corrupt_load and loaded:
            loaded = loaded[:-1]
        staged[ordinal] = loaded
        self._fault(f"load.after:{ordinal}")

    def verify_chunk(self, invocation: TargetInvocation, expected: ChunkEvidence) -> ChunkEvidence:
        self.calls.append(f"verify:{expected.ordinal}")
        digest = MultisetDigest([column.typed for column in invocation.columns])
        digest.add_rows(self.staging[invocation.invocation_id].get(expected.ordinal, []))
        return ChunkEvidence(ordinal=expected.ordinal, rows=digest.rows, typed_sum=f"{digest.total:064x}")

    def publish(self, invocation: TargetInvocation, chunks: Sequence[ChunkEvidence]) -> TargetPublicationReceipt:
        self.calls.append("publish")
        key = publication_id(invocation)
        if key in self.receipts:
            raise DponeError("mssql_native.publication_outcome_unknown", "already committed")
        staged = self.staging[invocation.invocation_id]
        assert sorted(staged) == [chunk.ordinal for chunk in chunks], "staging holds exactly the sealed chunks"
        self._fault("publish.before_commit")
        rows = [row for ordinal in sorted(staged) for row in staged[ordinal]]
        digest = MultisetDigest([column.typed for column in invocation.columns])
        digest.add_rows(rows)
        if invocation.window is None:
            self.table = rows
        else:
            index = [column.name for column in invocation.columns].index(invocation.window.column)
            start, end = invocation.window.start_at, invocation.window.end_at

            def inside(row: tuple[object, ...]) -> bool:
                value = row[index]
                assert isinstance(value, dt.datetime)
                aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
                return start <= aware < end

            self.table = [row for row in self.table if not inside(row)] + rows
        receipt = TargetPublicationReceipt(
            publication_id=key,
            rows=digest.rows,
            workload_digest=digest.hexdigest,
            receipt_sha256=tagged_digest("fake.receipt.v1", key, digest.rows, digest.hexdigest),
        )
        self.receipts[key] = receipt
        self._fault("publish.after_commit")
        return receipt

    def reconcile(self, invocation: TargetInvocation) -> TargetPublicationReceipt | None:
        self.calls.append("reconcile")
        key = publication_id(invocation)
        if key in self.in_flight:
            raise DponeError("mssql_native.publication_outcome_unknown", "publication in flight")
        return self.receipts.get(key)

    def cleanup(self, invocation: TargetInvocation) -> None:
        self.calls.append("cleanup")
        self.staging.pop(invocation.invocation_id, None)
