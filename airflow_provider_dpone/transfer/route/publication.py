"""Drive the target from a sealed stage: reconcile, prepare, load, verify, publish, evidence.

Runs only after the sealed bindings and the stage were validated, and never opens the source. Every target mutation
is preceded by its journaled intent and is one-shot. An interrupted attempt is not repaired in place: ``prepare``
recreates the invocation's staging empty and the sealed chunks are loaded again from the durable stage. A publish
whose acknowledgement is lost is resolved by the target's receipt (``reconcile``), never by publishing again blindly;
proven absence ends the attempt (``native_transfer.publication_absent``) and the next run republishes source-free.

Chunks go to the target pipelined: while chunk n is verified, chunk n+1 loads and chunk n+2 is read from the stage
and checked against its receipt (``PIPELINE_DEPTH`` chunks in flight at most, so memory stays bounded by chunk size,
never by rows). On a target whose readers wait for writers (``TransferTarget.reads_wait_for_writers``: SQL Server)
loads and verifications share one thread instead, alternating in ordinal order, so a verification never waits on a
load's locks; only the stage reads overlap them. Loads write nothing to the journal, so the journal order is the sequential one; results are taken in
ordinal order, and after any failure every chunk in flight is finished or cancelled before the attempt is cleaned up.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final

import pyarrow as pa
from pydantic import BaseModel

from airflow_provider_dpone.core.alerts import CLEANUP_FAILED, PUBLICATION_UNKNOWN, AlertSink, emit
from airflow_provider_dpone.core.canonical import canonical_json_bytes, sha256_hex
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.progress import ProgressSink, report
from airflow_provider_dpone.core.typed_digest import MODULUS
from airflow_provider_dpone.transfer.ports import StageStore, TargetInvocation, TransferTarget
from airflow_provider_dpone.transfer.route.custody import LeaseKeeper
from airflow_provider_dpone.transfer.route.extraction import evidence_key, evidence_prefix, stage_prefix
from airflow_provider_dpone.transfer.route.journal import RouteJournal
from airflow_provider_dpone.transfer.route.recovery import load_verified_chunk
from airflow_provider_dpone.transfer.route.states import InvocationView, apply_record
from airflow_provider_dpone.transfer.values.chunk import NativeStageComplete, typed_sum_hex
from airflow_provider_dpone.transfer.values.journal_records import (
    PublishAbsent,
    Published,
    PublishIntent,
    RecordKind,
    Succeeded,
    TargetCleaned,
    TargetPrepareIntent,
    TargetVerified,
)
from airflow_provider_dpone.transfer.values.progress import Checkpoint, ChunkLoaded, ChunkVerified, OnCheckpoint
from airflow_provider_dpone.transfer.values.target_receipts import ChunkEvidence, TargetPublicationReceipt

EVIDENCE_KIND: Final = "dpone.native-transfer-evidence.v1"
PIPELINE_DEPTH: Final = 3
"""Chunks in flight towards the target: one read from the stage, one loading, one verifying."""
TargetFactory = Callable[[], TransferTarget]
DEFINITE_REFUSALS: Final = frozenset(
    {
        "native_transfer.target_verification_failed",
        "native_transfer.target_staging_incomplete",
        "native_transfer.target_published_window_differs",
        "native_transfer.target_swap_lock_timeout",
        "native_transfer.target_swap_blocked",
        "native_transfer.target_staging_schema_changed",
        "native_transfer.target_driver_fault",
        "native_transfer.target_rows_outside_window",
        "native_transfer.target_schema_mismatch",
        "native_transfer.target_relation_not_found",
    }
)
"""What a publishing transaction refuses before its COMMIT: reported as themselves once the receipt proves the
publication absent (any other failure of ``publish`` stays an unknown outcome resolved by observation)."""


def target_invocation(view: InvocationView) -> TargetInvocation:
    plan = view.plan
    return TargetInvocation(
        operation_id=plan.operation_id,
        invocation_id=plan.invocation_id,
        columns=plan.columns,
        window=plan.window,
        row_digest=plan.row_digest,
    )


def chunk_evidence(view: InvocationView) -> list[ChunkEvidence]:
    return [ChunkEvidence(ordinal=r.ordinal, rows=r.rows, typed_sum=r.typed_sum) for r in view.receipts]


class Publisher:
    def __init__(
        self,
        journal: RouteJournal,
        stage: StageStore,
        target: TransferTarget,
        lease: LeaseKeeper,
        checkpoint: OnCheckpoint,
        *,
        pipeline_depth: int = PIPELINE_DEPTH,
        alerts: AlertSink | None = None,
        progress: ProgressSink | None = None,
    ) -> None:
        self._alerts = alerts
        self._progress = progress
        self._journal = journal
        self._stage = stage
        self._target = target
        self._lease = lease
        self._checkpoint = checkpoint
        self._depth = max(1, pipeline_depth)

    def complete(self, view: InvocationView, complete: NativeStageComplete) -> Succeeded:
        invocation = target_invocation(view)
        pending = view.pending_publication
        if pending is not None:
            self._record_outcome(view, complete, pending.attempt, self._reconcile(view, invocation))
        if view.published is None:
            self._publish_fresh(view, complete, invocation)
        return self._finish(view, complete, invocation)

    def _append(self, view: InvocationView, kind: RecordKind, body: BaseModel) -> None:
        self._lease.ensure()
        record = self._journal.append(kind, body)
        apply_record(view, record.body, kind)

    def _record_outcome(
        self,
        view: InvocationView,
        complete: NativeStageComplete,
        attempt: int,
        receipt: TargetPublicationReceipt | None,
        refusal: DponeError | None = None,
    ) -> None:
        """``refusal``: the publishing transaction refused definitely; once the receipt proves it absent, the
        refusal is the outcome (the staging it refused is not published, and the next attempt stages again)."""
        if receipt is None:
            self._append(view, "publish_absent", PublishAbsent(invocation_id=view.invocation_id, attempt=attempt))
            if refusal is not None:
                raise refusal
            raise DponeError("native_transfer.publication_absent", "interrupted publication proven absent")
        if receipt.rows != complete.rows or receipt.digest != complete.workload_digest:
            raise self._unknown(
                view,
                DponeError("native_transfer.publication_outcome_unknown", "target receipt does not match the stage"),
            )
        published = Published(
            publication_id=receipt.publication_id,
            rows=receipt.rows,
            workload_digest=receipt.digest,
            receipt_sha256=receipt.receipt_sha256,
        )
        self._append(view, "published", published)

    def _publish_fresh(self, view: InvocationView, complete: NativeStageComplete, invocation: TargetInvocation) -> None:
        attempt = view.attempt + 1
        self._append(
            view, "target_prepare_intent", TargetPrepareIntent(invocation_id=view.invocation_id, attempt=attempt)
        )
        self._target.prepare(invocation)
        self._checkpoint(Checkpoint.PREPARED)
        differing = self._load_and_verify(view, invocation)
        if differing is not None:
            self._target.cleanup(invocation)
            self._append(view, "target_cleaned", TargetCleaned(invocation_id=view.invocation_id, attempt=attempt))
            raise DponeError(
                "native_transfer.target_verification_failed", f"chunk {differing}: target-local verification differs"
            )
        rows, total = 0, 0
        for evidence in chunk_evidence(view):
            rows += evidence.rows
            total = (total + int(evidence.typed_sum, 16)) % MODULUS
        self._checkpoint(Checkpoint.LOADED)
        if rows != complete.rows or typed_sum_hex(total) != complete.typed_sum:
            raise DponeError("native_transfer.target_verification_failed", "target totals differ from stage-complete")
        verified = TargetVerified(
            invocation_id=view.invocation_id, attempt=attempt, rows=rows, typed_sum=typed_sum_hex(total)
        )
        self._append(view, "target_verified", verified)
        self._append(view, "publish_intent", PublishIntent(invocation_id=view.invocation_id, attempt=attempt))
        self._checkpoint(Checkpoint.PUBLISH_INTENT)
        receipt: TargetPublicationReceipt | None
        refusal: DponeError | None = None
        try:
            receipt = self._target.publish(invocation, chunk_evidence(view))
        except Exception as failure:  # noqa: BLE001 - a failed one-shot publish is ambiguous: observe, never repeat
            if isinstance(failure, DponeError) and failure.code in DEFINITE_REFUSALS:
                refusal = failure
            receipt = self._reconcile(view, invocation)
        self._checkpoint(Checkpoint.PUBLISH_ACKNOWLEDGED)
        self._record_outcome(view, complete, attempt, receipt, refusal)

    def _reconcile(self, view: InvocationView, invocation: TargetInvocation) -> TargetPublicationReceipt | None:
        """The target's receipt of the invocation's publication (``None``: proven absent); a target that cannot say
        raises its own code, with the publication-unknown alert."""
        try:
            return self._target.reconcile(invocation)
        except DponeError as error:
            if error.code in PUBLICATION_UNKNOWN.codes:
                raise self._unknown(view, error) from None
            raise

    def _unknown(self, view: InvocationView, error: DponeError) -> DponeError:
        emit(
            self._alerts,
            PUBLICATION_UNKNOWN,
            operation_id=view.plan.operation_id,
            invocation_id=view.invocation_id,
            code=error.code,
        )
        return error

    def _load_and_verify(self, view: InvocationView, invocation: TargetInvocation) -> int | None:
        """Load and verify every chunk, pipelined; the first ordinal whose target evidence differs, or None.

        Three single-thread stages, each in ordinal order: read (stage object checked against its receipt), load,
        verify. A chunk's load waits for its read, its verification for its own committed load. The lease is checked
        before each chunk enters the pipeline, and at most ``depth`` chunks are in it. When the target's readers wait
        for writers, load and verify are one stage: load n, verify n, load n+1, ... on one thread.
        """
        reader, loader = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"dpone-target-{name}") for name in ("read", "load")
        )
        verifier = (
            loader
            if self._target.reads_wait_for_writers
            else ThreadPoolExecutor(max_workers=1, thread_name_prefix="dpone-target-verify")
        )

        def read(evidence: ChunkEvidence) -> pa.Table:
            return load_verified_chunk(view, evidence.ordinal, self._stage, decode_rows=True).table

        def load(evidence: ChunkEvidence, table: Future[pa.Table]) -> None:
            rows = table.result()
            self._target.load_chunk(invocation, evidence.ordinal, rows)
            report(self._progress, ChunkLoaded(evidence.ordinal, rows.num_rows))

        def verify(evidence: ChunkEvidence, loaded: Future[None]) -> bool:
            loaded.result()
            observed = self._target.verify_chunk(invocation, evidence)
            report(self._progress, ChunkVerified(observed.ordinal, observed.rows))
            return observed == evidence

        in_flight: deque[tuple[int, Future[bool]]] = deque()
        try:
            for evidence in chunk_evidence(view):
                if len(in_flight) >= self._depth:
                    ordinal, verified = in_flight.popleft()
                    if not verified.result():
                        return ordinal
                self._lease.ensure()
                table = reader.submit(read, evidence)
                loaded = loader.submit(load, evidence, table)
                in_flight.append((evidence.ordinal, verifier.submit(verify, evidence, loaded)))
            for ordinal, verified in in_flight:
                if not verified.result():
                    return ordinal
            return None
        finally:
            for pool in dict.fromkeys((reader, loader, verifier)):
                pool.shutdown(wait=True, cancel_futures=True)

    def _finish(self, view: InvocationView, complete: NativeStageComplete, invocation: TargetInvocation) -> Succeeded:
        published = view.published
        if published is None:
            raise DponeError("native_transfer.publication_outcome_unknown", "no recorded publication")
        extension = complete.completion_metadata.source_snapshot_v1
        evidence = canonical_json_bytes(
            {
                "kind": EVIDENCE_KIND,
                "operation_id": view.plan.operation_id,
                "invocation_id": view.invocation_id,
                "source_query_id": view.plan.source_query_id,
                "rows": complete.rows,
                "chunks": complete.chunks,
                "workload_digest": complete.workload_digest,
                "publication_id": published.publication_id,
                "target_receipt_sha256": published.receipt_sha256,
                "source_eof_descriptor_sha256": None if extension is None else extension.source_eof_descriptor_sha256,
                "endpoint_authority_agreement": (
                    None if extension is None else extension.source_eof.endpoint_authority_agreement
                ),
            }
        )
        key = evidence_key(view.invocation_id, "route")
        if not self._stage.exists(key):
            self._stage.open_prefix(evidence_prefix(view.invocation_id))
            self._stage.put(key, evidence)
        elif self._stage.get(key) != evidence:
            raise DponeError("native_transfer.stage_integrity_failed", "stored route evidence differs")
        succeeded = Succeeded(
            invocation_id=view.invocation_id,
            publication_id=published.publication_id,
            rows=complete.rows,
            workload_digest=complete.workload_digest,
            evidence_sha256=sha256_hex(evidence),
        )
        self._append(view, "succeeded", succeeded)
        self._checkpoint(Checkpoint.SUCCEEDED)
        return succeeded

    def retire(self, view: InvocationView) -> bool:
        """Best effort after success: drop target staging and stage chunks; never replaces the outcome."""
        try:
            self._target.cleanup(target_invocation(view))
            self._stage.delete_prefix(stage_prefix(view.invocation_id))
        except Exception as failure:  # noqa: BLE001 - cleanup is best effort by contract
            coded = {"code": failure.code} if isinstance(failure, DponeError) else {}
            emit(
                self._alerts,
                CLEANUP_FAILED,
                operation_id=view.plan.operation_id,
                invocation_id=view.invocation_id,
                **coded,
            )
            return False
        return True
