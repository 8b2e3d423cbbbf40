"""Member observations with the port failures mapped to stable codes (reads have no effect to be unsure about)."""

from __future__ import annotations

from airflow_provider_dpone.contracts.authority_generation import MemberGeneration
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.receipts import ArtifactReceipt
from airflow_provider_dpone.ports.publication import TableObservation, UnavailableError
from airflow_provider_dpone.protocol.context import Context


def observe(
    ctx: Context, member_id: str, table: str, *, with_content: bool, with_parts: bool = False
) -> TableObservation:
    try:
        session = ctx.session(member_id)
        return session.observe_table(ctx.request.database, table, with_content=with_content, with_parts=with_parts)
    except UnavailableError:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE", f"member {member_id} did not answer"
        ) from None


def observe_target(ctx: Context, member_id: str, *, with_content: bool = False) -> TableObservation:
    return observe(ctx, member_id, ctx.request.target, with_content=with_content)


def observe_candidate(
    ctx: Context, member_id: str, *, with_content: bool = False, with_parts: bool = False
) -> TableObservation:
    return observe(ctx, member_id, ctx.request.candidate_name, with_content=with_content, with_parts=with_parts)


def observe_verified(ctx: Context, member: MemberGeneration) -> TableObservation:
    """The member's candidate with its content: the digest recorded at verification while the candidate's parts are
    unchanged since (no row can have moved), a fresh digest otherwise (a merge, or anything else)."""
    if member.parts_digest is not None:
        obs = observe_candidate(ctx, member.member_id, with_parts=True)
        if obs.exists and obs.uuid == member.candidate_uuid and obs.parts_digest == member.parts_digest:
            return obs.model_copy(update={"content_digest": member.content_digest})
    return observe_candidate(ctx, member.member_id, with_content=True)


def is_exact(obs: TableObservation, member: MemberGeneration, artifact: ArtifactReceipt) -> bool:
    """The member's bound candidate holds exactly the artifact: schema, row count and canonical content digest."""
    return (
        obs.exists
        and obs.uuid == member.candidate_uuid
        and obs.columns == artifact.schema_pairs
        and obs.row_count == artifact.row_count
        and obs.content_digest == artifact.content_digest
    )
