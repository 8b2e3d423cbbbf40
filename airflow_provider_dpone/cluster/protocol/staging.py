"""STAGING -> STAGED, external mode: direct per-member staging of the one sealed artifact.

Each member converges by repeated *observe, then at most one mutation* steps, in stable member-id order:

* a table under the candidate name whose UUID this operation never intended is foreign: stop, touch nothing;
* an owned but stale UUID (an earlier intent) is dropped exactly by UUID;
* PENDING  -> persist a fresh candidate UUID intent (CAS) *before* any CREATE (the STAGING CAS already persists the
  first intent of every member, so this is only a safeguard);
* INTENDED -> CREATE with exactly that UUID, sent only within ``dispatch_deadline_ms`` of the intent's stamp (taken
  before its write; a later try stamps the same intent again first, by CAS): so no CREATE of this operation reaches a
  member later than the latest stamp plus that deadline, the send timeout and the skew margin, which an abort waits
  out (:mod:`abort`). Once observed empty with the right schema, CAS CREATED (the complete candidate identity) and
  send the one load, with deterministic ``query_id`` and ``insert_deduplication_token``;
* CREATED  -> exact schema, row count and content digest equal to the artifact's -> CAS READY. Incomplete after the
  ambiguous load (the sealed schema with fewer rows: empty after a lost or unsent load, partial) is rebuilt: a new
  intent is persisted first, then the old UUID is dropped as stale, and the same immutable artifact is loaded into
  the new table, at most ``MAX_REBUILDS_PER_MEMBER`` times. Nothing is ever appended to a candidate that may already
  hold rows. Anything no load of this operation explains -- vanished after it was bound, more rows than the artifact
  (duplicated), the artifact's row count with other content or another schema (divergent), rows before the load --
  stops the operation with ``CANDIDATE_DIVERGENT`` and every object retained.

A lost response is resolved by the next step's observation; a process death by the next attempt's observation.

Members are staged in three passes so the slow work runs concurrently while the authority writes stay serialized in
member order: (1) every member's candidate is observed (before the STAGING CAS, when this invocation wrote it), and
created when intended and absent, concurrently; then, in member order, each member is driven from that observation up
to a fresh candidate, and one CAS binds every fresh candidate (CREATED) before any load; (2) those loads, each
followed by its candidate's content observation, run concurrently (:meth:`Context.each_member`); (3) in member
order, each member resumes from that observation (READY, or rebuild as above), and the READY of every verified member
rides on the STAGED CAS. A process death between the creates and the binding CAS leaves candidates under their
intended UUIDs, which the next attempt observes fresh and binds; one between the loads and the STAGED CAS leaves bound
candidates, which it observes with their content.
"""

from __future__ import annotations

from collections.abc import Mapping

from airflow_provider_dpone.cluster.ports import TableObservation
from airflow_provider_dpone.cluster.protocol.authority_io import Held
from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.protocol.member_mutation import load_once, mutate_once
from airflow_provider_dpone.cluster.protocol.observe import diverged, is_exact, observe_candidate, unexplained
from airflow_provider_dpone.cluster.values.authority.external import (
    MAX_REBUILDS_PER_MEMBER,
    ExternalAuthorityRecord,
    MemberRecord,
    as_external,
)
from airflow_provider_dpone.cluster.values.authority.phases import MemberStage, Phase
from airflow_provider_dpone.cluster.values.progress import CandidateRebuilt
from airflow_provider_dpone.cluster.values.receipts import ArtifactReceipt
from airflow_provider_dpone.core.errors import DponeError


def stage_all(ctx: Context, held: Held, names: Mapping[str, TableObservation] | None = None) -> Held:
    """Stage every member to READY, then CAS STAGED: one CAS binds every freshly created candidate, and the READY of
    every member whose load was verified rides on the STAGED CAS.

    ``names``: each member's candidate name as observed just before this invocation's STAGING CAS (which wrote every
    intent): the first step starts from it instead of reading again. Only a UUID absent then, or foreign (an intent
    is new in that CAS), can be there; anything that appears since makes the CREATE fail, and the next attempt
    observes it."""
    member_ids = held.record.member_ids()
    start, known = held, names or {}
    seen = ctx.each_member(
        lambda member_id: _create_and_observe(ctx, start, member_id, known.get(member_id)), member_ids
    )
    fresh: list[MemberRecord] = []
    for member_id in member_ids:
        held, created = stage_member(ctx, held, member_id, first=seen[member_id], defer_created=True)
        if created is not None:
            fresh.append(created)
    if fresh:  # durable before any load: a load only ever goes into a candidate the authority binds
        held = _commit_members(ctx, held, fresh)
    bound = held
    loaded = ctx.each_member(lambda member_id: _load_and_observe(ctx, bound, member_id), [m.member_id for m in fresh])
    ready: list[MemberRecord] = []
    for member_id in member_ids:
        held, verified = stage_member(ctx, held, member_id, first=loaded.get(member_id), defer_ready=True)
        if verified is not None:
            ready.append(verified)
    return ctx.commit(held, phase=Phase.STAGED, members=_replaced(held, ready))


