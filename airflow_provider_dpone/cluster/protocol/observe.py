"""Member observations with the port failures mapped to stable codes (reads have no effect to be unsure about).

A content digest is always computed with the digest version of the record's artifact receipt (old records keep
their own function); before a receipt exists (the baseline) with the current one, which the receipt must then name.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from airflow_provider_dpone.cluster.ports import TableObservation, TableRead
from airflow_provider_dpone.cluster.protocol.authority_io import Held
from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.values.authority.generation import (
    GenerationRecord,
    MemberGeneration,
    PublishedMember,
)
from airflow_provider_dpone.cluster.values.identities import schema_digest
from airflow_provider_dpone.cluster.values.part_digests import PartDigest
from airflow_provider_dpone.cluster.values.receipts import CURRENT_CONTENT_DIGEST, ArtifactReceipt, ContentDigestVersion
from airflow_provider_dpone.core.alerts import STAGING_DIVERGENCE, TARGET_DRIFT
from airflow_provider_dpone.core.errors import DponeError, UnavailableError, VerificationBudgetExceededError

CANDIDATE_DIVERGENT = "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_DIVERGENT"
DRIFT = "DPONE_CLICKHOUSE_CLUSTER_TARGET_DRIFT"


def observe(ctx: Context, member_id: str, read: TableRead) -> TableObservation:
    try:
        return ctx.session(member_id).observe_table(read)
    except VerificationBudgetExceededError:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_VERIFICATION_BUDGET_EXCEEDED",
            f"member {ctx.label(member_id)}, table {read.table}",
        ) from None
    except UnavailableError:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE", f"member {ctx.label(member_id)} did not answer"
        ) from None


def observe_target(ctx: Context, member_id: str, *, with_content: bool = False) -> TableObservation:
    """The target (its content digest, for the baseline, with the current digest version)."""
    return observe(ctx, member_id, TableRead(ctx.request.database, ctx.request.target, with_content=with_content))


def observe_candidate(
    ctx: Context,
    member_id: str,
    *,
    artifact: ArtifactReceipt | None = None,
    with_content: bool = False,
    with_parts: bool = False,
) -> TableObservation:
    """The candidate; its content (``with_content``) digested with the function the bound ``artifact`` names."""
    if with_content and artifact is None:
        raise ValueError("a candidate's content is digested with its artifact's digest version")
    version = CURRENT_CONTENT_DIGEST if artifact is None else artifact.content_digest_version
    read = TableRead(ctx.request.database, ctx.request.candidate_name, with_content, with_parts, version)
    return observe(ctx, member_id, read)


@dataclass(frozen=True)
class Verified:
    """A table's content as recorded together: while the table holds this UUID, row count and parts digest, no row
    can have moved; ``part_digests`` say what each of its parts added (empty: not recorded)."""

    uuid: str
    row_count: int
    parts_digest: str
    content_digest: str
    part_digests: tuple[PartDigest, ...]


def observe_unchanged(
    ctx: Context, member_id: str, table: str, known: Verified | None, digest_version: ContentDigestVersion
) -> TableObservation:
    """``table`` with its content. While it holds ``known``'s UUID, row count and parts, the recorded digest stands
    (one metadata read). When only its parts changed (a merge, a write), the server reads just the parts not among
    ``known``'s part digests and sums them with the recorded ones: exactly the digest of every row, of one moment's
    part set (``MemberSession.observe_table``). Another table, or nothing known, is digested whole."""
    whole = TableRead(ctx.request.database, table, with_content=True, digest_version=digest_version)
    if known is None:
        return observe(ctx, member_id, whole)
    obs = observe(ctx, member_id, replace(whole, with_content=False, with_parts=True))
    if obs.exists and (obs.uuid, obs.row_count, obs.parts_digest) == (known.uuid, known.row_count, known.parts_digest):
        return obs.model_copy(update={"content_digest": known.content_digest})
    reusable = known.part_digests if obs.exists and obs.uuid == known.uuid else ()
    return observe(ctx, member_id, replace(whole, known_parts=reusable))


def observe_verified(ctx: Context, member: MemberGeneration, artifact: ArtifactReceipt) -> TableObservation:
    """The member's candidate with its content: the digest recorded at verification while the candidate's parts are
    unchanged since; otherwise read again, only the parts not recorded at verification."""
    uuid, rows, parts, digest = member.candidate_uuid, member.row_count, member.parts_digest, member.content_digest
    known = None
    if uuid is not None and rows is not None and parts is not None and digest is not None:
        known = Verified(uuid, rows, parts, digest, member.part_digests or ())
    return observe_unchanged(ctx, member.member_id, ctx.request.candidate_name, known, artifact.content_digest_version)


def observe_published(ctx: Context, member: MemberGeneration, artifact: ArtifactReceipt) -> TableObservation:
    """The member's target after the publication DDL, with its content: the candidate's verified digest while the
    target holds the candidate's UUID, row count and verified parts; otherwise the server digests the parts not
    recorded at verification (or the whole table), so a merge passes and any write after the barrier is seen."""
    uuid, rows, parts, digest = member.candidate_uuid, member.row_count, member.parts_digest, member.content_digest
    known = None
    if uuid is not None and rows is not None and parts is not None and digest is not None:
        known = Verified(uuid, rows, parts, digest, member.part_digests or ())
    return observe_unchanged(ctx, member.member_id, ctx.request.target, known, artifact.content_digest_version)


def observe_baseline_target(ctx: Context, member_id: str, published: PublishedMember | None) -> TableObservation:
    """The existing target with its content: what a COMPLETED predecessor ``published`` on this member is reused
    while the target still holds its UUID and parts, and its part digests while only parts changed; a foreign or
    first-adopted target, or a record without the facts, is digested whole."""
    known = None
    if published is not None:
        known = Verified(
            published.target_uuid,
            published.row_count,
            published.parts_digest,
            published.content_digest,
            published.part_digests or (),
        )
    return observe_unchanged(ctx, member_id, ctx.request.target, known, CURRENT_CONTENT_DIGEST)


def baseline_state(obs: TableObservation) -> dict[str, str]:
    """What an existing baseline target's observation records besides its content (``MemberGeneration``): its
    schema and the active parts seen with the content, the facts :func:`observe_baseline_held` compares."""
    if obs.parts_digest is None:
        return {}
    return {"target_schema_digest": schema_digest(obs.columns), "target_parts_digest": obs.parts_digest}


def observe_baseline_held(ctx: Context, record: GenerationRecord, member_id: str, table: str) -> TableObservation:
    """The member's baseline target under ``table``: the target name at the publication barrier, the candidate name
    after an EXCHANGE (the predecessor). A recorded absent baseline: its UUID alone (one metadata read). An existing
    one, with its content: the recorded baseline digest while the table holds the baseline's UUID, row count and
    active parts (one metadata read, its count the parts' rows); after a merge or a write the server digests it
    again, reusing only the COMPLETED predecessor's part facts of this same table. A record written without the
    baseline's parts is digested whole, every time."""
    member = record.member(member_id)
    artifact = record.artifact
    assert artifact is not None  # the barrier runs from STAGED, which binds it
    version = artifact.content_digest_version
    if member.target_uuid is None:
        return observe(ctx, member_id, TableRead(ctx.request.database, table, with_content=False))
    rows, parts, digest = member.target_row_count, member.target_parts_digest, member.target_content_digest
    if rows is None or parts is None or digest is None:
        return observe(
            ctx, member_id, TableRead(ctx.request.database, table, with_content=True, digest_version=version)
        )
    this_table = (member_id, member.target_uuid, version)
    facts = next(
        (
            published.part_digests or ()
            for published in record.predecessor
            if (published.member_id, published.target_uuid, published.digest_version) == this_table
        ),
        (),
    )
    return observe_unchanged(ctx, member_id, table, Verified(member.target_uuid, rows, parts, digest, facts), version)


def baseline_drift(obs: TableObservation, member: MemberGeneration) -> str | None:
    """Why the member's target, still the baseline's UUID, is no longer the recorded baseline (written or altered in
    place): its schema, row count or content digest differs; ``None`` when it is the baseline (a merge that kept every
    row is), or when it is not the baseline's table at all (absent, or another UUID: the UUID check's verdict)."""
    if member.target_uuid is None or not obs.exists or obs.uuid != member.target_uuid:
        return None
    if member.target_schema_digest is not None and schema_digest(obs.columns) != member.target_schema_digest:
        return "its schema was altered"
    if obs.row_count != member.target_row_count:
        return "rows were written or deleted"
    if obs.content_digest != member.target_content_digest:
        return "rows were rewritten"
    return None


def drifted(ctx: Context, held: Held | None, member_id: str, detail: str) -> DponeError:
    """Alert that ``member_id``'s live target was written or altered in place since its baseline; the
    ``TARGET_DRIFT`` error to raise (recorded as the last error with ``held``, where its phase may loop)."""
    ctx.alert(TARGET_DRIFT, member_id=member_id, code=DRIFT)
    message = f"member {ctx.label(member_id)}: {detail}"
    return DponeError(DRIFT, message) if held is None else ctx.fail_closed(held, DRIFT, message)


def is_exact(obs: TableObservation, member: MemberGeneration, artifact: ArtifactReceipt) -> bool:
    """The member's bound candidate holds exactly the artifact: schema, row count and canonical content digest."""
    return (
        obs.exists
        and obs.uuid == member.candidate_uuid
        and obs.columns == artifact.schema_pairs
        and obs.row_count == artifact.row_count
        and obs.content_digest == artifact.content_digest
    )


def unexplained(obs: TableObservation, artifact: ArtifactReceipt) -> str | None:
    """Why an owned, bound candidate that is not exactly the artifact cannot be what an ambiguous load left in the
    fresh table it was bound as; ``None`` when it can be (the sealed schema with fewer rows: nothing, or part, of the
    one load arrived), the only state a candidate is rebuilt from. Vanished, duplicated or divergent stops."""
    if not obs.exists:
        return "vanished after it was bound"
    if obs.columns != artifact.schema_pairs:
        return "divergent schema"
    rows = obs.row_count or 0
    if rows > artifact.row_count:
        return "duplicated rows"
    if rows == artifact.row_count:
        return "divergent content"
    return None


def diverged(ctx: Context, held: Held | None, member_id: str, detail: str) -> DponeError:
    """Alert that ``member_id``'s candidate holds what nothing of this operation explains; the ``CANDIDATE_DIVERGENT``
    error to raise (recorded as the last error with ``held``, where its phase may loop)."""
    ctx.alert(STAGING_DIVERGENCE, member_id=member_id, code=CANDIDATE_DIVERGENT)
    if held is None:
        return DponeError(CANDIDATE_DIVERGENT, f"member {ctx.label(member_id)}: {detail}")
    return ctx.fail_closed(held, CANDIDATE_DIVERGENT, f"member {ctx.label(member_id)}: {detail}")
