"""Completion and replay of a durable quality-replay capsule after COMMITTED.

``settle`` is called by every entry point that finds the operation committed, and decides from the capsule alone:

=====================  ==========================================================================================
capsule state          what happens
=====================  ==========================================================================================
PREPARED (v1 core)     the generation guard (through each replica's own session: no reader), then one CAS:
                       COMPLETE (source/staged-only evidence; nothing to count on the target)
PREPARED (v2 core)     all-replica generation guard, then one CAS: TARGET_PENDING; then as below
TARGET_PENDING         guard, the bounded read of one admitted replica, guard again, within one 60 s budget; one
                       CAS: COMPLETE when the counts equal the core's (source rows and digest, staged observations),
                       FAILED (and ``..._FAILED``) otherwise
COMPLETE               validate: core digest, binding, completion-version continuity, exact live inventory and the
                       stored observation first, with no write (a replay refused there leaves the row byte-identical:
                       the evidence the error says to preserve); then the all-replica generation/content/schema/health
                       guard (v1 cores too, against the sealed artifact's schema), never a rescan. Once the operation
                       is COMPLETED, a v2 core's guard runs under the durable reader fence (:mod:`quality_fence`)
FAILED                 blocks with ``..._FAILED``; nothing is relabelled
=====================  ==========================================================================================

Every write is the acknowledged CAS with exact read-back of :mod:`authority_io`; an unknown outcome stops the attempt
and the retry re-reads. A guard or read that does not answer is ``..._INCOMPLETE`` (never success): the capsule stays
TARGET_PENDING and the retry observes again (:mod:`quality_target`). The target is the exact managed generation: the
replicated candidate's UUID and verified parts (or content), now under the target name on every replica.
"""

from __future__ import annotations

from airflow_provider_dpone.cluster.protocol.authority_io import Held
from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.protocol.quality_evidence import require_capsule
from airflow_provider_dpone.cluster.protocol.quality_fence import under_reader_fence
from airflow_provider_dpone.cluster.protocol.quality_target import (
    Budget,
    digest_version,
    guard,
    guarded,
    judge,
    observe_read,
    read_plan,
    store_write,
)
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.cluster.values.quality_capsule import QualityBinding, TargetObservation
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.errors.replay import FAILED, INVALID, MISMATCH


def settle(ctx: Context, held: Held) -> Held:
    """Drive the capsule of a committed record to COMPLETE (or FAILED), or validate a COMPLETE one."""
    if ctx.request.quality is None:
        return held
    binding = require_capsule(ctx, held.record)
    if binding.state == "COMPLETE":
        check_evidence(ctx, held, binding)  # before any write: a refusal here leaves the row as it was
        if binding.core.target_plan is None:
            return held  # source/staged-only evidence: nothing on the target to guard or fence
        return under_reader_fence(ctx, held, lambda current: guard(ctx, current.record, binding.core))
    if held.record.phase is not Phase.COMMITTED:
        raise DponeError(INVALID, f"capsule {binding.state} in phase {held.record.phase}")
    plan = binding.core.target_plan
    if plan is None:  # source/staged-only: nothing to count, but the target must be the managed generation
        guard(ctx, held.record, binding.core)
        return _write(ctx, held, binding, state="COMPLETE", completion_version=held.version + 1)
    if binding.state == "PREPARED":
        guard(ctx, held.record, binding.core)
        held = _write(ctx, held, binding, state="TARGET_PENDING", pending_version=held.version + 1)
        binding = require_capsule(ctx, held.record)
    observation = observe_guarded_target(ctx, held, binding)
    core = binding.core
    if not accepted(binding, observation):
        detail = f"target rows {observation.row_count} (source {core.source_rows}): counts or digest differ"
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
    return store_write(lambda: ctx.commit(held, quality=binding.model_copy(update=changes)))


def accepted(binding: QualityBinding, observation: TargetObservation) -> bool:
    """The target observation equals the original evidence: source rows and typed digest, and exactly the requested
    observations of the staged candidate (same generation, same columns, same counts)."""
    core = binding.core
    return (
        observation.row_count == core.source_rows
        and observation.content_digest == core.source_digests[1]
        and observation.counts == core.expected
    )


def check_evidence(ctx: Context, held: Held, binding: QualityBinding) -> None:
    """The checks of a COMPLETE capsule's replay that read nothing but the record and the live inventory (the live
    generation guard follows them); a replay is checks, never a rescan."""
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
        guard(ctx, held.record, core)  # generation, schema and health, as for a v2 capsule
        return
    target = binding.target
    if target is None or target.generation_uuid != core.generation_uuid or not accepted(binding, target):
        raise DponeError(INVALID, "the stored target observation does not prove the core's generation")
    if plan.replicas != tuple(sorted(ctx.inventory.member_ids)):
        raise DponeError(MISMATCH, "the admitted replicas differ from the sealed target plan")


def observe_guarded_target(ctx: Context, held: Held, binding: QualityBinding) -> TargetObservation:
    """One bounded observation: the guard on every sealed replica, the count of the first (counts are never summed
    across replicas), the guard again; one shared budget for all of it."""
    core = binding.core
    plan = core.target_plan
    assert plan is not None
    budget = Budget(ctx)
    member_id = plan.replicas[0]
    reads = guarded(held.record, plan.replicas)
    version = digest_version(held.record)
    request = read_plan(
        ctx, ctx.request.target, core.generation_uuid, digest_version=version, guard=reads, scan=(member_id, plan)
    )
    observation = observe_read(ctx, request, budget)
    judge(ctx, core, reads, observation.before, plan.columns)
    judge(ctx, core, reads, observation.after, plan.columns)
    counts = observation.counts
    assert counts is not None  # answers() of a scan plan
    if counts.generation_uuid != core.generation_uuid:
        raise DponeError(MISMATCH, f"replica {ctx.label(member_id)} moved off the managed generation during the scan")
    return TargetObservation(
        member_id=member_id,
        generation_uuid=counts.generation_uuid,
        row_count=counts.row_count,
        content_digest=counts.content_digest,
        columns=counts.columns,
        elapsed_ms=max(0, budget.elapsed_ms()),
        observed_at_ms=ctx.now(),
    )