def stage_member(
    ctx: Context,
    held: Held,
    member_id: str,
    *,
    first: TableObservation | None = None,
    defer_created: bool = False,
    defer_ready: bool = False,
) -> tuple[Held, MemberRecord | None]:
    """Step the member towards READY. ``first`` is an observation of the candidate to start from instead of a read.

    With ``defer_created`` it stops at a fresh candidate and returns its CREATED update unwritten (the caller binds
    it, then loads); with ``defer_ready`` it returns the verified READY update unwritten (the caller writes it).
    Otherwise every update is written as it is decided, and the load follows its CREATED write."""
    for _ in range(ctx.settings.max_member_steps):
        member = _external(held).member(member_id)
        if member.stage is MemberStage.READY:
            return held, None
        if first is not None:
            obs, first = first, None
        else:
            obs = observe_candidate(
                ctx, member_id, artifact=_artifact(held), with_content=member.stage is MemberStage.CREATED
            )
        if obs.exists:
            if obs.uuid not in member.owned_candidate_uuids:
                raise ctx.fail_closed(
                    held, "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_FOREIGN", f"member {ctx.label(member_id)}"
                )
            if obs.uuid != member.candidate_uuid_intent:
                _drop_stale(ctx, member_id, obs)
                continue
        if member.stage is MemberStage.PENDING:
            held = _intend(ctx, held, member, rebuild=False)
        elif member.stage is MemberStage.INTENDED:
            if not obs.exists and not _in_time(ctx, member):
                held = _commit_member(ctx, held, member.model_copy(update={"intended_at_ms": ctx.now()}))
            elif not obs.exists:
                _create(ctx, member, _artifact(held))
            elif _is_fresh(ctx, obs, _artifact(held)):
                created = member.model_copy(update={"stage": MemberStage.CREATED, "candidate_uuid": obs.uuid})
                if defer_created:
                    return held, created
                held = _commit_member(ctx, held, created)
                _load_once(ctx, held, member_id)
            else:  # no load is ever sent before CREATED is bound: nothing of this operation explains it
                raise diverged(ctx, held, member_id, "not empty before its load")
        elif is_exact(obs, member, _artifact(held)):
            ready = member.model_copy(
                update={
                    "stage": MemberStage.READY,
                    "row_count": obs.row_count,
                    "content_digest": obs.content_digest,
                    "parts_digest": obs.parts_digest,
                    "part_digests": obs.part_digests,
                }
            )
            if defer_ready:
                return held, ready
            return _commit_member(ctx, held, ready), None
        else:
            reason = unexplained(obs, _artifact(held))
            if reason is not None:
                raise diverged(ctx, held, member_id, reason)
            held = _intend(ctx, held, member, rebuild=True)  # incomplete after an ambiguous load
            rebuilt = _external(held).member(member_id).rebuilds
            held_rows = obs.row_count if obs.exists else None
            artifact_rows = _artifact(held).row_count
            ctx.report(
                CandidateRebuilt(ctx.label(member_id), rebuilt, MAX_REBUILDS_PER_MEMBER, held_rows, artifact_rows)
            )
    raise DponeError("DPONE_CLICKHOUSE_CLUSTER_MEMBER_OUTCOME_UNKNOWN", f"member {ctx.label(member_id)} did not settle")


def _external(held: Held) -> ExternalAuthorityRecord:
    return as_external(held.record)  # the external mode's staging, so an external record


def _artifact(held: Held) -> ArtifactReceipt:
    artifact = held.record.artifact
    if artifact is None:  # excluded by the record invariants in STAGING
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_RECORD_INVALID", "STAGING without an artifact")
    return artifact


