"""LOCKED -> STAGING: bind the sealed artifact, the logical generation and the observed baseline (seed 000 §3).

The artifact is produced by the injected source only while no artifact is bound; afterwards every attempt reopens the
bound one. An unsupported artifact (not replayable, over ``max_source_bytes``, or a schema other than the table's)
aborts the operation before any member mutation. The baseline is the existing target on every member (equal schema
and content, distinct UUIDs allowed) or absent on every member; anything mixed blocks without mutating. Empty input
is a valid generation: the empty artifact's digests identify it like any other.

The same CAS persists every member's first candidate UUID intent, so no CREATE can ever precede its intent and the
staging of N members needs one authority write fewer per member.
"""

from __future__ import annotations

from airflow_provider_dpone.contracts.authority_external import ErrorClassification, MemberRecord
from airflow_provider_dpone.contracts.authority_phases import MemberStage, Phase
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.identities import generation_id
from airflow_provider_dpone.contracts.receipts import ArtifactReceipt
from airflow_provider_dpone.ports.publication import ArtifactSource
from airflow_provider_dpone.protocol.authority_io import Held
from airflow_provider_dpone.protocol.context import Context
from airflow_provider_dpone.protocol.observe import observe_target
from airflow_provider_dpone.protocol.runtime_admission import is_direct_mergetree

UNSUPPORTED = "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_UNSUPPORTED"


def bind_artifact_and_baseline(ctx: Context, held: Held, source: ArtifactSource) -> Held:
    """Seal (or fail and abort), observe the baseline, and CAS STAGING."""
    receipt = source.seal()
    problem = unsupported_reason(ctx, receipt)
    if problem is not None:
        classification = ErrorClassification(code=UNSUPPORTED, phase=held.record.phase, at_ms=ctx.now())
        ctx.commit(held, phase=Phase.ABORTED, last_error=classification)
        raise DponeError(UNSUPPORTED, problem)
    members = []
    observations = {mid: observe_target(ctx, mid, with_content=True) for mid in held.record.member_ids()}
    present = {mid for mid, obs in observations.items() if obs.exists}
    if present and len(present) != len(observations):
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT", f"target on {len(present)} of {len(observations)}"
        )
    if present:
        shapes = {(obs.columns, obs.row_count, obs.content_digest) for obs in observations.values()}
        if len(shapes) != 1 or any(obs.content_digest is None for obs in observations.values()):
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT", "schema or content differs between members")
        uuids = {obs.uuid for obs in observations.values()}
        if len(uuids) != len(observations):
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT", "members share a physical UUID")
        bad = sorted(mid for mid, obs in observations.items() if not is_direct_mergetree(obs.engine))
        if bad:
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED", f"target on members {bad}")
    for member in held.record.members:
        obs = observations[member.member_id]
        intent = ctx.ports.entropy.uuid()
        members.append(
            MemberRecord(
                member_id=member.member_id,
                stage=MemberStage.INTENDED,
                candidate_uuid_intent=intent,
                owned_candidate_uuids=(intent,),
                target_uuid=obs.uuid if obs.exists else None,
                target_row_count=obs.row_count if obs.exists else None,
                target_content_digest=obs.content_digest if obs.exists else None,
            )
        )
    return ctx.commit(
        held,
        phase=Phase.STAGING,
        artifact=receipt,
        schema_digest=receipt.schema_digest,
        generation_id=generation_id(
            operation_id_hex=held.record.operation_id,
            artifact_sha256=receipt.sha256,
            schema_digest_hex=receipt.schema_digest,
            row_count=receipt.row_count,
        ),
        baseline="existing" if present else "absent",
        members=tuple(members),
    )


def unsupported_reason(ctx: Context, receipt: ArtifactReceipt) -> str | None:
    if not receipt.replayable:
        return "artifact is not replayable"
    if receipt.byte_size > ctx.request.max_source_bytes:
        return f"{receipt.byte_size} bytes > max_source_bytes {ctx.request.max_source_bytes}"
    if receipt.schema_pairs != ctx.request.table.schema_pairs:
        return "artifact schema differs from the table definition"
    return None
