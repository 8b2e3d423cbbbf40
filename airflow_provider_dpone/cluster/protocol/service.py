"""The publication service: one entry point per Airflow task, the same for both replication modes.

Service API (what the four operators call, identically in internal and external mode)::

    service = publication_service(ports, request, settings)      # or PublicationService(ports, request, settings)
    service.fence()                  -> FenceResult      # fence task: create/resume the LOCKED record, before source I/O
    service.stage(source)            -> StageResult      # stage task: seal + bind the artifact once, stage to STAGED
    service.publish()                -> PublishResult    # publish task: dispatch the one publication DDL or resume it
    service.reconcile_publication()  -> PublishResult    # deferred poll: read-only (+ the COMMITTED CAS); never dispatches
    service.cleanup()                -> CleanupResult    # cleanup task: dispatch the one predecessor DROP or resume it
    service.reconcile_cleanup()      -> CleanupResult    # deferred poll: read-only (+ the COMPLETED CAS)
    service.abort()                  -> Aborted          # operator action, before publication only
    service.void_permit()            -> Voided           # operator action: release a permit proven dead
    service.release(decision, ...)   -> Released         # operator action: end a publication stopped after its swap

Every result carries the phase before and after the call and, for stage, each member's progress: the task logs and
pushes them without a read of its own.

Whenever the publication entry points find or make the record COMMITTED, they observe every member's target once
more (:mod:`after_commit`): the receipt carries the look (``after_commit``), and a target that changed after the
check raises ``PUBLISHED_CHANGED_AFTER_COMMIT`` with the committed result, COMMITTED unchanged.

``PublishResult = InProgress | Committed`` and ``CleanupResult = InProgress | Completed`` (:mod:`results`); the receipt
of :class:`Committed`/:class:`Completed` is the external or the internal receipt schema, by mode. Failures are
:class:`~airflow_provider_dpone.core.errors.DponeError` with stable codes (the operators map them to retry or
terminal failure).

The mode is the admitted manifest's ``replication_mode``: the request carries its data (``request.mode``,
:mod:`~airflow_provider_dpone.cluster.values.replication`), and the service, the machine, holds its behaviour
(``self.mode``, :mod:`mode` names everything that differs) and hands it to the steps that differ; nothing ever falls
back to the other mode. The modes differ mainly in staging: external stages one
candidate per member (:mod:`staging`), internal creates one replicated candidate ON CLUSTER, loads it once and waits
for convergence (:mod:`replicated_staging`). Fencing, the artifact, publication, cleanup and abort are shared, and
every ON CLUSTER DDL is one :mod:`ddl_step`.

With durable quality replay selected (internal mode only), the capsule is bound by the STAGED write, required intact
and PREPARED before the publication DDL, and settled (:mod:`quality_replay`) by every entry point that finds the
operation committed: publish completes it, cleanup starts only after it is COMPLETE, and replays validate it.

Every entry point starts the same way, whatever happened before: live runtime admission (inventory drift fences)
and a fresh read of the authority (concurrent reads; both answer before anything is decided), once per task (the
stage task takes them before describing the source, :func:`bound_columns`, and its stage call starts from them).
The authority record alone decides what to resume; results returned to Airflow are for humans and pollers, never
trusted by a later task. Each entry point is idempotent: calling it again after
success returns the same outcome without mutating anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from airflow_provider_dpone.cluster.ports import ArtifactSource
from airflow_provider_dpone.cluster.protocol.abort import abort_before_publication
from airflow_provider_dpone.cluster.protocol.after_commit import look_again, require_unchanged
from airflow_provider_dpone.cluster.protocol.authority_io import Current, Held, read_current
from airflow_provider_dpone.cluster.protocol.cleanup import clean_up
from airflow_provider_dpone.cluster.protocol.context import Context, ProtocolSettings, PublicationPorts, alongside
from airflow_provider_dpone.cluster.protocol.ddl_step import StepProgress
from airflow_provider_dpone.cluster.protocol.fence import fenced, lock_or_resume, require_own, topology_drift
from airflow_provider_dpone.cluster.protocol.mode import MODES, ModeBehaviour
from airflow_provider_dpone.cluster.protocol.publication import publish
from airflow_provider_dpone.cluster.protocol.quality_evidence import require_capsule
from airflow_provider_dpone.cluster.protocol.quality_replay import settle
from airflow_provider_dpone.cluster.protocol.release import release
from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
from airflow_provider_dpone.cluster.protocol.results import (
    Aborted,
    CleanupResult,
    Committed,
    Completed,
    FenceResult,
    InProgress,
    PublishResult,
    Released,
    StageResult,
    Voided,
    capsule_of,
    phase_of,
)
from airflow_provider_dpone.cluster.protocol.runtime_admission import admit_quality_selection, admit_runtime
from airflow_provider_dpone.cluster.protocol.seal import bind_artifact_and_baseline
from airflow_provider_dpone.cluster.protocol.void_permit import require_voidable, void_permit
from airflow_provider_dpone.cluster.values.authority.phases import TERMINAL_PHASES, Phase
from airflow_provider_dpone.cluster.values.authority.release import ReleaseDecision
from airflow_provider_dpone.cluster.values.inventory import AdmittedInventory
from airflow_provider_dpone.cluster.values.publication_receipts import PublicationReceipt
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode

_NOT_YET_PUBLISHED = frozenset({Phase.LOCKED, Phase.STAGING, Phase.STAGED})


@dataclass(frozen=True)
class Begun:
    """How an entry point starts: the live runtime admission and the authority record as read (both at once, both
    answered before anything is decided). Taken by :func:`bound_columns` for the stage task, and handed to the
    stage entry point of the same task, so that the task admits and reads once."""

    request: PublicationRequest
    inventory: AdmittedInventory
    current: Current | None


def begin(ports: PublicationPorts, request: PublicationRequest, settings: ProtocolSettings) -> Begun:
    """Runtime admission and the authority read, two independent reads: concurrently when members' work may run
    concurrently (``member_parallelism`` > 1). An admission failure is raised first, as in order."""
    parallelism = settings.member_parallelism
    inventory, current = alongside(
        lambda: admit_runtime(ports.catalog, request, parallelism=parallelism),
        lambda: read_current(ports.authority, request.target_key),
        parallelism,
    )
    return Begun(request, inventory, current)


class PublicationService:
    """The full refresh of one target, for one scheduler invocation, in the request's replication mode."""

    def __init__(
        self,
        ports: PublicationPorts,
        request: PublicationRequest,
        settings: ProtocolSettings | None = None,
        *,
        begun: Begun | None = None,
    ) -> None:
        self.ports = ports
        self.request = request
        self.settings = settings or ProtocolSettings()
        if begun is not None and begun.request != request:
            raise ValueError("the admission handed on was taken for another request")
        self._begun = begun

    @property
    def mode(self) -> ModeBehaviour:
        """What this machine's replication mode does differently (the request carries only the mode's data)."""
        return MODES[self.request.replication_mode]

    # --- entry points ---------------------------------------------------------------------------------------------

    def fence(self, columns: tuple[tuple[str, str], ...] | None = None) -> FenceResult:
        """Create or resume this operation's authority row (LOCKED) before any source I/O; a quality selection
        that cannot be observed is refused first (:func:`admit_quality_selection`). ``columns``: the source's typed
        columns as described (metadata only), which only a policy that observes columns needs."""
        ctx, current = self._begin()
        admit_quality_selection(self.request, self.ports.acceptance, columns)
        record = lock_or_resume(ctx, current, self.mode).record
        return FenceResult(
            operation_id=record.operation_id,
            target_key=record.target_key,
            phase=record.phase.value,
            candidate_name=record.candidate_name,
            replication_mode=ReplicationMode(record.replication_mode),
            phase_before=_phase(current),
        )

    def stage(self, source: ArtifactSource) -> StageResult:
        """Seal and bind the artifact (only while none is bound), then stage every member to READY and CAS STAGED.

        The candidates' table is the request's declared table with the typed columns of ``source`` (the source's
        description, or the bound artifact's columns on a retry), refused before anything is read if it is invalid."""
        self.request.candidate_table(source.columns)
        ctx, current = self._begin()
        admit_quality_selection(self.request, self.ports.acceptance, source.columns)  # before the seal, any write
        held = require_own(ctx, current)
        names = None
        if held.record.phase is Phase.LOCKED:
            held, names = bind_artifact_and_baseline(ctx, held, source, self.mode.first_intents)
        if held.record.phase is Phase.STAGING:
            held = self.mode.stage(ctx, held, names)
        if self.request.quality is not None and held.record.phase is Phase.STAGED:
            require_capsule(ctx, held.record)  # a retry of a stage whose gates failed fails the same way
        record, mode = held.record, self.mode
        return StageResult(
            operation_id=record.operation_id,
            phase=record.phase.value,
            generation_id=record.generation_id,
            ready_members=mode.ready_members(record),
            replication_mode=ReplicationMode(record.replication_mode),
            phase_before=_phase(current),
            schema=record.schema_,
            artifact=record.artifact,
            members=mode.progress(record, ctx.inventory.positions(record.inventory_digest)),
            load_member_id=mode.load_member(record),
            quality=capsule_of(record),
        )

    def publish(self) -> PublishResult:
        """Dispatch the one publication DDL (from STAGED) or resume it; committed receipt (after the look of
        :mod:`after_commit` while COMMITTED) or what to poll."""
        return self._publication(allow_dispatch=True)

    def reconcile_publication(self) -> PublishResult:
        """Read-only poll of the bound publication (plus the COMMITTED CAS when complete); never dispatches."""
        return self._publication(allow_dispatch=False)

    def cleanup(self) -> CleanupResult:
        """Drop exactly the predecessor (one fenced DDL) and CAS COMPLETED once it is absent everywhere."""
        return self._cleanup(allow_dispatch=True)

    def reconcile_cleanup(self) -> CleanupResult:
        """Read-only poll of the bound cleanup (plus the COMPLETED CAS when complete); never dispatches."""
        return self._cleanup(allow_dispatch=False)

    def abort(self) -> Aborted:
        """Operator action before publication: fence (CAS ABORTING), drop exactly the owned candidates, CAS ABORTED;
        resumes an abort that stopped after its fence."""
        ctx, current = self._begin()
        if current is None or not self.request.mode.holds(current.record):
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY", "no operation of this mode holds the target")
        record = before = current.record
        if record.operation_id != self.request.operation_id:
            raise fenced(
                ctx, record, "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED", "abort only the operation of this run"
            )
        if record.phase is not Phase.ABORTED:
            if not set(record.member_ids()) <= set(ctx.inventory.member_ids):
                raise topology_drift(ctx, record, "a bound member left the inventory")
            record = abort_before_publication(ctx, Held(record, current.version), self.mode).record
        return Aborted(record.operation_id, record.phase.value, phase_before=before.phase.value)

    def void_permit(self, *, retired_server_uuid: str | None = None) -> Voided:
        """Operator action: release a permit whose dispatch is unproven, with recorded proof that its request can no
        longer execute (:mod:`void_permit`); the next publish, cleanup or stage attempt takes a new permit.
        ``retired_server_uuid``: the pinned coordinator lost its data directory and was recreated with a new UUID on
        the same host; the operator states its old identity is retired."""
        ctx, current = self._begin()
        held = require_voidable(ctx, current)
        before = held.record.phase
        held, proof = void_permit(ctx, held, self.mode, retired_server_uuid=retired_server_uuid)
        permit = proof.permit
        assert permit.correlation_token is not None  # a voided permit was dispatched (model invariant)
        return Voided(
            operation_id=held.record.operation_id,
            step=proof.step,
            epoch=permit.epoch,
            correlation_token=permit.correlation_token,
            server_started_at_ms=proof.server_started_at_ms,
            server_uuid=proof.server.server_uuid,
            phase_before=before.value,
            phase=held.record.phase.value,
        )

    def release(self, decision: ReleaseDecision, *, accepted_row_count: int | None = None) -> Released:
        """Operator action: end a publication stopped after its swap (:mod:`release`) as ``restored`` (every member
        swapped back by hand) or ``accepted`` (every member serves the same content, ``accepted_row_count`` rows):
        checked on every member, recorded by one CAS as RELEASED, which frees the target for a new run. A retry after
        RELEASED reports the same release."""
        ctx, current = self._begin()
        if current is None or not self.request.mode.holds(current.record):
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY", "no operation of this mode holds the target")
        record = before = current.record
        if record.operation_id != self.request.operation_id:
            holder = f"operation {record.operation_id[:16]} in phase {record.phase}"
            if record.phase in TERMINAL_PHASES:  # an ended holder: the run's operation holds nothing
                raise DponeError(
                    "DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOTHING_TO_RELEASE", f"the target's record is {holder}"
                )
            raise fenced(ctx, record, "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED", f"held by {holder}")
        if record.phase is not Phase.RELEASED and (
            record.inventory_digest != ctx.inventory.digest or record.member_ids() != ctx.inventory.member_ids
        ):
            raise topology_drift(ctx, record, "release observes every bound member")
        record = release(ctx, Held(record, current.version), decision, accepted_row_count).record
        done = record.release
        assert done is not None
        return Released(
            operation_id=record.operation_id,
            decision=done.decision,
            stopped_by=done.stopped_by,
            accepted_row_count=done.accepted_row_count,
            target_digests={member.member_id: member.content_digest for member in done.members},
            phase_before=before.phase.value,
            phase=record.phase.value,
        )

    # --- phases ---------------------------------------------------------------------------------------------------

    def _begin(self) -> tuple[Context, Current | None]:
        """The entry point's :func:`begin`: the one handed on by the task for its first entry point call (taken
        moments before in the same task, see :func:`bound_columns`), else a fresh one."""
        begun, self._begun = self._begun, None
        if begun is None:
            begun = begin(self.ports, self.request, self.settings)
        current, bound = begun.current, None
        if current is not None and current.record.operation_id == self.request.operation_id:
            bound = current.record.inventory_digest  # the operation's; with no record yet, a fence binds the live one
        return Context(self.ports, self.request, begun.inventory, self.settings, bound_digest=bound), current

    def _publication(self, *, allow_dispatch: bool) -> PublishResult:
        ctx, current = self._begin()
        held = require_own(ctx, current)
        phase = held.record.phase
        if phase in (Phase.LOCKED, Phase.STAGING):
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY", f"phase {phase}: stage first")
        if phase in (Phase.STAGED, Phase.PUBLICATION_DISPATCHING):
            if self.request.quality is not None:
                require_capsule(ctx, held.record)  # bound before dispatch; FAILED never publishes
            progress = publish(ctx, held, allow_dispatch=allow_dispatch)
            if not progress.complete:
                return _in_progress(ctx, progress, "publication", before=phase)
            held = progress.held
        held = settle(ctx, held)  # a quality guard that refuses a changed target keeps its own code
        look = look_again(ctx, held.record) if held.record.phase is Phase.COMMITTED else None
        receipt = _receipt(ctx, held, self.mode).model_copy(update={"after_commit": look})
        return require_unchanged(Committed(receipt, phase_before=phase.value))

    def _cleanup(self, *, allow_dispatch: bool) -> CleanupResult:
        ctx, current = self._begin()
        held = require_own(ctx, current)
        phase = held.record.phase
        if phase in _NOT_YET_PUBLISHED or phase is Phase.PUBLICATION_DISPATCHING:
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY", f"phase {phase}: publish first")
        held = settle(ctx, held)  # cleanup never starts before the capsule is COMPLETE; replays validate it
        if phase in (Phase.COMMITTED, Phase.CLEANUP_DISPATCHING):
            progress = clean_up(ctx, held, allow_dispatch=allow_dispatch)
            if not progress.complete:
                return _in_progress(ctx, progress, "cleanup", before=phase)
            held = progress.held
        return Completed(_receipt(ctx, held, self.mode), phase_before=phase.value)


