"""One-shot member mutations with the port failures mapped to protocol decisions, and the one artifact load.

A lost response (:class:`OutcomeUnknownError`) is *not* an error here: the caller's next step observes the member and
decides from what is physically there. A refusal stops the attempt with a stable code (a retry observes again).
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_provider_dpone.cluster.ports import ArtifactHandle
from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.values.identities import load_dedup_token, load_query_id
from airflow_provider_dpone.cluster.values.progress import MemberLoadAnswered, MemberLoadStarted, MemberLoadUnanswered
from airflow_provider_dpone.cluster.values.receipts import ArtifactReceipt
from airflow_provider_dpone.core.errors import (
    ArtifactInvalidError,
    DponeError,
    MutationRejectedError,
    OutcomeUnknownError,
)


def mutate_once(member: str, what: str, action: Callable[[], None]) -> bool:
    """Run ``action`` once on ``member`` (its one name, :meth:`Context.label`). True if acknowledged, False if the
    outcome is unknown (observe next)."""
    try:
        action()
    except OutcomeUnknownError:
        return False
    except MutationRejectedError:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_MEMBER_MUTATION_REJECTED", f"{what} on member {member}") from None
    return True


def load_identity(operation_id: str, member_id: str, candidate_uuid: str, artifact: ArtifactReceipt) -> tuple[str, str]:
    """The deterministic ``(query_id, insert_deduplication_token)`` of the one load into one candidate."""
    query_id = load_query_id(operation_id_hex=operation_id, member=member_id, candidate_uuid=candidate_uuid)
    token = load_dedup_token(
        operation_id_hex=operation_id, member=member_id, candidate_uuid=candidate_uuid, artifact_sha256=artifact.sha256
    )
    return query_id, token


def load_once(ctx: Context, member_id: str, candidate_uuid: str, artifact: ArtifactReceipt) -> bool:
    """The single load of the sealed artifact into a freshly bound candidate; its bytes are verified as they stream.

    Never called for a candidate that may already hold rows: the caller binds the candidate (CAS) first and calls
    this only in the same attempt; a retry that finds the candidate bound observes instead.
    """
    try:
        handle: ArtifactHandle = ctx.ports.artifacts.open(artifact)
    except ArtifactInvalidError:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_INVALID", f"sha256 {artifact.sha256[:16]}") from None
    query_id, token = load_identity(ctx.request.operation_id, member_id, candidate_uuid, artifact)
    session = ctx.session(member_id)
    database, name = ctx.request.database, ctx.request.candidate_name
    label = ctx.label(member_id)
    ctx.report(MemberLoadStarted(label, artifact.sha256, artifact.row_count, artifact.byte_size))
    started = ctx.now()

    def load() -> None:
        try:
            session.load(database, name, candidate_uuid, handle, query_id=query_id, dedup_token=token)
        except Exception as error:
            ctx.report(MemberLoadUnanswered(label, type(error).__name__))
            raise
        ctx.report(MemberLoadAnswered(label, ctx.now() - started))

    try:
        return mutate_once(label, "load", load)
    except ArtifactInvalidError:  # verified while streamed: the candidate may hold part of it (never READY)
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_INVALID", f"sha256 {artifact.sha256[:16]}") from None
