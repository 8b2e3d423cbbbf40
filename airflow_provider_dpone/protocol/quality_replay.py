"""Completion and replay of a durable quality-replay capsule after COMMITTED (seed 002).

``settle`` is called by every entry point that finds the operation committed, and decides from the capsule alone:

=====================  ==========================================================================================
capsule state          what happens
=====================  ==========================================================================================
PREPARED (v1 core)     one CAS: COMPLETE (source/staged-only evidence; nothing to observe on the target)
PREPARED (v2 core)     all-replica generation guard, then one CAS: TARGET_PENDING; then as below
TARGET_PENDING         guard, scan one admitted replica, guard again, within one 60 s budget; one CAS: COMPLETE when
                       the counts equal the core's, FAILED (and ``..._FAILED``) otherwise
COMPLETE               validate: core digest, binding, completion-version continuity, exact live inventory, and the
                       all-replica generation/schema/health guard; never a rescan
FAILED                 blocks with ``..._FAILED``; nothing is relabelled
=====================  ==========================================================================================

Every write is the acknowledged CAS with exact read-back of :mod:`authority_io`; an unknown outcome stops the attempt
and the retry re-reads. A guard or scan that does not answer is ``..._INCOMPLETE`` (never success): the capsule stays
TARGET_PENDING and the retry observes again. The target is the exact managed generation: the replicated candidate's
UUID, now under the target name on every replica.
"""

from __future__ import annotations

from airflow_provider_dpone.contracts.authority_phases import Phase
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.quality_capsule import TARGET_BUDGET_MS, QualityBinding, TargetObservation
from airflow_provider_dpone.contracts.receipts import CURRENT_CONTENT_DIGEST, ContentDigestVersion
from airflow_provider_dpone.ports.publication import UnavailableError
from airflow_provider_dpone.protocol.authority_io import Held
from airflow_provider_dpone.protocol.context import Context
from airflow_provider_dpone.protocol.quality_evidence import FAILED, INCOMPLETE, INVALID, MISMATCH, require_capsule


def settle(ctx: Context, held: Held) -> Held:
    """Drive the capsule of a committed record to COMPLETE (or FAILED), or validate a COMPLETE one."""
    if ctx.request.quality is None:
        return held
    binding = require_capsule(ctx, held.record)
    if binding.state == "COMPLETE":
        validate_complete(ctx, held, binding)
        return held
    if held.record.phase is not Phase.COMMITTED:
        raise DponeError(INVALID, f"capsule {binding.state} in phase {held.record.phase}")
    plan = binding.core.target_plan
    if plan is None:
        return _write(ctx, held, binding, state="COMPLETE", completion_version=held.version + 1)
    if binding.state == "PREPARED":
        started = ctx.now()
        guard(ctx, binding, started)
        held = _write(ctx, held, binding, state="TARGET_PENDING", pending_version=held.version + 1)
        binding = require_capsule(ctx, held.record)
    artifact = held.record.artifact
    observation = observe_target(
        ctx, binding, CURRENT_CONTENT_DIGEST if artifact is None else artifact.content_digest_version
    )
    core = binding.core
    if observation.row_count != core.source_rows or observation.content_digest != core.source_digests[1]:
        detail = f"target rows {observation.row_count} != source rows {core.source_rows} or digest differs"
        _write(
            ctx,
            held,
            binding,
            state="FAILED",
            target=observation,
            completion_version=held.version + 1,
            failure="target_acceptance",
        )
        raise DponeError(FAILED, detail)
    return _write(ctx, held, binding, state="COMPLETE", target=observation, completion_version=held.version + 1)


def _write(ctx: Context, held: Held, binding: QualityBinding, **changes: object) -> Held:
    return ctx.commit(held, quality=binding.model_copy(update=changes))