def bound_columns(
    ports: PublicationPorts, request: PublicationRequest, settings: ProtocolSettings | None = None
) -> tuple[tuple[tuple[str, str], ...] | None, Begun]:
    """The typed columns of the artifact this operation bound, which the stage task's source extracts: a retry
    recreates candidates exactly as bound even if the source changed meanwhile. ``None`` when none is bound yet.

    Taken with the stage entry point's own start (:func:`begin`: live runtime admission, so a mode that does not
    match the cluster's ``internal_replication`` flag fails before the caller touches the source to describe it,
    and the authority read), which is returned for the task to hand to its stage call
    (``publication_service(..., begun=...)``): the task admits once.
    """
    begun = begin(ports, request, settings or ProtocolSettings())
    record = None if begun.current is None else begun.current.record
    if record is not None and record.operation_id == request.operation_id and record.artifact is not None:
        return record.artifact.schema_pairs, begun
    return None, begun


def publication_service(
    ports: PublicationPorts,
    request: PublicationRequest,
    settings: ProtocolSettings | None = None,
    *,
    begun: Begun | None = None,
) -> PublicationService:
    """The service every publication operator builds per task try (both modes; see the module docstring);
    ``begun``: the task's admission and read already taken for this request (:func:`bound_columns`)."""
    return PublicationService(ports, request, settings, begun=begun)


def _phase(current: Current | None) -> str:
    return phase_of(None if current is None else current.record)


def _receipt(ctx: Context, held: Held, mode: ModeBehaviour) -> PublicationReceipt:
    """The mode's receipt of a committed record, its members named with the bound inventory's positions."""
    record = held.record
    return mode.receipt(record, held.version, ctx.inventory.positions(record.inventory_digest))


def _in_progress(
    ctx: Context, progress: StepProgress, stage: Literal["publication", "cleanup"], *, before: Phase
) -> InProgress:
    record = progress.held.record
    binding = record.publication if stage == "publication" else record.cleanup
    assert binding is not None
    return InProgress(
        operation_id=record.operation_id,
        stage=stage,
        epoch=binding.epoch,
        correlation_token=binding.correlation_token,
        entry=progress.reconciliation.entry,
        pending_members=progress.reconciliation.pending,
        phase_before=before.value,
        phase=record.phase.value,
        member_count=len(record.members),
        positions=ctx.inventory.positions(record.inventory_digest),
    )