def _intend(ctx: Context, held: Held, member: MemberRecord, *, rebuild: bool) -> Held:
    """Persist a fresh candidate UUID intent; on rebuild the previous UUID becomes stale (dropped next step)."""
    if rebuild and member.rebuilds >= MAX_REBUILDS_PER_MEMBER:
        raise ctx.fail_closed(
            held, "DPONE_CLICKHOUSE_CLUSTER_STAGING_REBUILD_LIMIT", f"member {ctx.label(member.member_id)}"
        )
    intent = ctx.ports.entropy.uuid()
    updated = MemberRecord(
        member_id=member.member_id,
        stage=MemberStage.INTENDED,
        candidate_uuid_intent=intent,
        owned_candidate_uuids=(*member.owned_candidate_uuids, intent),
        intended_at_ms=ctx.now(),
        target_uuid=member.target_uuid,
        target_row_count=member.target_row_count,
        target_content_digest=member.target_content_digest,
        target_schema_digest=member.target_schema_digest,
        target_parts_digest=member.target_parts_digest,
        rebuilds=member.rebuilds + int(rebuild),
    )
    return _commit_member(ctx, held, updated)


def _commit_member(ctx: Context, held: Held, member: MemberRecord) -> Held:
    return _commit_members(ctx, held, [member])


def _commit_members(ctx: Context, held: Held, updated: list[MemberRecord]) -> Held:
    """One STAGING CAS with every member in ``updated`` replaced."""
    return ctx.commit(held, phase=Phase.STAGING, members=_replaced(held, updated))


def _replaced(held: Held, updated: list[MemberRecord]) -> tuple[MemberRecord, ...]:
    """The held record's members with every member in ``updated`` replaced (by id)."""
    by_id = {member.member_id: member for member in updated}
    return tuple(by_id.get(member.member_id, member) for member in _external(held).members)


def _in_time(ctx: Context, member: MemberRecord) -> bool:
    """Whether the member's intent may still be created: stamped, and the stamp within the dispatch deadline."""
    stamp = member.intended_at_ms
    return stamp is not None and ctx.now() - stamp <= ctx.settings.dispatch_deadline_ms


def _create(ctx: Context, member: MemberRecord, artifact: ArtifactReceipt) -> None:
    """The member's candidate, created with the declared table and the bound artifact's typed columns."""
    intent = member.candidate_uuid_intent
    assert intent is not None
    session = ctx.session(member.member_id)
    request = ctx.request
    table = request.candidate_table(artifact.schema_pairs)
    mutate_once(
        ctx.label(member.member_id),
        "create",
        lambda: session.create_table(request.database, request.candidate_name, intent, table),
    )


def _drop_stale(ctx: Context, member_id: str, obs: TableObservation) -> None:
    stale = obs.uuid
    assert stale is not None
    session = ctx.session(member_id)
    mutate_once(
        ctx.label(member_id),
        "drop",
        lambda: session.drop_table(ctx.request.database, ctx.request.candidate_name, stale),
    )


def _create_and_observe(
    ctx: Context, held: Held, member_id: str, seen: TableObservation | None
) -> TableObservation | None:
    """A member's first step, concurrently with the others': its candidate observed (with content once bound; or
    ``seen`` before the STAGING CAS, see :func:`stage_all`), and an intended candidate that is absent created and
    observed again (with its parts: a table without parts is empty, so its count is not read). ``None`` for a READY
    member. Everything else is decided in member order from this observation."""
    member = _external(held).member(member_id)
    if member.stage is MemberStage.READY:
        return None
    artifact = _artifact(held)
    obs = seen
    if obs is None:
        obs = observe_candidate(ctx, member_id, artifact=artifact, with_content=member.stage is MemberStage.CREATED)
    if member.stage is MemberStage.INTENDED and not obs.exists and _in_time(ctx, member):
        _create(ctx, member, artifact)
        obs = observe_candidate(ctx, member_id, artifact=artifact, with_parts=True)
    return obs


def _load_and_observe(ctx: Context, held: Held, member_id: str) -> TableObservation:
    """The held-back load of a just-bound candidate, then the observation (with content) that settles it."""
    _load_once(ctx, held, member_id)
    return observe_candidate(ctx, member_id, artifact=_artifact(held), with_content=True)


def _load_once(ctx: Context, held: Held, member_id: str) -> None:
    candidate = _external(held).member(member_id).candidate_uuid
    assert candidate is not None
    load_once(ctx, member_id, candidate, _artifact(held))


def _is_fresh(ctx: Context, obs: TableObservation, artifact: ArtifactReceipt) -> bool:
    """A just-created candidate: the declared engine, the artifact's schema, and no rows."""
    return obs.row_count == 0 and obs.engine == ctx.request.table.engine and obs.columns == artifact.schema_pairs
