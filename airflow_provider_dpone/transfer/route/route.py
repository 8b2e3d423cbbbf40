"""The transfer route state machine: extract once, seal, publish; recover without guessing.

``run`` is safe to call again after any crash (an Airflow retry or a cleared run calls it with the same request):

* a live lease of another runner is held custody: ``native_transfer.custody_held``, nothing else happens;
* an invocation interrupted before EOF is settled (its lease fenced or released, so its writer has stopped; target
  custody cannot exist before EOF), its stage retired, and a NEW invocation re-extracts - never resuming by offset;
* a sealed invocation is validated from the journal alone (marker, extension, profile, EOF, counts) BEFORE the target
  is bound, then from the stage, and completed with zero source connections;
* a succeeded operation returns its recorded outcome.

With a :class:`TargetCustody`, the run also holds the target table's lease (taken after the operation lease, checked
and renewed with it), so two operations never work on one target table at the same time.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from airflow_provider_dpone.core.alerts import REASONS, REEXTRACT_REQUIRED, AlertSink, emit
from airflow_provider_dpone.core.clock import Clock
from airflow_provider_dpone.core.errors import REGISTRY, DponeError
from airflow_provider_dpone.core.progress import ProgressSink, report
from airflow_provider_dpone.transfer.ports import (
    JournalStore,
    SnapshotSourceConnector,
    StageStore,
    TargetInvocation,
    TransferTarget,
)
from airflow_provider_dpone.transfer.route.admission import SourceRequest, admit
from airflow_provider_dpone.transfer.route.custody import LeaseKeeper
from airflow_provider_dpone.transfer.route.extraction import Producer, stage_prefix
from airflow_provider_dpone.transfer.route.journal import RouteJournal
from airflow_provider_dpone.transfer.route.publication import Publisher, TargetFactory
from airflow_provider_dpone.transfer.route.recovery import validate_sealed_bindings, validate_stage
from airflow_provider_dpone.transfer.route.states import InvocationView, RouteState, apply_record, fold
from airflow_provider_dpone.transfer.route.target_custody import TargetCustody
from airflow_provider_dpone.transfer.values.chunk import NativeStageComplete
from airflow_provider_dpone.transfer.values.journal_records import InvocationSettled
from airflow_provider_dpone.transfer.values.progress import Checkpoint, CheckpointReached, OnCheckpoint
from airflow_provider_dpone.transfer.values.raw_snapshot import decode_source_marker


@dataclass(frozen=True)
class RouteResult:
    operation_id: str
    invocation_id: str
    rows: int
    workload_digest: str
    publication_id: str
    resumed_from: RouteState
    settled_invocations: tuple[str, ...]
    source_connections: int
    endpoint_authority_agreement: bool | None
    stage_retired: bool


def _new_id() -> str:
    return uuid.uuid4().hex


class NativeTransferRoute:
    def __init__(
        self,
        request: SourceRequest,
        *,
        connector: SnapshotSourceConnector,
        journal_store: JournalStore,
        stage: StageStore,
        target_factory: TargetFactory,
        clock: Clock,
        lease_duration: dt.timedelta = dt.timedelta(minutes=10),
        checkpoint: OnCheckpoint | None = None,
        new_id: Callable[[], str] = _new_id,
        target_custody: TargetCustody | None = None,
        alerts: AlertSink | None = None,
        progress: ProgressSink | None = None,
    ) -> None:
        self._request = request
        self._connector = connector
        self._journal = RouteJournal(journal_store, progress)
        self._stage = stage
        self._target_factory = target_factory
        self._on_checkpoint = checkpoint
        self._progress = progress
        self._new_id = new_id
        self._alerts = alerts
        self._lease = LeaseKeeper(
            self._journal, clock, new_id(), lease_duration, alerts=alerts, facts={"operation_id": request.operation_id}
        )
        self._target_custody = target_custody
        self.source_connections = 0
        self._bound_target: TransferTarget | None = None

    def _checkpoint(self, point: Checkpoint) -> None:
        """Report ``point`` as progress, then hand it to the checkpoint hook."""
        report(self._progress, CheckpointReached(point))
        if self._on_checkpoint is not None:
            self._on_checkpoint(point)

    def _target(self) -> TransferTarget:
        """Bind the target (runtime bindings, connection) on first use only."""
        if self._bound_target is None:
            self._bound_target = self._target_factory()
        return self._bound_target

    def run(self) -> RouteResult:
        views = fold(self._journal.load())
        last = views[-1] if views else None
        resumed_from = last.state() if last is not None else RouteState.PLANNED
        if last is not None and last.succeeded is not None:
            return self._result(last, resumed_from, (), stage_retired=False)
        self._lease.acquire()
        self._acquire_target_custody()
        current: InvocationView | None = None
        try:
            settled: tuple[str, ...] = ()
            if last is not None and last.state() is RouteState.EXTRACTING:
                self._settle_unsealed(last, "interrupted_before_eof")
                settled = (last.invocation_id,)
            elif last is not None and last.stage_complete is not None:
                current = last
            if current is None:
                current = self._extract()
                complete = validate_sealed_bindings(current, self._request)
            else:
                complete = validate_sealed_bindings(current, self._request)
                validate_stage(current, self._stage)
            publisher = Publisher(
                self._journal,
                self._stage,
                self._target(),
                self._lease,
                self._checkpoint,
                alerts=self._alerts,
                progress=self._progress,
            )
            publisher.complete(current, complete)
            retired = publisher.retire(current)
            self._lease.release()
            return self._result(current, resumed_from, settled, stage_retired=retired)
        except Exception as exc:
            self._stop_cleanly(exc)
            raise

    def _acquire_target_custody(self) -> None:
        """Take the target table's lease; on refusal give the operation lease back (nothing was written)."""
        if self._target_custody is None:
            return
        try:
            self._target_custody.acquire()
        except BaseException:
            with contextlib.suppress(Exception):
                self._lease.release()
            raise
        self._lease.join(self._target_custody)

    def _extract(self) -> InvocationView:
        invocation_id = self._new_id()
        session = self._connector.connect()
        self.source_connections += 1
        try:
            admitted = admit(session, self._request, invocation_id, f"dpone-{invocation_id}")
            plan = admitted.plan
            self._target().admit(
                TargetInvocation(plan.operation_id, invocation_id, plan.columns, plan.window, plan.row_digest)
            )
            Producer(self._journal, self._stage, self._lease, self._checkpoint, self._alerts).extract(session, admitted)
        finally:
            session.close()
        return fold(self._journal.records)[-1]

    def _settle_unsealed(self, view: InvocationView, reason: str) -> None:
        """Writer custody is settled (lease ours) and no target custody exists before EOF: retire and record.

        The proof that the old writer is terminal is the fence: our lease was taken only after its lease expired plus
        the skew margin, and its writer thread puts a stage object only while its own lease is live (checked after
        the put too). So the retirement below runs after any object it could keep. If the storage refuses the
        retirement, ``native_transfer.stage_retirement_failed`` propagates, nothing is recorded and custody stays held.
        """
        decode_source_marker(view.plan.source_query_id)
        self._stage.delete_prefix(stage_prefix(view.invocation_id))
        self._lease.ensure()
        settled = InvocationSettled(
            invocation_id=view.invocation_id, outcome="reextract_required", reason=reason, stage_retired=True
        )
        record = self._journal.append("invocation_settled", settled)
        apply_record(view, record.body, "invocation_settled")
        emit(
            self._alerts,
            REEXTRACT_REQUIRED,
            operation_id=view.plan.operation_id,
            invocation_id=view.invocation_id,
            reason=reason if reason in REASONS or reason in REGISTRY else "unexpected_error",
            code="native_transfer.reextract_required",
        )

    def _stop_cleanly(self, error: Exception) -> None:
        """After a clean failure this process has stopped writing: settle what it owns; never mask ``error``.

        A fenced writer (journal conflict) owns nothing any more and writes nothing. If settling fails, the lease is
        still released only when the invocation was settled; otherwise it stays held until expiry, and the next run
        settles it after fencing.
        """
        if isinstance(error, DponeError) and error.code == "native_transfer.journal_conflict":
            return
        try:
            views = fold(self._journal.records)
            if views and views[-1].state() is RouteState.EXTRACTING:
                reason = error.code if isinstance(error, DponeError) else type(error).__name__
                self._settle_unsealed(views[-1], reason)
        except Exception:  # noqa: BLE001 - cleanup failure never replaces the primary error; the lease stays held
            return
        with contextlib.suppress(Exception):
            self._lease.release()

    def _result(
        self, view: InvocationView, resumed_from: RouteState, settled: tuple[str, ...], *, stage_retired: bool
    ) -> RouteResult:
        succeeded = view.succeeded
        complete: NativeStageComplete | None = view.stage_complete
        if succeeded is None or complete is None:
            raise DponeError("native_transfer.publication_outcome_unknown", "route ended without a recorded success")
        extension = complete.completion_metadata.source_snapshot_v1
        return RouteResult(
            operation_id=view.plan.operation_id,
            invocation_id=view.invocation_id,
            rows=succeeded.rows,
            workload_digest=succeeded.workload_digest,
            publication_id=succeeded.publication_id,
            resumed_from=resumed_from,
            settled_invocations=settled,
            source_connections=self.source_connections,
            endpoint_authority_agreement=None
            if extension is None
            else extension.source_eof.endpoint_authority_agreement,
            stage_retired=stage_retired,
        )
