"""Drive the target from a sealed stage: settle old custody, prepare, load, verify, publish, evidence.

Runs only after the sealed bindings and the stage were validated, and never opens the source. Every target mutation
is preceded by its journaled intent and is one-shot: a prepare whose outcome is unknown is resolved by discarding
that staging (observed removal of our own object) and preparing a fresh one; a publish whose acknowledgement is lost
is resolved by the target's receipt (``reconcile``), never by publishing again under the same id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from pydantic import BaseModel

from airflow_provider_dpone.contracts.canonical import canonical_json_bytes, sha256_hex
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.native_chunk import NativeStageComplete
from airflow_provider_dpone.contracts.native_journal import (
    PublishAbsent,
    Published,
    PublishIntent,
    Succeeded,
    TargetDiscarded,
    TargetPrepareIntent,
    TargetVerified,
)
from airflow_provider_dpone.ports.transfer import (
    StageStore,
    TargetPublicationReceipt,
    TargetStagingPlan,
    TransferTargetExpectation,
    TypedChunk,
)
from airflow_provider_dpone.protocol.native_transfer.custody import LeaseKeeper
from airflow_provider_dpone.protocol.native_transfer.extraction import Checkpoint, evidence_key, stage_prefix
from airflow_provider_dpone.protocol.native_transfer.journal import RouteJournal
from airflow_provider_dpone.protocol.native_transfer.recovery import load_verified_chunk
from airflow_provider_dpone.protocol.native_transfer.states import InvocationView, apply_record

TargetFactory = Callable[[], TransferTargetExpectation]
EVIDENCE_KIND: Final = "dpone.native-transfer-evidence.v1"


class Publisher:
    def __init__(
        self,
        journal: RouteJournal,
        stage: StageStore,
        target: TransferTargetExpectation,
        lease: LeaseKeeper,
        checkpoint: Checkpoint,
    ) -> None:
        self._journal = journal
        self._stage = stage
        self._target = target
        self._lease = lease
        self._checkpoint = checkpoint

    def complete(self, view: InvocationView, complete: NativeStageComplete) -> Succeeded:
        self._settle_previous(view, complete)
        if view.published is None:
            self._publish_fresh(view, complete)
        return self._finish(view, complete)

    def _append(self, view: InvocationView, kind: str, body: BaseModel) -> None:
        self._lease.ensure()
        record = self._journal.append(kind, body)
        apply_record(view, record.body, kind)

    def _settle_previous(self, view: InvocationView, complete: NativeStageComplete) -> None:
        pending = view.pending_publication
        if pending is not None:
            receipt = self._target.reconcile(pending.publication_id)
            self._record_outcome(view, complete, pending.publication_id, receipt)
        for staging_id in view.live_stagings:
            self._target.discard(staging_id)
            self._append(view, "target_discarded", TargetDiscarded(staging_id=staging_id))

    def _record_outcome(
        self,
        view: InvocationView,
        complete: NativeStageComplete,
        publication_id: str,
        receipt: TargetPublicationReceipt | None,
    ) -> None:
        if receipt is None:
            self._append(view, "publish_absent", PublishAbsent(publication_id=publication_id))
            raise DponeError("mssql_native.publication_absent", "interrupted publication proven absent")
        if (
            receipt.publication_id != publication_id
            or receipt.rows != complete.rows
            or receipt.workload_digest != complete.workload_digest
        ):
            raise DponeError("mssql_native.publication_outcome_unknown", "target receipt does not match the stage")
        self._append(
            view,
            "published",
            Published(
                publication_id=publication_id,
                rows=receipt.rows,
                workload_digest=receipt.workload_digest,
                receipt_sha256=receipt.receipt_sha256,
            ),
        )

    def _publish_fresh(self, view: InvocationView, complete: NativeStageComplete) -> None:
        attempt = len(view.prepares) + 1
        staging_id = f"s{view.invocation_id[:20]}a{attempt}"
        publication_id = f"p{view.invocation_id[:20]}a{attempt}"
        self._append(
            view,
            "target_prepare_intent",
            TargetPrepareIntent(invocation_id=view.invocation_id, attempt=attempt, staging_id=staging_id),
        )
        self._target.prepare(
            TargetStagingPlan(
                operation_id=view.plan.operation_id,
                invocation_id=view.invocation_id,
                staging_id=staging_id,
                columns=view.plan.columns,
                window=view.plan.window,
                expected_rows=complete.rows,
                expected_workload_digest=complete.workload_digest,
            )
        )
        self._checkpoint("prepared")
        for ordinal, sealed in enumerate(view.receipts):
            chunk = load_verified_chunk(view, ordinal, self._stage, decode_rows=True)
            self._target.load_chunk(staging_id, TypedChunk(ordinal, view.plan.columns, chunk.rows, sealed.typed_sum))
        self._checkpoint("loaded")
        verification = self._target.verify(staging_id)
        if verification.rows != complete.rows or verification.typed_sum != complete.typed_sum:
            self._target.discard(staging_id)
            self._append(view, "target_discarded", TargetDiscarded(staging_id=staging_id))
            raise DponeError("mssql_native.target_verification_failed", "target-local digest differs from the stage")
        self._append(
            view,
            "target_verified",
            TargetVerified(staging_id=staging_id, rows=verification.rows, typed_sum=verification.typed_sum),
        )
        self._append(view, "publish_intent", PublishIntent(staging_id=staging_id, publication_id=publication_id))
        self._checkpoint("publish_intent")
        receipt: TargetPublicationReceipt | None
        try:
            receipt = self._target.publish(staging_id, publication_id)
        except Exception as exc:
            if isinstance(exc, DponeError) and exc.code != "mssql_native.publication_outcome_unknown":
                raise
            receipt = self._target.reconcile(publication_id)
        self._checkpoint("publish_acknowledged")
        self._record_outcome(view, complete, publication_id, receipt)

    def _finish(self, view: InvocationView, complete: NativeStageComplete) -> Succeeded:
        published = view.published
        if published is None:
            raise DponeError("mssql_native.publication_outcome_unknown", "no recorded publication")
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
                "endpoint_authority_agreement": None
                if extension is None
                else extension.source_eof.endpoint_authority_agreement,
            }
        )
        key = evidence_key(view.invocation_id, "route")
        if self._stage.exists(key):
            if self._stage.get(key) != evidence:
                raise DponeError("mssql_native.stage_integrity_failed", "stored route evidence differs")
        else:
            self._stage.put(key, evidence)
        succeeded = Succeeded(
            invocation_id=view.invocation_id,
            publication_id=published.publication_id,
            rows=complete.rows,
            workload_digest=complete.workload_digest,
            evidence_sha256=sha256_hex(evidence),
        )
        self._append(view, "succeeded", succeeded)
        self._checkpoint("succeeded")
        return succeeded

    def retire_stage(self, view: InvocationView) -> bool:
        """Best effort after success: a cleanup failure never replaces the outcome."""
        try:
            self._stage.delete_prefix(stage_prefix(view.invocation_id))
        except Exception:  # noqa: BLE001 - cleanup is best effort by contract
            return False
        return True
