"""COMMITTED -> CLEANUP_DISPATCHING -> COMPLETED: fenced removal of exactly the predecessor, both modes.

After an EXCHANGE the candidate name holds each member's predecessor. Cleanup requires every member to still expose
its committed candidate as the target and to hold exactly its bound predecessor UUID under the candidate name, then
runs one :mod:`~airflow_provider_dpone.cluster.protocol.ddl_step` of ``DROP TABLE ... ON CLUSTER``. COMPLETED is written only
after the bound queue entry is found and the predecessor is proven absent on every member. After a RENAME there is no
predecessor: the binding records kind ``none`` and COMPLETED requires the candidate name to be absent everywhere.
"""

from __future__ import annotations

from airflow_provider_dpone.cluster.ports import DropTable
from airflow_provider_dpone.cluster.protocol.authority_io import Held
from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.protocol.ddl_step import (
    DdlStep,
    StepProgress,
    observe_sides,
    require_before,
    run_step,
)
from airflow_provider_dpone.cluster.protocol.publication import FOREIGN_UUID
from airflow_provider_dpone.cluster.protocol.reconcile import Reconciliation, Side, Verdict, classify_observed
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.generation import DdlBinding
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.core.errors import DponeError


def clean_up(ctx: Context, held: Held, *, allow_dispatch: bool) -> StepProgress:
    """From COMMITTED: verify, permit, one DROP (only with ``allow_dispatch``); then reconcile, COMPLETED if done."""
    step = cleanup_step(ctx, held.record)
    if held.record.baseline == "existing":
        return run_step(ctx, held, step, allow_dispatch=allow_dispatch)
    return _nothing_to_drop(ctx, held, step, allow_dispatch=allow_dispatch)


def cleanup_step(ctx: Context, record: AuthorityRecord) -> DdlStep:
    return DdlStep(
        what="cleanup",
        intent=DropTable(cluster=ctx.request.cluster, database=ctx.request.database, table=record.candidate_name),
        phase=Phase.CLEANUP_DISPATCHING,
        dispatched_from=Phase.COMMITTED,
        slot=lambda record: record.cleanup,
        bind=lambda _record, binding: {"cleanup": binding},
        classify=_side,
        foreign_code=FOREIGN_UUID,
        finish=_complete,
    )


def _nothing_to_drop(ctx: Context, held: Held, step: DdlStep, *, allow_dispatch: bool) -> StepProgress:
    """After a RENAME: bind kind ``none`` (no DDL, no epoch) and complete once every member is proven BEFORE."""
    if held.record.cleanup is None:
        if not allow_dispatch:
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY", "cleanup not bound yet")
        require_before(ctx, held, step)
        binding = DdlBinding(
            kind="none",
            epoch=held.record.dispatch_epoch,
            correlation_token=None,
            query_digest=None,
            permitted_at_ms=ctx.now(),
        )
        held = ctx.commit(held, phase=Phase.CLEANUP_DISPATCHING, cleanup=binding)
    if any(side is not Side.BEFORE for _member_id, side in observe_sides(ctx, held, step)):
        raise ctx.fail_closed(held, FOREIGN_UUID, "cleanup: name reused")
    bound = held.record.cleanup
    assert bound is not None
    return StepProgress(_complete(ctx, held, bound), Reconciliation(Verdict.COMPLETE, None, ()))


def _side(ctx: Context, record: AuthorityRecord, member_id: str) -> Side | None:
    """BEFORE: the predecessor (or, after a RENAME, nothing) under the candidate name; AFTER: the name is empty.

    The target must be the committed candidate on every member in both cases; anything else is foreign.
    """
    member = record.member(member_id)
    return classify_observed(
        ctx, member_id, before=(member.published_uuid, member.target_uuid), after=(member.published_uuid, None)
    )


def _complete(ctx: Context, held: Held, binding: DdlBinding) -> Held:
    done = tuple(member.model_copy(update={"predecessor_absent": True}) for member in held.record.members)
    return ctx.commit(held, phase=Phase.COMPLETED, members=done, cleanup=binding)
