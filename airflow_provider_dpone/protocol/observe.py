"""Member observations with the port failures mapped to stable codes (reads have no effect to be unsure about).

A content digest is always computed with the digest version of the record's artifact receipt (old records keep
their own function); before a receipt exists (the baseline) with the current one, which the receipt must then name.
"""

from __future__ import annotations

from airflow_provider_dpone.contracts.authority_generation import MemberGeneration
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


def observe_verified(ctx: Context, member: MemberGeneration, artifact: ArtifactReceipt) -> TableObservation:
    """The member's candidate with its content: the digest recorded at verification while the candidate's parts are
    unchanged since (no row can have moved), a fresh digest otherwise (a merge, or anything else)."""
    if member.parts_digest is not None:
        obs = observe_candidate(ctx, member.member_id, artifact=artifact, with_parts=True)
        if obs.exists and obs.uuid == member.candidate_uuid and obs.parts_digest == member.parts_digest:
            return obs.model_copy(update={"content_digest": member.content_digest})
    return observe_candidate(ctx, member.member_id, artifact=artifact, with_content=True)


def is_exact(obs: TableObservation, member: MemberGeneration, artifact: ArtifactReceipt) -> bool:
    """The member's bound candidate holds exactly the artifact: schema, row count and canonical content digest."""
    return (
        obs.exists
        and obs.uuid == member.candidate_uuid
        and obs.columns == artifact.schema_pairs
        and obs.row_count == artifact.row_count
        and obs.content_digest == artifact.content_digest
    )
