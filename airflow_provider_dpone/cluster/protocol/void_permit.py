"""The explicit void of a dispatch permit whose request is proven dead.

A step that cannot prove its permit's dispatch (no queue entry, no member effect) fails closed with
``DISPATCH_UNPROVEN`` and keeps the target held: a stalled coordinator may still hold the request and run it later.
This operator action releases it, only with proof that the first request can no longer execute:

1. the server the permit was pinned to (its recorded :class:`ServerName`) answers the proof read, and started after the permit plus the dispatch deadline, the client's send timeout and a positive
   clock-skew margin (zero is refused: it assumes clocks that agree exactly): every request the permit could send reached the old server (a permit is never sent once older than the
   deadline) and died with it; a restart alone proves nothing, a request sent after it still runs;
2. then no ``system.distributed_ddl_queue`` entry carries the permit's correlation token (nothing was queued before
   the restart, and nothing can be now);
3. and every member shows exactly the step's pre-dispatch UUIDs (the step's own classifier says BEFORE).

A server that lost its data directory comes back with a new ``serverUUID()`` (ClickHouse keeps it in the ``uuid``
file of its data path and generates a new one when that file is missing), so condition 1 could never hold again.
The way out is the operator's statement that the pinned identity is retired (``retired_server_uuid``): no process
can answer as it again. It is accepted only when it names the pinned UUID, the answering server has another UUID
on the same host (the same ``hostName()`` digest: the server recreated in the pinned one's place, not another
server behind a balancer, which would prove nothing about a process that may still hold the request), and that
server started after the permit plus every margin: every request the permit could send had reached the retired
process (or nothing) before it started, and died with it. Conditions 2 and 3 hold unchanged. The proof records
``server_replaced`` and both identities (the permit's and the one read).

The proof (start time, permit, margins, the queue observation, each member's UUID pair by opaque id) is written into
the authority by one acknowledged, read-back-proven CAS that also empties the step's slot and returns the phase to the
one its step is dispatched from; the next attempt then takes a *new* permit (new epoch, new token). A lost response
of that CAS is resolved by reading the record again (the void is then done, or not), never by writing twice: a
retry that finds the last voided permit at the current epoch (no permit taken since) reports that void again. Any
missing proof refuses with a code that names it, and changes nothing.
"""

from __future__ import annotations

from typing import cast

from airflow_provider_dpone.cluster.ports import ServerIdentity
from airflow_provider_dpone.cluster.protocol.authority_io import Current, Held
from airflow_provider_dpone.cluster.protocol.cleanup import cleanup_step
from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.protocol.ddl_step import DdlStep
from airflow_provider_dpone.cluster.protocol.fence import require_own
from airflow_provider_dpone.cluster.protocol.mode import ModeBehaviour
from airflow_provider_dpone.cluster.protocol.publication import publication_step
from airflow_provider_dpone.cluster.protocol.reconcile import Side, observe_pair, read_entry
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.generation import MemberUuids, ServerName, VoidedPermit, VoidedStep
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.core.errors import DponeError, UnavailableError

NOTHING = "DPONE_CLICKHOUSE_CLUSTER_VOID_NOTHING_TO_VOID"
NOT_READY = "DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY"
RESTART = "DPONE_CLICKHOUSE_CLUSTER_VOID_RESTART_UNPROVEN"
QUEUED = "DPONE_CLICKHOUSE_CLUSTER_VOID_QUEUE_ENTRY_EXISTS"
EFFECT = "DPONE_CLICKHOUSE_CLUSTER_VOID_MEMBER_CHANGED"
SKEW = "DPONE_CLICKHOUSE_CLUSTER_VOID_SKEW_MARGIN_INVALID"
SERVER = "DPONE_CLICKHOUSE_CLUSTER_VOID_SERVER_DIFFERS"
REPLACEMENT = "DPONE_CLICKHOUSE_CLUSTER_VOID_REPLACEMENT_UNPROVEN"


def require_voidable(ctx: Context, current: Current | None) -> Held:
    """The run's own record, else ``VOID_NOTHING_TO_VOID``: with no record of its operation (it never fenced, or the
    target is free again) the run holds no permit, and there is nothing to void (another operation's unresolved
    record still says ``OPERATION_FENCED``, naming the holder)."""
    try:
        return require_own(ctx, current)
    except DponeError as error:
        if error.code != NOT_READY:
            raise
        raise DponeError(NOTHING, "no record of this run's operation holds the target: it holds no permit") from None


