"""Read-only summary of one operation's journal: what the operator reports and how it classifies a failure.

Only sanitized facts leave here: opaque ids, counts, digests and phase names. Nothing is written and the source and
target are never contacted, so it is safe to call after any failure (a corrupt journal still fails closed).
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_dpone.transfer.ports import JournalStore
from airflow_provider_dpone.transfer.route.journal import RouteJournal
from airflow_provider_dpone.transfer.route.states import RouteState, fold


@dataclass(frozen=True)
class OperationSummary:
    """The last invocation of an operation (``None`` fields before the first plan)."""

    invocations: int
    state: RouteState
    invocation_id: str | None
    settled_reason: str | None
    chunks_sealed: int
    rows_sealed: int
    stage_complete: bool
    workload_digest: str | None
    source_snapshot_profile_sha256: str | None
    source_eof_descriptor_sha256: str | None
    target_attempts: int

    def evidence(self) -> dict[str, object]:
        return {
            "invocations": self.invocations,
            "state": self.state.value,
            "chunks": self.chunks_sealed,
            "stage_complete": self.stage_complete,
            "source_snapshot_profile_sha256": self.source_snapshot_profile_sha256,
            "source_eof_descriptor_sha256": self.source_eof_descriptor_sha256,
            "target_attempts": self.target_attempts,
        }


def summarize(store: JournalStore) -> OperationSummary:
    views = fold(RouteJournal(store).load())
    if not views:
        return OperationSummary(0, RouteState.PLANNED, None, None, 0, 0, False, None, None, None, 0)
    last = views[-1]
    complete = last.stage_complete
    extension = None if complete is None else complete.completion_metadata.source_snapshot_v1
    return OperationSummary(
        invocations=len(views),
        state=last.state(),
        invocation_id=last.invocation_id,
        settled_reason=None if last.settled is None else last.settled.reason,
        chunks_sealed=len(last.receipts),
        rows_sealed=sum(receipt.rows for receipt in last.receipts),
        stage_complete=complete is not None,
        workload_digest=None if complete is None else complete.workload_digest,
        source_snapshot_profile_sha256=None if extension is None else extension.source_snapshot_profile_sha256,
        source_eof_descriptor_sha256=None if extension is None else extension.source_eof_descriptor_sha256,
        target_attempts=last.attempt,
    )
