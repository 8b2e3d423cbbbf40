"""Entry points, one per Airflow task: ``fence``, ``stage``, ``publish`` (+ read-only ``reconcile_publication`` for a
deferrable poller), ``cleanup`` (+ ``reconcile_cleanup``) and the operator's ``abort``.

Every entry point starts the same way, whatever happened before: live runtime admission (inventory drift fences),
then a fresh read of the authority. The authority record alone decides what to resume; results returned to Airflow
are for humans and pollers, never trusted by a later task. Each entry point is idempotent: calling it again after
success returns the same outcome without mutating anything.
"""

from __future__ import annotations

from airflow_provider_dpone.contracts.authority_external import ExternalAuthorityRecord
from airflow_provider_dpone.contracts.authority_phases import MemberStage, Phase
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.receipts_publication import build_receipt
from airflow_provider_dpone.ports.publication import ArtifactSource
from airflow_provider_dpone.protocol.abort import abort_before_publication
from airflow_provider_dpone.protocol.authority_io import Current, Held, read_current
from airflow_provider_dpone.protocol.cleanup import dispatch_cleanup, reconcile_cleanup
from airflow_provider_dpone.protocol.cleanup import redispatch_void as redispatch_cleanup
from airflow_provider_dpone.protocol.context import Context, ProtocolSettings, PublicationPorts
from airflow_provider_dpone.protocol.fence import lock_or_resume, require_own
from airflow_provider_dpone.protocol.publication import dispatch_publication, reconcile_publication
from airflow_provider_dpone.protocol.publication import redispatch_void as redispatch_publication
from airflow_provider_dpone.protocol.reconcile import Reconciliation, Verdict
from airflow_provider_dpone.protocol.request import PublicationRequest
from airflow_provider_dpone.protocol.results import (
    Aborted,
    CleanupResult,
    Committed,
    Completed,
    FenceResult,
    InProgress,
    PublishResult,
    StageResult,
)
from airflow_provider_dpone.protocol.runtime_facts import admit_runtime
from airflow_provider_dpone.protocol.seal import bind_artifact_and_baseline
from airflow_provider_dpone.protocol.staging import stage_all

_NOT_YET_PUBLISHED = frozenset({Phase.LOCKED, Phase.STAGING, Phase.STAGED})


