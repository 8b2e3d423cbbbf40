"""Pre-source fencing: create or resume the operation's authority row in phase LOCKED, both modes.

* no row                              -> strict insert of a new LOCKED record of the request's mode (random fence);
* this operation's row                -> resume it (inventory drift fences; an ABORTED or RELEASED operation never
                                         resumes);
* another unresolved operation        -> fenced out (no lease stealing); an unresolved record of the *other* mode
                                         says so with its own code (internal blocks external and vice versa);
* another terminal operation, same mode -> the slot is taken by a versioned CAS (COMPLETED/ABORTED/RELEASED ->
                                         LOCKED);
* a terminal record of the other mode -> mode migration: the physical truth it left is adopted first (the target
                                         observed on every member: the members it bound, each still exposing exactly
                                         what it published, equal content everywhere), then the same versioned CAS,
                                         recording the predecessor's schema and operation. Binding the artifact then
                                         observes and binds that baseline before any candidate exists.

A new external-mode operation is refused (``EXTERNAL_ADMISSION_DISABLED``) where the deployment rolled external
replication back (``ProtocolSettings.external_admission``); its own record still resumes. Before a new record is
written, every member proves that it can ``EXCHANGE`` tables (:mod:`exchange_probe`): a
member that cannot stops the fence with ``EXCHANGE_UNSUPPORTED`` before anything is fenced or staged.

A COMPLETED predecessor's per-member published facts (its candidate's UUID, row count, content digest with its version,
and parts digest) ride on the new record (``predecessor``): the baseline reuses a digest only where they still hold.
"""

from __future__ import annotations

from airflow_provider_dpone.cluster.protocol.authority_io import Current, Held
from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.protocol.exchange_probe import prove_exchange
from airflow_provider_dpone.cluster.protocol.mode import ModeBehaviour
from airflow_provider_dpone.cluster.protocol.quality_fence import successor_blocked
from airflow_provider_dpone.cluster.protocol.seal import TARGET_DIVERGENT, adoptable_engines, observe_baseline
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.phases import TERMINAL_PHASES, Phase
from airflow_provider_dpone.cluster.values.replication import VARIANTS
from airflow_provider_dpone.core.alerts import FENCED_FOREIGN_OPERATION, TOPOLOGY_DRIFT
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode


def lock_or_resume(ctx: Context, current: Current | None, mode: ModeBehaviour) -> Held:
    """The operation's held record, creating it (a record of ``mode``) if the slot is free."""
    previous: tuple[Phase, int] | None = None
    record: AuthorityRecord | None = None
    if current is not None:
        record = current.record
        if _is_own(ctx, record):
            return require_resumable(ctx, Held(record, current.version))
        _require_resolved(ctx, record)
        if not ctx.request.mode.holds(record):
            _adopt_physical_truth(ctx, record)
        previous = (record.phase, current.version)
    _require_admitted(ctx)
    prove_exchange(ctx)  # before the target is fenced: a member that cannot EXCHANGE never gets a candidate
    return ctx.create(_new_record(ctx, record, mode), previous=previous)


def require_own(ctx: Context, current: Current | None) -> Held:
    """The operation's own record for a later phase; anything else is not ready or fenced."""
    if current is None:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY", "no authority record: run the fence task first")
    record = current.record
    if _is_own(ctx, record):
        return require_resumable(ctx, Held(record, current.version))
    _require_resolved(ctx, record)
    raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY", "the target is free: run the fence task first")


def require_resumable(ctx: Context, held: Held) -> Held:
    record = held.record
    if record.phase is Phase.ABORTED:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_OPERATION_ABORTED", f"operation {record.operation_id[:16]}")
    if record.phase is Phase.RELEASED:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_OPERATION_RELEASED", f"operation {record.operation_id[:16]}")
    if record.phase is Phase.ABORTING:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_ABORT_INCOMPLETE", f"operation {record.operation_id[:16]}")
    if record.target_key != ctx.request.target_key or record.candidate_name != ctx.request.candidate_name:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_RECORD_INVALID", "record does not match the request")
    drifted = record.inventory_digest != ctx.inventory.digest or record.member_ids() != ctx.inventory.member_ids
    if drifted and record.phase is not Phase.COMPLETED:  # a completed operation is resolved; its receipt stands
        raise topology_drift(
            ctx, record, f"bound {len(record.members)} members, live {len(ctx.inventory.members)}; phase {record.phase}"
        )
    return held