def validate_complete(ctx: Context, held: Held, binding: QualityBinding) -> None:
    """A COMPLETE capsule is replayed by checks, never by a rescan."""
    core = binding.core
    completion = binding.completion_version
    assert completion is not None  # COMPLETE carries it (model invariant)
    # in COMMITTED the completion is the last write, unless a voided cleanup permit brought the record back there
    voided_cleanup = any(void.step == "cleanup" for void in held.record.voided)
    last_write = held.record.phase is Phase.COMMITTED and not voided_cleanup
    if completion > held.version or (last_write and completion != held.version):
        raise DponeError(MISMATCH, f"completion version {completion}, authority at {held.version}")
    if core.inventory_digest != ctx.inventory.digest:
        raise DponeError(MISMATCH, "the live inventory differs from the one the evidence is bound to")
    plan = core.target_plan
    if plan is None:
        return
    target = binding.target
    if target is None or target.generation_uuid != core.generation_uuid or target.row_count != core.source_rows:
        raise DponeError(INVALID, "the stored target observation does not prove the core's generation")
    if plan.replicas != tuple(sorted(ctx.inventory.member_ids)):
        raise DponeError(MISMATCH, "the admitted replicas differ from the sealed target plan")
    guard(ctx, binding, ctx.now())


def guard(ctx: Context, binding: QualityBinding, started: int) -> None:
    """Every sealed replica holds exactly the managed generation under the target name, with the sealed schema, as
    one healthy replica of one table; and the shared budget is not spent."""
    plan = binding.core.target_plan
    assert plan is not None
    paths = set()
    for member_id in plan.replicas:
        if member_id not in ctx.inventory.member_ids:
            raise DponeError(MISMATCH, f"sealed replica {member_id} is not in the live inventory")
        try:
            session = ctx.session(member_id)
            observed = session.observe_table(ctx.request.database, ctx.request.target, with_content=False)
            status = session.replica_status(ctx.request.database, ctx.request.target)
        except UnavailableError:
            raise DponeError(INCOMPLETE, f"replica {member_id} did not answer the generation guard") from None
        if not observed.exists or observed.uuid != binding.core.generation_uuid:
            raise DponeError(MISMATCH, f"replica {member_id} does not hold the managed generation")
        if observed.columns != plan.columns:
            raise DponeError(MISMATCH, f"replica {member_id}: schema differs from the sealed target plan")
        if status is None or status.is_readonly:
            raise DponeError(INCOMPLETE, f"replica {member_id} is not a healthy writable replica")
        paths.add(status.zookeeper_path)
    if len(paths) != 1:
        raise DponeError(MISMATCH, "the replicas are not one replicated table")
    if ctx.now() - started > TARGET_BUDGET_MS:
        raise DponeError(INCOMPLETE, f"target observation exceeded its {TARGET_BUDGET_MS} ms budget")


def observe_target(ctx: Context, binding: QualityBinding, digest_version: ContentDigestVersion) -> TargetObservation:
    """Guard, the aggregate scan of the first sealed replica (counts are never summed across replicas), guard. The
    digest is computed with the version the record's artifact receipt names (the source digest's)."""
    plan = binding.core.target_plan
    assert plan is not None
    started = ctx.now()
    guard(ctx, binding, started)
    member_id = plan.replicas[0]
    try:
        scanned = ctx.session(member_id).observe_table(
            ctx.request.database, ctx.request.target, with_content=True, digest_version=digest_version
        )
    except UnavailableError:
        raise DponeError(INCOMPLETE, f"replica {member_id} did not answer the target scan") from None
    if not scanned.exists or scanned.uuid != binding.core.generation_uuid:
        raise DponeError(MISMATCH, f"replica {member_id} moved off the managed generation during the scan")
    if scanned.row_count is None or scanned.content_digest is None:
        raise DponeError(INCOMPLETE, f"replica {member_id}: partial scan result")
    guard(ctx, binding, started)
    return TargetObservation(
        member_id=member_id,
        generation_uuid=binding.core.generation_uuid,
        row_count=scanned.row_count,
        content_digest=scanned.content_digest,
        elapsed_ms=max(0, ctx.now() - started),
        observed_at_ms=ctx.now(),
    )