class ExternalPublicationService:
    """The external-replication full refresh of one target, for one scheduler invocation."""

    def __init__(
        self, ports: PublicationPorts, request: PublicationRequest, settings: ProtocolSettings | None = None
    ) -> None:
        self.ports = ports
        self.request = request
        self.settings = settings or ProtocolSettings()

    # --- entry points ---------------------------------------------------------------------------------------------

    def fence(self) -> FenceResult:
        """Create or resume this operation's authority row (LOCKED) before any source I/O."""
        ctx, current = self._begin()
        held = lock_or_resume(ctx, current)
        record = held.record
        return FenceResult(record.operation_id, record.target_key, record.phase.value, record.candidate_name)

    def stage(self, source: ArtifactSource) -> StageResult:
        """Seal and bind the artifact (only while none is bound), then stage every member to READY and CAS STAGED."""
        ctx, current = self._begin()
        held = require_own(ctx, current)
        if held.record.phase is Phase.LOCKED:
            held = bind_artifact_and_baseline(ctx, held, source)
        if held.record.phase is Phase.STAGING:
            held = stage_all(ctx, held)
        record = held.record
        ready = sum(member.stage is MemberStage.READY for member in record.members)
        return StageResult(record.operation_id, record.phase.value, record.generation_id, ready)

    def publish(self) -> PublishResult:
        """Dispatch the one publication DDL (from STAGED) or resume it; committed receipt or what to poll."""
        return self._publication(allow_dispatch=True)

    def reconcile_publication(self) -> PublishResult:
        """Read-only poll of the bound publication (plus the COMMITTED CAS when complete); never dispatches."""
        return self._publication(allow_dispatch=False)

    def cleanup(self) -> CleanupResult:
        """Drop exactly the predecessor (one fenced DDL) and CAS COMPLETED once it is absent everywhere."""
        return self._cleanup(allow_dispatch=True)

    def reconcile_cleanup(self) -> CleanupResult:
        return self._cleanup(allow_dispatch=False)

    def abort(self) -> Aborted:
        """Operator action before publication: drop exactly the owned candidates and CAS ABORTED."""
        ctx, current = self._begin()
        if current is None or not isinstance(current.record, ExternalAuthorityRecord):
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY", "no external operation holds the target")
        record = current.record
        if record.operation_id != self.request.operation_id:
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED", "abort only the operation of this run")
        if record.phase is not Phase.ABORTED:
            if not set(record.member_ids()) <= set(ctx.inventory.member_ids):
                raise DponeError("DPONE_CLICKHOUSE_CLUSTER_INVENTORY_DRIFT", "a bound member left the inventory")
            record = abort_before_publication(ctx, Held(record, current.version)).record
        return Aborted(record.operation_id, record.phase.value)

    # --- phases ---------------------------------------------------------------------------------------------------

    def _begin(self) -> tuple[Context, Current | None]:
        inventory = admit_runtime(self.ports.catalog, self.request)
        ctx = Context(self.ports, self.request, inventory, self.settings)
        return ctx, read_current(self.ports.authority, self.request.target_key)

    def _publication(self, *, allow_dispatch: bool) -> PublishResult:
        ctx, current = self._begin()
        held = require_own(ctx, current)
        phase = held.record.phase
        if phase in (Phase.LOCKED, Phase.STAGING):
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY", f"phase {phase}: stage first")
        if phase is Phase.STAGED:
            if not allow_dispatch:
                raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY", "publication not dispatched yet")
            held = dispatch_publication(ctx, held)
        if held.record.phase is Phase.PUBLICATION_DISPATCHING:
            progress = reconcile_publication(ctx, held)
            if progress.reconciliation.verdict is Verdict.VOID and allow_dispatch:
                progress = reconcile_publication(ctx, redispatch_publication(ctx, progress.held))
            held = progress.held
            if held.record.phase is Phase.PUBLICATION_DISPATCHING:
                return self._in_progress(held, "publication", progress.reconciliation)
        return Committed(build_receipt(held.record, held.version))

    def _cleanup(self, *, allow_dispatch: bool) -> CleanupResult:
        ctx, current = self._begin()
        held = require_own(ctx, current)
        phase = held.record.phase
        if phase in _NOT_YET_PUBLISHED or phase is Phase.PUBLICATION_DISPATCHING:
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY", f"phase {phase}: publish first")
        if phase is Phase.COMMITTED:
            if not allow_dispatch:
                raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY", "cleanup not dispatched yet")
            held = dispatch_cleanup(ctx, held)
        if held.record.phase is Phase.CLEANUP_DISPATCHING:
            progress = reconcile_cleanup(ctx, held)
            if progress.reconciliation.verdict is Verdict.VOID and allow_dispatch:
                progress = reconcile_cleanup(ctx, redispatch_cleanup(ctx, progress.held))
            held = progress.held
            if held.record.phase is Phase.CLEANUP_DISPATCHING:
                return self._in_progress(held, "cleanup", progress.reconciliation)
        return Completed(build_receipt(held.record, held.version))

    @staticmethod
    def _in_progress(held: Held, stage: str, reconciliation: Reconciliation) -> InProgress:
        binding = held.record.publication if stage == "publication" else held.record.cleanup
        assert binding is not None
        return InProgress(
            operation_id=held.record.operation_id,
            stage="publication" if stage == "publication" else "cleanup",
            epoch=binding.epoch,
            correlation_token=binding.correlation_token,
            entry=reconciliation.entry,
            pending_members=reconciliation.pending,
            redispatch_due=reconciliation.verdict is Verdict.VOID,
        )
