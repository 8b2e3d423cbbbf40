"""COMMITTED -> CLEANUP_DISPATCHING -> COMPLETED: fenced removal of exactly the predecessor (seed 000 §6.1-6.5).

After an EXCHANGE the candidate name holds each member's predecessor. Cleanup requires every member to still expose
its committed candidate as the target and to hold exactly its bound predecessor UUID under the candidate name, then
takes one permit and dispatches one ``DROP TABLE ... ON CLUSTER``. COMPLETED is written only after the bound queue
entry is found and the predecessor is proven absent on every member. After a RENAME there is no predecessor: the
binding records kind ``none`` and COMPLETED requires the candidate name to be absent everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_dpone.contracts.authority_external import DdlBinding, ExternalAuthorityRecord
from airflow_provider_dpone.contracts.authority_phases import Phase
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.ports.publication import DropTable
from airflow_provider_dpone.protocol.authority_io import Held
from airflow_provider_dpone.protocol.context import Context
from airflow_provider_dpone.protocol.dispatch import dispatch_once, permit
from airflow_provider_dpone.protocol.observe import observe_candidate, observe_target
from airflow_provider_dpone.protocol.reconcile import Reconciliation, Side, Verdict, classify, decide, read_entry


@dataclass(frozen=True)
class CleanupProgress:
    held: Held
    reconciliation: Reconciliation


def cleanup_intent(ctx: Context, record: ExternalAuthorityRecord) -> DropTable:
    return DropTable(cluster=ctx.request.cluster, database=ctx.request.database, table=record.candidate_name)


def dispatch_cleanup(ctx: Context, held: Held) -> Held:
    """From COMMITTED: verify, permit, one DROP dispatch (or bind kind ``none`` after a RENAME)."""
    sides = _sides(ctx, held)
    if any(side is not Side.BEFORE for side in sides.values()):
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_FOREIGN_UUID", "cleanup: predecessor not as bound")
    if held.record.baseline == "absent":
        binding = DdlBinding(
            kind="none",
            epoch=held.record.dispatch_epoch,
            correlation_token=None,
            query_digest=None,
            permitted_at_ms=ctx.now(),
        )
        return ctx.commit(held, phase=Phase.CLEANUP_DISPATCHING, cleanup=binding)
    intent = cleanup_intent(ctx, held.record)
    held = permit(ctx, held, intent, phase=Phase.CLEANUP_DISPATCHING, slot="cleanup")
    assert held.record.cleanup is not None
    dispatch_once(ctx, held.record.cleanup, intent)
    return held


def redispatch_void(ctx: Context, held: Held) -> Held:
    binding = held.record.cleanup
    assert binding is not None and binding.correlation_token is not None
    intent = cleanup_intent(ctx, held.record)
    abandoned = (*binding.abandoned, binding.correlation_token)
    held = permit(ctx, held, intent, phase=Phase.CLEANUP_DISPATCHING, slot="cleanup", abandoned=abandoned)
    assert held.record.cleanup is not None
    dispatch_once(ctx, held.record.cleanup, intent)
    return held


def reconcile_cleanup(ctx: Context, held: Held) -> CleanupProgress:
    """Observe the bound entry and every member; CAS COMPLETED once the predecessor is absent everywhere."""
    record = held.record
    binding = record.cleanup
    assert binding is not None
    members = record.member_ids()
    if binding.kind == "none":
        sides = _sides(ctx, held)
        if any(side is not Side.BEFORE for side in sides.values()):
            raise ctx.fail_closed(held, "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_FOREIGN_UUID", "cleanup: name reused")
        outcome = Reconciliation(Verdict.COMPLETE, None, ())
    else:
        entry = read_entry(ctx, binding)
        sides = _sides(ctx, held)
        try:
            outcome = decide(
                what="cleanup",
                binding=binding,
                entry=entry,
                sides=sides,
                members=members,
                now_ms=ctx.now(),
                quiet_ms=ctx.settings.dispatch_quiet_ms,
            )
        except DponeError as error:
            raise ctx.fail_closed(held, error.code, error.detail) from None
    if outcome.verdict is Verdict.COMPLETE:
        done = tuple(member.model_copy(update={"predecessor_absent": True}) for member in record.members)
        held = ctx.commit(
            held, phase=Phase.COMPLETED, members=done, cleanup=binding.model_copy(update={"entry": outcome.entry})
        )
    return CleanupProgress(held, outcome)


def _sides(ctx: Context, held: Held) -> dict[str, Side]:
    """BEFORE: the predecessor (or, after a RENAME, nothing) under the candidate name; AFTER: the name is empty.

    The target must be the committed candidate on every member in both cases; anything else is foreign.
    """
    sides: dict[str, Side] = {}
    for member in held.record.members:
        target = observe_target(ctx, member.member_id)
        candidate = observe_candidate(ctx, member.member_id)
        side = classify(
            target.uuid,
            candidate.uuid,
            before=(member.published_uuid, member.target_uuid),
            after=(member.published_uuid, None),
        )
        if side is None:
            raise ctx.fail_closed(
                held, "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_FOREIGN_UUID", f"member {member.member_id}"
            )
        sides[member.member_id] = side
    return sides
