"""One fenced ``ON CLUSTER`` DDL step: permit -> dispatch once -> reconcile -> finish.

Every cluster DDL of both modes is this step: the external publication and cleanup, and the internal candidate
CREATE, rebuild DROP, publication and cleanup. A :class:`DdlStep` names what differs: the intent, the phase the
permit is written in, the record slot that holds the binding, the per-member classifier (BEFORE / AFTER / foreign)
and the completion update.

* Permit: the barrier passes (by default every member BEFORE), then one acknowledged, read-back-proven CAS
  increments the dispatch epoch, binds a fresh random correlation token and the intent's normalized digest, and
  records what the barrier verified (the publication's: a merged candidate's new parts). That
  CAS may be one the caller writes anyway, with the barrier observed before it (:func:`commit_permitted`).
* Pinned: before the permit (alongside the barrier's reads), the coordinator's identity is read in a fresh session
  and recorded in the binding; the dispatch requires that session (``session_check``), so it runs on the named
  server or is refused before it runs, and a void proof (:mod:`~airflow_provider_dpone.cluster.protocol.void_permit`) must come from that same server.
* Dispatch once: only the invocation holding that in-memory permit (``Context.grant``/``redeem``) dispatches, and
  exactly once; an unknown answer or a refusal is resolved by observation, never by a second dispatch.
* Recorded before sent: the holder first records the dispatch (one acknowledged, read-back-proven CAS stamping
  ``dispatching_at_ms``, taken before the write) and sends only within ``dispatch_deadline_ms`` of that stamp. A
  permit whose dispatch is not recorded was therefore never sent: it is void by construction, and any try replaces
  it by a new permit (new epoch, new token); that CAS fences out a holder still about to record. A holder whose
  record came too late to send removes it again (one more CAS) and stops with the retryable ``DISPATCH_NOT_SENT``.
* Reconcile: the one queue entry carrying the token plus every member's physical state, decided by
  :func:`~airflow_provider_dpone.cluster.protocol.reconcile.decide`. A foreign member fails closed at once.
* Finish: on COMPLETE, the step's completion CAS (with the observed queue entry).

A VOID verdict for a recorded dispatch (no queue entry, no member effect, quiet period elapsed) is *not* a licence to
dispatch again: a request can still be in flight, and a second permit could apply the same DDL twice. The step fails
closed with ``DISPATCH_UNPROVEN``. Only the explicit operator action of
:mod:`~airflow_provider_dpone.cluster.protocol.void_permit`, with recorded proof that the first request can no longer
execute, empties the slot so that a retry takes a new permit. A dispatch is never sent later than
``dispatch_deadline_ms`` after its record: that bounds how late its request can reach the coordinator, which the
proof relies on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from airflow_provider_dpone.cluster.ports import DdlIntent, DispatchSettings
from airflow_provider_dpone.cluster.protocol.authority_io import Held
from airflow_provider_dpone.cluster.protocol.context import Context, alongside
from airflow_provider_dpone.cluster.protocol.reconcile import Reconciliation, Side, Verdict, decide, read_entry
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.generation import DdlBinding
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.cluster.values.identities import ddl_intent_digest
from airflow_provider_dpone.core.alerts import (
    CLEANUP_UNKNOWN,
    QUEUE_EVIDENCE_EXPIRED,
    TERMINAL_MIXED_PUBLICATION,
)
from airflow_provider_dpone.core.canonical import canonical_json
from airflow_provider_dpone.core.errors import DponeError, MutationRejectedError, OutcomeUnknownError, UnavailableError

UNPROVEN = "DPONE_CLICKHOUSE_CLUSTER_DISPATCH_UNPROVEN"
NOT_SENT = "DPONE_CLICKHOUSE_CLUSTER_DISPATCH_NOT_SENT"
EVIDENCE_MISSING = "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_EVIDENCE_MISSING"
MIXED = "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_MIXED"
COORDINATOR_UNAVAILABLE = "DPONE_CLICKHOUSE_CLUSTER_COORDINATOR_UNAVAILABLE"

Classifier = Callable[[Context, AuthorityRecord, str], Side | None]
"""One member's side of the step (observed physically), or ``None`` when it holds something foreign."""


def require_before(ctx: Context, held: Held, step: DdlStep) -> dict[str, Any]:
    """The default barrier: every member is still exactly as the step expects before its DDL; nothing to record."""
    for member_id, side in observe_sides(ctx, held, step):
        if side is not Side.BEFORE:
            raise DponeError(step.foreign_code, f"{step.what}: member {ctx.label(member_id)} is not as bound")
    return {}


