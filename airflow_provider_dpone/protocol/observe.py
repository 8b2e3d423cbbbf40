"""Member observations with the port failures mapped to stable codes (reads have no effect to be unsure about).

A content digest is always computed with the digest version of the record's artifact receipt (old records keep
their own function); before a receipt exists (the baseline) with the current one, which the receipt must then name.
"""

from __future__ import annotations

from airflow_provider_dpone.contracts.authority_generation import MemberGeneration, PublishedMember
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.receipts import CURRENT_CONTENT_DIGEST, ArtifactReceipt, ContentDigestVersion
from airflow_provider_dpone.ports.publication import TableObservation, UnavailableError
from airflow_provider_dpone.protocol.context import Context


def observe(
    ctx: Context,
    member_id: str,
    table: str,
    *,
    with_content: bool,
    with_parts: bool = False,
    digest_version: ContentDigestVersion = CURRENT_CONTENT_DIGEST,
) -> TableObservation:
    try:
        session = ctx.session(member_id)
        return session.observe_table(
            ctx.request.database, table, with_content=with_content, with_parts=with_parts, digest_version=digest_version
        )
    except UnavailableError:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE", f"member {member_id} did not answer"
        ) from None


def observe_target(ctx: Context, member_id: str, *, with_content: bool = False) -> TableObservation:
    """The target (its content digest, for the baseline, with the current digest version)."""
    return observe(ctx, member_id, ctx.request.target, with_content=with_content)


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
    return observe(
        ctx,
        member_id,
        ctx.request.candidate_name,
        with_content=with_content,
        with_parts=with_parts,
        digest_version=CURRENT_CONTENT_DIGEST if artifact is None else artifact.content_digest_version,
    )


def observe_unchanged(
    ctx: Context,
    member_id: str,
    table: str,
    known: tuple[str, int, str, str] | None,
    digest_version: ContentDigestVersion,
) -> TableObservation:
    """``table`` with its content. ``known`` is a (UUID, row count, parts digest, content digest) recorded together:
    while the table holds that UUID, row count and parts, no row can have moved, so the recorded digest stands (one
    metadata read); otherwise (a merge, another table, nothing known) the server digests it again."""
    if known is not None:
        uuid, rows, parts, digest = known
        obs = observe(ctx, member_id, table, with_content=False, with_parts=True, digest_version=digest_version)
        if obs.exists and (obs.uuid, obs.row_count, obs.parts_digest) == (uuid, rows, parts):
            return obs.model_copy(update={"content_digest": digest})
    return observe(ctx, member_id, table, with_content=True, digest_version=digest_version)


def observe_verified(ctx: Context, member: MemberGeneration, artifact: ArtifactReceipt) -> TableObservation:
    """The member's candidate with its content: the digest recorded at verification while the candidate's parts are
    unchanged since, a fresh digest otherwise."""
    uuid, rows, parts, digest = member.candidate_uuid, member.row_count, member.parts_digest, member.content_digest
    known = None
    if uuid is not None and rows is not None and parts is not None and digest is not None:
        known = (uuid, rows, parts, digest)
    return observe_unchanged(ctx, member.member_id, ctx.request.candidate_name, known, artifact.content_digest_version)


def observe_baseline_target(ctx: Context, member_id: str, published: PublishedMember | None) -> TableObservation:
    """The existing target with its content (current digest version): what a COMPLETED predecessor ``published``
    on this member is reused while the target still holds its UUID and parts and was digested with the current
    version; a merge, a foreign or first-adopted target, or a record without the facts is digested."""
    known = None
    if published is not None and published.digest_version == CURRENT_CONTENT_DIGEST:
        known = (published.target_uuid, published.row_count, published.parts_digest, published.content_digest)
    return observe_unchanged(ctx, member_id, ctx.request.target, known, CURRENT_CONTENT_DIGEST)


def is_exact(obs: TableObservation, member: MemberGeneration, artifact: ArtifactReceipt) -> bool:
    """The member's bound candidate holds exactly the artifact: schema, row count and canonical content digest."""
    return (
        obs.exists
        and obs.uuid == member.candidate_uuid
        and obs.columns == artifact.schema_pairs
        and obs.row_count == artifact.row_count
        and obs.content_digest == artifact.content_digest
    )
