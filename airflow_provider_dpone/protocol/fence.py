"""Pre-source fencing: create or resume the operation's authority row in phase LOCKED (seed 000 §2).

* no row                       -> strict insert of a new LOCKED record (random fence token);
* this operation's row         -> resume it (inventory drift fences; an ABORTED operation never resumes);
* another unresolved operation -> fenced out (no lease stealing);
* another terminal operation   -> the slot is taken by a versioned CAS (COMPLETED/ABORTED -> LOCKED);
* an internal (V1/V2) record   -> unresolved blocks external mode; a terminal one is succeeded by the same CAS,
                                  recording the predecessor's schema and operation (mode migration).
"""

from __future__ import annotations

from airflow_provider_dpone.contracts.authority_codec import AuthorityRecord
from airflow_provider_dpone.contracts.authority_external import ExternalAuthorityRecord, MemberRecord
from airflow_provider_dpone.contracts.authority_phases import TERMINAL_PHASES, Phase
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.protocol.authority_io import Current, Held
from airflow_provider_dpone.protocol.context import Context


def lock_or_resume(ctx: Context, current: Current | None) -> Held:
    """The operation's held record, creating it if the slot is free."""
    if current is not None:
        record = current.record
        if isinstance(record, ExternalAuthorityRecord) and record.operation_id == ctx.request.operation_id:
            return require_resumable(ctx, Held(record, current.version))
        _require_resolved(record)
    previous = None if current is None else (current.record.phase, current.version)
    return ctx.create(_new_record(ctx, current.record if current else None), previous=previous)


def require_own(ctx: Context, current: Current | None) -> Held:
    """The operation's own record for a later phase; anything else is not ready or fenced."""
    if current is None:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY", "no authority record: run the fence task first")
    record = current.record
    if isinstance(record, ExternalAuthorityRecord) and record.operation_id == ctx.request.operation_id:
        return require_resumable(ctx, Held(record, current.version))
    _require_resolved(record)
    raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY", "the target is free: run the fence task first")


def require_resumable(ctx: Context, held: Held) -> Held:
    record = held.record
    if record.phase is Phase.ABORTED:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_OPERATION_ABORTED", f"operation {record.operation_id[:16]}")
    if record.target_key != ctx.request.target_key or record.candidate_name != ctx.request.candidate_name:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_RECORD_INVALID", "record does not match the request")
    drifted = record.inventory_digest != ctx.inventory.digest or record.member_ids() != ctx.inventory.member_ids
    if drifted and record.phase is not Phase.COMPLETED:  # a completed operation is resolved; its receipt stands
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_DRIFT",
            f"bound {len(record.members)} members, live {len(ctx.inventory.members)}; phase {record.phase}",
        )
    return held


def _require_resolved(record: AuthorityRecord) -> None:
    if record.phase in TERMINAL_PHASES:
        return
    if isinstance(record, ExternalAuthorityRecord):
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED",
            f"held by operation {record.operation_id[:16]} in phase {record.phase}",
        )
    raise DponeError("DPONE_CLICKHOUSE_CLUSTER_INTERNAL_RECORD_UNRESOLVED", f"{record.schema_} in phase {record.phase}")


def _new_record(ctx: Context, previous: AuthorityRecord | None) -> ExternalAuthorityRecord:
    now = ctx.now()
    entropy = ctx.ports.entropy
    return ExternalAuthorityRecord(
        target_key=ctx.request.target_key,
        operation_id=ctx.request.operation_id,
        fence_token=entropy.token(),
        phase=Phase.LOCKED,
        dispatch_epoch=0 if previous is None else previous.dispatch_epoch,
        write_id=entropy.token(),
        inventory_digest=ctx.inventory.digest,
        normalized_plan_digest=ctx.request.normalized_plan_digest,
        candidate_name=ctx.request.candidate_name,
        previous_schema=None if previous is None else previous.schema_,
        previous_operation_id=None if previous is None else previous.operation_id,
        members=tuple(MemberRecord(member_id=member_id) for member_id in ctx.inventory.member_ids),
        created_at_ms=now,
        updated_at_ms=now,
    )