def observe_sides(ctx: Context, held: Held, step: DdlStep) -> Iterator[tuple[str, Side | None]]:
    """Every member's side of ``step``, observed concurrently (reads only) and yielded in member order; a member whose
    read failed raises only when it is reached. The caller's first verdict is therefore the one a member-by-member
    pass would reach (a foreign member before an unanswered one fails closed), whatever the threads' timing."""

    def side(member_id: str) -> Side | DponeError | None:
        try:
            return step.classify(ctx, held.record, member_id)
        except DponeError as error:
            return error

    for member_id, observed in ctx.each_member(side, held.record.member_ids()).items():
        if isinstance(observed, DponeError):
            raise observed
        yield member_id, observed


@dataclass(frozen=True)
class DdlStep:
    what: str
    """Names the step in details: ``publication``, ``cleanup``, ``candidate create``, ``candidate drop``."""
    intent: DdlIntent
    phase: Phase
    """The phase the permit CAS writes (and the step stays in until it finishes)."""
    dispatched_from: Phase
    """The phase a permit is taken in, to which an explicitly voided permit returns (``cluster/protocol/void_permit.py``)."""
    slot: Callable[[AuthorityRecord], DdlBinding | None]
    """The step's binding in the record, ``None`` while no permit was taken."""
    bind: Callable[[AuthorityRecord, DdlBinding | None], dict[str, Any]]
    """The record changes that store a binding in the slot (``None``: empty it again, after a void)."""
    classify: Classifier
    foreign_code: str
    finish: Callable[[Context, Held, DdlBinding], Held]
    """The completion CAS; the binding carries the observed queue entry."""
    barrier: Callable[[Context, Held, DdlStep], dict[str, Any]] = require_before
    """Observes every member before the permit; returns what it verified that the permit CAS records with it."""


@dataclass(frozen=True)
class StepProgress:
    held: Held
    reconciliation: Reconciliation

    @property
    def complete(self) -> bool:
        return self.reconciliation.verdict is Verdict.COMPLETE


def run_step(ctx: Context, held: Held, step: DdlStep, *, allow_dispatch: bool) -> StepProgress:
    """Take the permit and dispatch (only with ``allow_dispatch``, when none is bound or the bound one was never
    sent and this invocation does not hold it), then reconcile the bound one."""
    bound = step.slot(held.record)
    if bound is None and not allow_dispatch:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY", f"{step.what} not dispatched yet")
    if bound is None or (allow_dispatch and bound.unsent and not ctx.holds(bound)):
        held = _permit(ctx, held, step)
    binding = step.slot(held.record)
    assert binding is not None
    if ctx.redeem(binding):  # this invocation's own permit (taken just above, or folded into an earlier CAS)
        held = _dispatch_once(ctx, held, step, binding)
    return reconcile_step(ctx, held, step)


def reconcile_step(ctx: Context, held: Held, step: DdlStep) -> StepProgress:
    """Observe the bound entry and every member; run the completion CAS when complete. Never dispatches."""
    binding = step.slot(held.record)
    assert binding is not None
    entry = read_entry(ctx, binding)  # before the members: their state is at least as late as the entry's
    if entry is None and binding.unsent:  # nothing was sent, so nothing can arrive: the next try permits anew
        raise DponeError(NOT_SENT, f"{step.what}: epoch {binding.epoch} was never sent")
    sides: dict[str, Side] = {}
    for member_id, side in observe_sides(ctx, held, step):
        if side is None:
            raise ctx.fail_closed(held, step.foreign_code, f"{step.what}: member {ctx.label(member_id)}")
        sides[member_id] = side
    try:
        outcome = decide(
            what=step.what,
            binding=binding,
            entry=entry,
            sides=sides,
            members=held.record.member_ids(),
            label=ctx.label,
            now_ms=ctx.now(),
            quiet_ms=ctx.settings.dispatch_quiet_ms,
        )
    except DponeError as error:
        _alert_unresolved(ctx, step, binding, error.code)
        raise ctx.fail_closed(held, error.code, error.detail) from None
    if outcome.verdict is Verdict.VOID:
        _alert_unresolved(ctx, step, binding, UNPROVEN)
        raise ctx.fail_closed(held, UNPROVEN, f"{step.what}: epoch {binding.epoch} never reached the queue")
    if outcome.verdict is Verdict.COMPLETE:
        held = step.finish(ctx, held, binding.model_copy(update={"entry": outcome.entry}))
    return StepProgress(held, outcome)


def _alert_unresolved(ctx: Context, step: DdlStep, binding: DdlBinding, code: str) -> None:
    """The alert of a reconciliation that stops with ``code``: any undecided cleanup is ``cleanup_unknown``; for
    the other steps, missing queue evidence is ``queue_evidence_expired`` and a terminal mixed publication is
    ``terminal_mixed_publication`` (an unproven dispatch is not an alert: the void runbook handles it)."""
    if step.phase is Phase.CLEANUP_DISPATCHING:
        alert = CLEANUP_UNKNOWN
    elif code == EVIDENCE_MISSING:
        alert = QUEUE_EVIDENCE_EXPIRED
    elif code == MIXED and step.phase is Phase.PUBLICATION_DISPATCHING:
        alert = TERMINAL_MIXED_PUBLICATION
    else:
        return
    ctx.alert(alert, step=step.what, epoch=binding.epoch, phase=step.phase.value, code=code)