def void_permit(
    ctx: Context, held: Held, mode: ModeBehaviour, *, retired_server_uuid: str | None = None
) -> tuple[Held, VoidedPermit]:
    """Prove the bound permit dead and CAS the proof with the emptied slot; or refuse, changing nothing.
    ``retired_server_uuid``: the operator's statement that the pinned server's identity is retired (see above)."""
    record = held.record
    step = _bound_step(ctx, record, mode)
    permit = None if step is None else step.slot(record)
    if step is None or permit is None or permit.kind == "none":
        if record.voided and record.voided[-1].permit.epoch == record.dispatch_epoch:
            return held, record.voided[-1]  # already voided, no permit taken since (a retry after a lost response)
        raise DponeError(NOTHING, f"phase {record.phase}: no dispatch permit is bound")
    if permit.unsent:
        raise DponeError(NOTHING, f"{step.what} epoch {permit.epoch}: never sent; the stopped task takes a new permit")
    if ctx.settings.void_skew_margin_ms <= 0:
        raise DponeError(SKEW, f"{ctx.settings.void_skew_margin_ms} ms")
    identity = _server_identity(ctx)
    pinned = permit.server
    assert pinned is not None  # a dispatched permit is pinned (DdlBinding)
    replaced = retired_server_uuid is not None
    if replaced:
        _require_replacement(step.what, permit.epoch, pinned, identity.name, retired_server_uuid)
    elif identity.name != pinned:
        raise DponeError(
            SERVER,
            f"{step.what} epoch {permit.epoch}: pinned to server {pinned.server_uuid}, "
            f"answered by {identity.name.server_uuid}",
        )
    proof_time = identity.started_at_ms
    deadline, send, skew = (
        ctx.settings.dispatch_deadline_ms,
        ctx.settings.send_timeout_ms,
        ctx.settings.void_skew_margin_ms,
    )
    earliest = permit.sent_from_ms + deadline + send + skew
    if proof_time <= earliest:
        raise DponeError(
            RESTART,
            f"{step.what} epoch {permit.epoch}: coordinator started {max(0, earliest - proof_time + 1)} ms too early",
        )
    if read_entry(ctx, permit) is not None:
        raise DponeError(QUEUED, f"{step.what} epoch {permit.epoch}: the request reached the queue")
    members = tuple(_unchanged(ctx, record, step, member_id) for member_id in record.member_ids())
    proof = VoidedPermit(
        step=cast(VoidedStep, step.what),  # the four DdlStep names are exactly the VoidedStep literals
        permit=permit,
        server_started_at_ms=proof_time,
        dispatch_deadline_ms=deadline,
        send_timeout_ms=send,
        skew_margin_ms=skew,
        members=members,
        voided_at_ms=ctx.now(),
        server=identity.name,
        server_replaced=replaced,
    )
    held = ctx.commit(
        held,
        phase=step.dispatched_from,
        last_error=None,
        voided=(*record.voided, proof),
        **step.bind(record, None),
    )
    return held, proof


def _bound_step(ctx: Context, record: AuthorityRecord, mode: ModeBehaviour) -> DdlStep | None:
    if record.phase is Phase.PUBLICATION_DISPATCHING:
        return publication_step(ctx, record)
    if record.phase is Phase.CLEANUP_DISPATCHING:
        return cleanup_step(ctx, record)
    if record.phase is Phase.STAGING:
        return mode.staging_step(ctx, record)
    return None


def _require_replacement(
    what: str, epoch: int, pinned: ServerName, answered: ServerName, retired_server_uuid: str | None
) -> None:
    """The answering server is the pinned one's replacement: the statement names the pinned UUID, and another UUID
    answers from the pinned server's host."""
    prefix = f"{what} epoch {epoch}"
    if retired_server_uuid != pinned.server_uuid:
        raise DponeError(REPLACEMENT, f"{prefix}: pinned to server {pinned.server_uuid}, not {retired_server_uuid}")
    if answered.server_uuid == pinned.server_uuid:
        raise DponeError(REPLACEMENT, f"{prefix}: server {pinned.server_uuid} still answers: it is not retired")
    if answered.host_digest != pinned.host_digest:
        raise DponeError(
            REPLACEMENT,
            f"{prefix}: server {answered.server_uuid} answered from another host than the pinned server's",
        )


def _server_identity(ctx: Context) -> ServerIdentity:
    try:
        return ctx.ports.ddl.server_identity()
    except UnavailableError:
        raise DponeError(RESTART, "the coordinator's start time could not be read") from None


def _unchanged(ctx: Context, record: AuthorityRecord, step: DdlStep, member_id: str) -> MemberUuids:
    """The member's UUID pair, required to be exactly what the step expects before its DDL."""
    target, candidate = observe_pair(ctx, member_id)
    if step.classify(ctx, record, member_id) is not Side.BEFORE:
        raise DponeError(EFFECT, f"{step.what}: member {ctx.label(member_id)} is not as before the DDL")
    return MemberUuids(member_id=member_id, target_uuid=target, candidate_uuid=candidate)
