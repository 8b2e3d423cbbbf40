"""STAGED -> PUBLICATION_DISPATCHING -> COMMITTED: the one fenced publication DDL (seed 000 §5).

Barrier: the bound inventory (checked by the caller), every target still the baseline UUID (or absent), every
candidate still the exact READY generation. Then one permit, one dispatch of ``EXCHANGE TABLES`` (existing baseline)
or ``RENAME TABLE`` (absent baseline) ON CLUSTER, and reconciliation. COMMITTED is written only when every member's
target *is* its verified candidate (UUID) and the bound queue entry is present without host failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_dpone.contracts.authority_external import ExternalAuthorityRecord
from airflow_provider_dpone.contracts.authority_phases import Phase
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.ports.publication import DdlIntent, ExchangeTables, RenameTable
from airflow_provider_dpone.protocol.authority_io import Held
from airflow_provider_dpone.protocol.context import Context
from airflow_provider_dpone.protocol.dispatch import dispatch_once, permit
from airflow_provider_dpone.protocol.observe import observe_candidate, observe_target
from airflow_provider_dpone.protocol.reconcile import Reconciliation, Side, Verdict, classify, decide, read_entry
from airflow_provider_dpone.protocol.staging import is_exact


@dataclass(frozen=True)
class PublicationProgress:
    held: Held
    reconciliation: Reconciliation


def publication_intent(ctx: Context, record: ExternalAuthorityRecord) -> DdlIntent:
    request = ctx.request
    if record.baseline == "existing":
        return ExchangeTables(
            cluster=request.cluster, database=request.database, left=request.target, right=record.candidate_name
        )
    return RenameTable(
        cluster=request.cluster, database=request.database, source=record.candidate_name, target=request.target
    )


def dispatch_publication(ctx: Context, held: Held) -> Held:
    """From STAGED: barrier, permit, one dispatch. Returns the held PUBLICATION_DISPATCHING record."""
    _barrier(ctx, held)
    intent = publication_intent(ctx, held.record)
    held = permit(ctx, held, intent, phase=Phase.PUBLICATION_DISPATCHING, slot="publication")
    assert held.record.publication is not None
    dispatch_once(ctx, held.record.publication, intent)
    return held


def redispatch_void(ctx: Context, held: Held) -> Held:
    """A new permit after the bound one was proven void (never queued, no effect, quiet elapsed); one dispatch."""
    binding = held.record.publication
    assert binding is not None and binding.correlation_token is not None
    intent = publication_intent(ctx, held.record)
    abandoned = (*binding.abandoned, binding.correlation_token)
    held = permit(ctx, held, intent, phase=Phase.PUBLICATION_DISPATCHING, slot="publication", abandoned=abandoned)
    assert held.record.publication is not None
    dispatch_once(ctx, held.record.publication, intent)
    return held


def reconcile_publication(ctx: Context, held: Held) -> PublicationProgress:
    """Observe the bound entry and every member; CAS COMMITTED when complete."""
    record = held.record
    binding = record.publication
    assert binding is not None
    entry = read_entry(ctx, binding)
    sides: dict[str, Side] = {}
    for member in record.members:
        target = observe_target(ctx, member.member_id)
        candidate = observe_candidate(ctx, member.member_id)
        side = classify(
            target.uuid,
            candidate.uuid,
            before=(member.target_uuid, member.candidate_uuid),
            after=(member.candidate_uuid, member.target_uuid),
        )
        if side is None:
            raise ctx.fail_closed(
                held, "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_FOREIGN_UUID", f"member {member.member_id}"
            )
        sides[member.member_id] = side
    try:
        outcome = decide(
            what="publication",
            binding=binding,
            entry=entry,
            sides=sides,
            members=record.member_ids(),
            now_ms=ctx.now(),
            quiet_ms=ctx.settings.dispatch_quiet_ms,
        )
    except DponeError as error:
        raise ctx.fail_closed(held, error.code, error.detail) from None
    if outcome.verdict is Verdict.COMPLETE:
        members = tuple(
            member.model_copy(update={"published_uuid": member.candidate_uuid}) for member in record.members
        )
        held = ctx.commit(
            held,
            phase=Phase.COMMITTED,
            members=members,
            publication=binding.model_copy(update={"entry": outcome.entry}),
            committed_at_ms=ctx.now(),
        )
    return PublicationProgress(held, outcome)


def _barrier(ctx: Context, held: Held) -> None:
    record = held.record
    artifact = record.artifact
    assert artifact is not None
    for member in record.members:
        target = observe_target(ctx, member.member_id)
        if target.uuid != member.target_uuid:
            raise DponeError(
                "DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT", f"member {member.member_id}: target changed since baseline"
            )
        candidate = observe_candidate(ctx, member.member_id, with_content=True)
        if not (candidate.exists and is_exact(candidate, member, artifact)):
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_DIVERGENT", f"member {member.member_id}")
