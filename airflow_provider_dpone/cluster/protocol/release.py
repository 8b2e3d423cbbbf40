"""PUBLICATION_DISPATCHING -> RELEASED: the way back from a publication that stopped after its swap.

A publication whose check after its ``EXCHANGE``/``RENAME`` failed (``PUBLISHED_CONTENT_DIVERGENT``,
``PUBLICATION_FOREIGN_UUID``, ``PUBLICATION_MIXED``, ``TARGET_DRIFT``) is never COMMITTED, and cannot be aborted
(its DDL ran). The operator inspects the members, then restores the predecessor (swaps back by hand) or accepts
what the target serves now, and this step records that decision. It writes nothing but one authority CAS, and only when:

1. the record is this operation's, in PUBLICATION_DISPATCHING, stopped by one of those codes (``last_error``);
2. the bound publication's queue entry is present and finished on every member's host: nothing of it can still run
   (a permit with no entry is the void's business, ``void_permit``);
3. every member is as the decision says (:mod:`~airflow_provider_dpone.cluster.values.authority.release`): restored,
   the pre-publication UUID pair and the baseline's recorded content under the target (after ``TARGET_DRIFT``, the
   pair alone: the predecessor holds the write that stopped it); accepted, the
   post-publication pair, the artifact's schema, the declared row count and one content digest on every member.

Then one acknowledged, read-back-proven CAS at the version read writes RELEASED with the decision and each member's
observation (an accepted release also records each member's candidate as published). RELEASED is terminal, never
success: the operation never resumes, and a new operation takes the target by the fence's versioned CAS. Any
mismatch refuses with a code and changes nothing. A retry after a lost response reads the record: RELEASED with the
same decision is reported again (never written twice), with another decision refused.
Nothing is dropped: what is left under the candidate name (the predecessor, or the divergent candidate) is named
in the record, for the operator to inspect and drop by its UUID.
"""

from __future__ import annotations

from airflow_provider_dpone.cluster.ports import HostDdlState, TableRead
from airflow_provider_dpone.cluster.protocol.authority_io import Held
from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.protocol.ddl_step import MIXED
from airflow_provider_dpone.cluster.protocol.observe import DRIFT, observe
from airflow_provider_dpone.cluster.protocol.publication import FOREIGN_UUID, PUBLISHED_DIVERGENT
from airflow_provider_dpone.cluster.protocol.reconcile import observe_pair, read_entry
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.generation import DdlBinding, MemberGeneration
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.cluster.values.authority.release import Release, ReleaseDecision, ReleasedMember
from airflow_provider_dpone.core.errors import DponeError

NOT_STOPPED = "DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOT_STOPPED"
RELEASE_DDL_PENDING = "DPONE_CLICKHOUSE_CLUSTER_RELEASE_DDL_PENDING"
NOT_RESTORED = "DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOT_RESTORED"
NOT_ACCEPTED = "DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOT_ACCEPTED"
DECIDED = "DPONE_CLICKHOUSE_CLUSTER_RELEASE_DECIDED_OTHERWISE"

RELEASABLE = frozenset({PUBLISHED_DIVERGENT, FOREIGN_UUID, MIXED, DRIFT})
"""The codes a publication stops with after its DDL may have run, whose record the release may end."""