def _permit(ctx: Context, held: Held, step: DdlStep) -> Held:
    """The barrier, then one CAS of the step's phase with a new epoch, a binding for its intent and what the
    barrier observed; the returned record is the permit. The barrier's member reads and the binding's coordinator
    identity read are independent reads, taken at once (a barrier failure is raised first, as in order)."""
    observed, binding = alongside(
        lambda: step.barrier(ctx, held, step),
        lambda: new_permit(ctx, held.record, step.intent),
        ctx.settings.member_parallelism,
    )
    return commit_permitted(ctx, held, binding, phase=step.phase, **step.bind(held.record, binding), **observed)


def new_permit(ctx: Context, record: AuthorityRecord, intent: DdlIntent) -> DdlBinding:
    """A binding for ``intent`` at the record's next dispatch epoch, with a fresh random correlation token and the
    coordinator server it is pinned to (read first, in the session its dispatch will require). It is a permit only
    once :func:`commit_permitted` wrote it."""
    token = ctx.ports.entropy.token()
    try:
        server = ctx.ports.ddl.server_identity(session_id=pinning_session(token)).name
    except UnavailableError:
        raise DponeError(COORDINATOR_UNAVAILABLE, f"epoch {record.dispatch_epoch + 1}: no permit taken") from None
    return DdlBinding(
        kind=intent.kind,
        epoch=record.dispatch_epoch + 1,
        correlation_token=token,
        query_digest=ddl_intent_digest(intent.model_dump(mode="json")),
        permitted_at_ms=ctx.now(),
        server=server,
        records_dispatch=True,
    )


def pinning_session(token: str) -> str:
    """The ClickHouse session a permit's identity read opens and its one dispatch requires."""
    return f"dpone-{token}"


def commit_permitted(ctx: Context, held: Held, binding: DdlBinding | None, **changes: Any) -> Held:
    """CAS ``changes`` (which put ``binding`` in its step's slot) at the binding's epoch. The acknowledged,
    read-back-proven CAS is the permit: this invocation holds it in memory, and :func:`run_step` of that step sends
    its one dispatch. A phase change that must be durable before a DDL anyway (the STAGING CAS before the candidate's
    CREATE, a rebuild's new intent after its DROP) thus carries the permit in the same write. ``None``: no permit
    rides on this CAS (a plain commit)."""
    if binding is None:
        return ctx.commit(held, **changes)
    held = ctx.commit(held, dispatch_epoch=binding.epoch, **changes)
    ctx.grant(binding)
    return held


def _dispatch_once(ctx: Context, held: Held, step: DdlStep, binding: DdlBinding) -> Held:
    """The single dispatch of a permit: its record first, then the request, within the deadline of that record.
    An unknown answer or a refusal is resolved by observing the queue entry and the members next, never by
    dispatching again. A record that came too late to send is removed again, and the step stops ``NOT_SENT``."""
    assert binding.correlation_token is not None and binding.query_digest is not None
    assert binding.query_digest == ddl_intent_digest(step.intent.model_dump(mode="json")), (
        "the permit is for this intent"
    )
    recorded = binding.model_copy(update={"dispatching_at_ms": ctx.now()})
    held = ctx.commit(held, **step.bind(held.record, recorded))
    assert recorded.dispatching_at_ms is not None
    if ctx.now() - recorded.dispatching_at_ms > ctx.settings.dispatch_deadline_ms:
        held = ctx.commit(held, **step.bind(held.record, binding))  # the record says again: never sent
        raise DponeError(NOT_SENT, f"{step.what}: epoch {binding.epoch} recorded too late to send")
    settings = DispatchSettings(
        correlation_token=binding.correlation_token,
        query_digest=binding.query_digest,
        session_id=pinning_session(binding.correlation_token),
        log_comment=dispatch_comment(
            ctx.request.mode.log_label, ctx.request.operation_id, binding.epoch, binding.correlation_token
        ),
    )
    with contextlib.suppress(OutcomeUnknownError, MutationRejectedError):
        ctx.ports.ddl.dispatch(ctx.inventory, step.intent, settings)
    return held


def dispatch_comment(log_label: str, operation_id: str, epoch: int, correlation_token: str) -> str:
    """The ``log_comment`` of a permit's dispatch: the mode's label, the operation's first 16 hex digits, the epoch
    and the correlation token (canonical JSON), so an operator reading the queue sees whose entry it is."""
    return canonical_json(
        {
            "dpone": log_label,
            "operation": operation_id[:16],
            "epoch": epoch,
            "token": correlation_token,
        }
    )