def topology_drift(ctx: Context, record: AuthorityRecord, detail: str) -> DponeError:
    """Alert that the live inventory is not the one ``record`` bound; the ``INVENTORY_DRIFT`` error to raise."""
    ctx.alert(
        TOPOLOGY_DRIFT,
        phase=record.phase.value,
        members=len(record.members),
        live_members=len(ctx.inventory.members),
        code="DPONE_CLICKHOUSE_CLUSTER_INVENTORY_DRIFT",
    )
    return DponeError("DPONE_CLICKHOUSE_CLUSTER_INVENTORY_DRIFT", detail)


def fenced(ctx: Context, record: AuthorityRecord, code: str, detail: str) -> DponeError:
    """Alert that another operation's record holds the target; the error ``code`` to raise."""
    ctx.alert(FENCED_FOREIGN_OPERATION, holder_operation_id=record.operation_id, phase=record.phase.value, code=code)
    return DponeError(code, detail)


def _require_admitted(ctx: Context) -> None:
    """A new operation of a mode the deployment rolled back is refused before anything is written (seed 000,
    "Rollback disables external admission; it does not delete unresolved authority, candidates, or predecessors")."""
    if ctx.request.mode.name == ReplicationMode.EXTERNAL and not ctx.settings.external_admission:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_EXTERNAL_ADMISSION_DISABLED", "[dpone] external_replication_admission is False"
        )


def _is_own(ctx: Context, record: AuthorityRecord) -> bool:
    return ctx.request.mode.holds(record) and record.operation_id == ctx.request.operation_id


def _require_resolved(ctx: Context, record: AuthorityRecord) -> None:
    if record.phase in TERMINAL_PHASES:
        if successor_blocked(record, ctx.now()):
            raise fenced(
                ctx,
                record,
                "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED",
                f"operation {record.operation_id[:16]} is validating its quality evidence (reader fence)",
            )
        return
    if ctx.request.mode.holds(record):
        raise fenced(
            ctx,
            record,
            "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED",
            f"held by operation {record.operation_id[:16]} in phase {record.phase}",
        )
    raise fenced(
        ctx,
        record,
        VARIANTS[ReplicationMode(record.replication_mode)].unresolved_code,
        f"{record.schema_} in phase {record.phase}",
    )


def _adopt_physical_truth(ctx: Context, previous: AuthorityRecord) -> None:
    """Before a mode migration takes the slot: the previous record's members are the live ones, a COMPLETED one's
    published generation is still what every member exposes, and the target is adoptable as a baseline."""
    if previous.member_ids() != ctx.inventory.member_ids:
        raise topology_drift(
            ctx,
            previous,
            f"mode migration: {previous.schema_} bound {len(previous.members)} members, live {len(ctx.inventory.members)}",
        )
    engines = adoptable_engines(ctx, previous.schema_)
    observations = observe_baseline(ctx, ctx.inventory.member_ids, engines, previous.published())
    if previous.phase is Phase.COMPLETED:
        moved = sorted(
            member.member_id
            for member in previous.members
            if observations[member.member_id].uuid != member.published_uuid
        )
        if moved:
            raise DponeError(
                TARGET_DIVERGENT, f"mode migration: target changed since the previous commit on {ctx.labels(moved)}"
            )


def _new_record(ctx: Context, previous: AuthorityRecord | None, mode: ModeBehaviour) -> AuthorityRecord:
    now = ctx.now()
    entropy = ctx.ports.entropy
    fields: dict[str, object] = {
        "target_key": ctx.request.target_key,
        "operation_id": ctx.request.operation_id,
        "fence_token": entropy.token(),
        "phase": Phase.LOCKED,
        "dispatch_epoch": 0 if previous is None else previous.dispatch_epoch,
        "write_id": entropy.token(),
        "inventory_digest": ctx.inventory.digest,
        "normalized_plan_digest": ctx.request.normalized_plan_digest,
        "candidate_name": ctx.request.candidate_name,
        "previous_schema": None if previous is None else previous.schema_,
        "previous_operation_id": None if previous is None else previous.operation_id,
        "predecessor": () if previous is None else previous.published(),
        "created_at_ms": now,
        "updated_at_ms": now,
    }
    return mode.new_record(fields, ctx.inventory.member_ids, ctx.request.quality is not None)