def release(ctx: Context, held: Held, decision: ReleaseDecision, accepted_row_count: int | None) -> Held:
    """Check the members against ``decision`` and CAS RELEASED with the evidence; or refuse, changing nothing."""
    if (decision == "accepted") != (accepted_row_count is not None):
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_REQUEST_INVALID", "accepted declares its row count; restored none")
    record = held.record
    if record.phase is Phase.RELEASED:
        done = record.release
        assert done is not None  # the record's invariant
        if (done.decision, done.accepted_row_count) != (decision, accepted_row_count):
            raise DponeError(DECIDED, f"released as {done.decision}")
        return held  # a retry after a lost response: the release is reported again, never written twice
    stopped = record.last_error
    if record.phase is not Phase.PUBLICATION_DISPATCHING or stopped is None or stopped.code not in RELEASABLE:
        raise DponeError(NOT_STOPPED, f"phase {record.phase}, last error {stopped.code if stopped else None}")
    binding = record.publication
    assert binding is not None  # PUBLICATION_DISPATCHING binds it (the record's invariant)
    _require_finished(ctx, record, binding)
    refusal = NOT_RESTORED if decision == "restored" else NOT_ACCEPTED
    seen = ctx.each_member(lambda member_id: _observe(ctx, record, member_id, refusal), record.member_ids())
    members = tuple(seen[member.member_id] for member in record.members)
    for member, observed in zip(record.members, members, strict=True):
        if decision == "restored":
            _require_restored(ctx.label(member.member_id), member, observed, written=stopped.code == DRIFT)
        else:
            _require_accepted(ctx.label(member.member_id), member, observed, accepted_row_count)
    digests = {observed.content_digest for observed in members}
    if decision == "accepted" and len(digests) != 1:
        raise DponeError(NOT_ACCEPTED, f"the members hold {len(digests)} different contents")
    evidence = Release(
        decision=decision,
        stopped_by=stopped.code,
        publication_epoch=binding.epoch,
        accepted_row_count=accepted_row_count,
        members=members,
        released_at_ms=ctx.now(),
    )
    published = record.members
    if decision == "accepted":
        published = tuple(m.model_copy(update={"published_uuid": m.candidate_uuid}) for m in record.members)
    return ctx.commit(held, phase=Phase.RELEASED, release=evidence, members=published)


def _require_finished(ctx: Context, record: AuthorityRecord, binding: DdlBinding) -> None:
    """The bound publication's entry is queued and finished (or failed) on every member's host."""
    entry = read_entry(ctx, binding)
    if entry is None:
        raise DponeError(RELEASE_DDL_PENDING, f"publication epoch {binding.epoch}: no queue entry carries its token")
    states = {host.member_id: host.state for host in entry.hosts}
    unfinished = [m for m in record.member_ids() if states.get(m) is not HostDdlState.FINISHED]
    if unfinished:
        raise DponeError(
            RELEASE_DDL_PENDING, f"publication epoch {binding.epoch}: not finished on {ctx.labels(unfinished)}"
        )


def _observe(ctx: Context, record: AuthorityRecord, member_id: str, refusal: str) -> ReleasedMember:
    """The member's (target, candidate-name) UUID pair in one snapshot, and the target's content digested by the
    server with the artifact's digest version, bound to the same target UUID (a name swapped between the two reads
    is refused with ``refusal``, never attributed)."""
    artifact = record.artifact
    assert artifact is not None
    target_uuid, candidate_uuid = observe_pair(ctx, member_id)
    rows = digest = None
    if target_uuid is not None:
        version = artifact.content_digest_version
        obs = observe(ctx, member_id, TableRead(ctx.request.database, ctx.request.target, True, digest_version=version))
        if not obs.exists or obs.uuid != target_uuid:
            raise DponeError(refusal, f"member {ctx.label(member_id)}: the target changed while it was observed")
        if target_uuid == record.member(member_id).candidate_uuid and obs.columns != artifact.schema_pairs:
            raise DponeError(refusal, f"member {ctx.label(member_id)}: the published candidate's schema changed")
        rows, digest = obs.row_count, obs.content_digest
    return ReleasedMember(
        member_id=member_id,
        target_uuid=target_uuid,
        candidate_uuid=candidate_uuid,
        row_count=rows,
        content_digest=digest,
    )


def _require_restored(label: str, member: MemberGeneration, observed: ReleasedMember, *, written: bool) -> None:
    """The pre-publication UUID pair, and the baseline's content under the target, unless the stop was that very
    content changing in place (``TARGET_DRIFT``: the predecessor restored holds the write; its digest is recorded)."""
    if (observed.target_uuid, observed.candidate_uuid) != (member.target_uuid, member.candidate_uuid):
        raise DponeError(NOT_RESTORED, f"member {label}: the tables are not as before the publication")
    if member.target_uuid is not None and not written and observed.content_digest != member.target_content_digest:
        raise DponeError(NOT_RESTORED, f"member {label}: the target's content is not the baseline's")


def _require_accepted(label: str, member: MemberGeneration, observed: ReleasedMember, rows: int | None) -> None:
    if (observed.target_uuid, observed.candidate_uuid) != (member.candidate_uuid, member.target_uuid):
        raise DponeError(NOT_ACCEPTED, f"member {label}: the tables are not as after the publication")
    if observed.row_count != rows:
        raise DponeError(NOT_ACCEPTED, f"member {label}: the target holds {observed.row_count} rows, {rows} declared")
