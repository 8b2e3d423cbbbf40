"""STAGED -> PUBLICATION_DISPATCHING -> COMMITTED: the one fenced publication DDL, both modes.

Barrier: every target still the baseline UUID (or absent) and, in place, still the baseline (schema, rows, content
digest: a write or ALTER into the live target would be discarded with the predecessor, so it stops the publication
with ``TARGET_DRIFT``), every candidate still the exact staged generation (schema, rows, content digest). Then one
:mod:`~airflow_provider_dpone.cluster.protocol.ddl_step` of ``EXCHANGE TABLES`` (existing baseline) or ``RENAME
TABLE`` (absent baseline) ON CLUSTER. Each member is classified by its (target UUID, candidate
UUID) pair: BEFORE = (baseline, candidate), AFTER = (candidate, baseline). In internal mode every replica binds the
same candidate UUID; the pairs are still per member. COMMITTED is written only when every member's target *is* its
verified candidate and the bound queue entry is present without host failure, and, observed after the DDL, each
member's target still holds exactly the verified generation: its active parts as verified, or (a merge or any write
since) the schema, row count and content digest the server computes again equal to the artifact's. Anything else
fails closed with ``PUBLISHED_CONTENT_DIVERGENT``: never COMMITTED, every object retained. After an EXCHANGE each
member's predecessor, now under the candidate name, is held to its baseline the same way (a write into the live
target between the barrier and the EXCHANGE): ``TARGET_DRIFT``, never COMMITTED, every object retained.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_dpone.cluster.ports import DdlIntent, ExchangeTables, RenameTable
from airflow_provider_dpone.cluster.protocol.authority_io import Held
from airflow_provider_dpone.cluster.protocol.context import Context, alongside
from airflow_provider_dpone.cluster.protocol.ddl_step import DdlStep, StepProgress, run_step
from airflow_provider_dpone.cluster.protocol.observe import (
    baseline_drift,
    diverged,
    drifted,
    is_exact,
    observe_baseline_held,
    observe_published,
    observe_verified,
)
from airflow_provider_dpone.cluster.protocol.reconcile import Side, classify_observed
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.generation import DdlBinding
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.core.errors import DponeError

FOREIGN_UUID = "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_FOREIGN_UUID"
PUBLISHED_DIVERGENT = "DPONE_CLICKHOUSE_CLUSTER_PUBLISHED_CONTENT_DIVERGENT"


def publication_intent(ctx: Context, record: AuthorityRecord) -> DdlIntent:
    request = ctx.request
    if record.baseline == "existing":
        return ExchangeTables(
            cluster=request.cluster, database=request.database, left=request.target, right=record.candidate_name
        )
    return RenameTable(
        cluster=request.cluster, database=request.database, source=record.candidate_name, target=request.target
    )


def publish(ctx: Context, held: Held, *, allow_dispatch: bool) -> StepProgress:
    """From STAGED: barrier, permit, one dispatch (only with ``allow_dispatch``); then reconcile, COMMITTED if done."""
    return run_step(ctx, held, publication_step(ctx, held.record), allow_dispatch=allow_dispatch)


def publication_step(ctx: Context, record: AuthorityRecord) -> DdlStep:
    return DdlStep(
        what="publication",
        intent=publication_intent(ctx, record),
        phase=Phase.PUBLICATION_DISPATCHING,
        dispatched_from=Phase.STAGED,
        slot=lambda record: record.publication,
        bind=lambda _record, binding: {"publication": binding},
        classify=_side,
        foreign_code=FOREIGN_UUID,
        finish=_commit,
        barrier=_barrier,
    )


def _side(ctx: Context, record: AuthorityRecord, member_id: str) -> Side | None:
    member = record.member(member_id)
    return classify_observed(
        ctx,
        member_id,
        before=(member.target_uuid, member.candidate_uuid),
        after=(member.candidate_uuid, member.target_uuid),
    )


def _commit(ctx: Context, held: Held, binding: DdlBinding) -> Held:
    _require_published_as_verified(ctx, held)
    record = held.record
    members = tuple(member.model_copy(update={"published_uuid": member.candidate_uuid}) for member in record.members)
    return ctx.commit(held, phase=Phase.COMMITTED, members=members, publication=binding, committed_at_ms=ctx.now())


def _barrier(ctx: Context, held: Held, _step: DdlStep) -> dict[str, Any]:
    """Observed concurrently (every member, and on each the two reads at once), judged in member order: the target as
    its baseline (its UUID, schema and parts, and its content only if they changed) and the candidate as verified
    (its parts, and its content only if they changed).

    A candidate whose parts changed (a merge) and whose content was verified again has its new parts recorded by
    the permit CAS, so the check after the DDL reads nothing again unless something changed after the barrier."""
    record = held.record
    artifact = record.artifact
    assert artifact is not None
    observed = ctx.each_member(
        lambda member_id: alongside(
            lambda: observe_baseline_held(ctx, record, member_id, ctx.request.target),
            lambda: observe_verified(ctx, record.member(member_id), artifact),
            ctx.settings.member_parallelism,
        ),
        record.member_ids(),
    )
    members = []
    for member in record.members:
        target, candidate = observed[member.member_id]
        if target.uuid != member.target_uuid:
            raise DponeError(
                "DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT",
                f"member {ctx.label(member.member_id)}: target changed since baseline",
            )
        drift = baseline_drift(target, member)
        if drift is not None:
            raise drifted(ctx, None, member.member_id, f"the live target changed since its baseline: {drift}")
        if not is_exact(candidate, member, artifact):
            raise diverged(ctx, None, member.member_id, "the staged candidate changed since it was verified")
        if candidate.parts_digest is not None and candidate.parts_digest != member.parts_digest:
            parts = {"parts_digest": candidate.parts_digest, "part_digests": candidate.part_digests}
            member = member.model_copy(update=parts)
        members.append(member)
    return {"members": tuple(members)} if tuple(members) != record.members else {}


def _require_published_as_verified(ctx: Context, held: Held) -> None:
    """Every member's target, observed after the DDL (concurrently, judged in member order), holds exactly the
    verified generation; the UUIDs alone do not show a write into the candidate while the DDL was in flight. After
    an EXCHANGE, each member's predecessor (under the candidate name) is still its baseline: a write into the live
    target after the barrier, before the EXCHANGE ran there, would otherwise be dropped by the cleanup."""
    record = held.record
    artifact = record.artifact
    assert artifact is not None
    exchanged = record.baseline == "existing"
    observed = ctx.each_member(
        lambda member_id: alongside(
            lambda: observe_published(ctx, record.member(member_id), artifact),
            lambda: observe_baseline_held(ctx, record, member_id, record.candidate_name) if exchanged else None,
            ctx.settings.member_parallelism,
        ),
        record.member_ids(),
    )
    for member in record.members:
        published, predecessor = observed[member.member_id]
        if not is_exact(published, member, artifact):
            raise ctx.fail_closed(
                held, PUBLISHED_DIVERGENT, f"member {ctx.label(member.member_id)}: published content differs"
            )
        drift = None if predecessor is None else baseline_drift(predecessor, member)
        if drift is not None:
            detail = f"the predecessor (now under the candidate name) changed since its baseline: {drift}"
            raise drifted(ctx, held, member.member_id, detail)
