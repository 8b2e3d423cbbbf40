"""Fenced, one-shot ON CLUSTER dispatch: permit by CAS, then exactly one dispatch per permit (seed 000 §5.2-5.3).

A permit is the acknowledged, read-back-proven CAS that increments the dispatch epoch and binds a fresh random
correlation token and the intent's normalized digest. Only the process holding that in-memory permit dispatches, and it
dispatches once: an unknown outcome is never followed by a second dispatch of the same permit. A later permit (new
epoch, new token) can exist only after reconciliation proved the previous token void (no queue entry, no member
effect, quiet period elapsed); the void token is kept in ``abandoned``.
"""

from __future__ import annotations

from typing import Literal

from airflow_provider_dpone.contracts.authority_external import DdlBinding
from airflow_provider_dpone.contracts.authority_phases import Phase
from airflow_provider_dpone.contracts.canonical import canonical_json
from airflow_provider_dpone.contracts.identities import ddl_intent_digest
from airflow_provider_dpone.ports.publication import (
    DdlIntent,
    DispatchOutcome,
    DispatchSettings,
    MutationRejectedError,
    OutcomeUnknownError,
)
from airflow_provider_dpone.protocol.authority_io import Held
from airflow_provider_dpone.protocol.context import Context


def permit(
    ctx: Context,
    held: Held,
    intent: DdlIntent,
    *,
    phase: Phase,
    slot: Literal["publication", "cleanup"],
    abandoned: tuple[str, ...] = (),
) -> Held:
    """CAS ``phase`` with a new epoch and a binding for ``intent``; returns the held record (the permit)."""
    epoch = held.record.dispatch_epoch + 1
    binding = DdlBinding(
        kind=intent.kind,
        epoch=epoch,
        correlation_token=ctx.ports.entropy.token(),
        query_digest=ddl_intent_digest(intent.model_dump(mode="json")),
        permitted_at_ms=ctx.now(),
        abandoned=abandoned,
    )
    return ctx.commit(held, phase=phase, dispatch_epoch=epoch, **{slot: binding})


def dispatch_once(ctx: Context, binding: DdlBinding, intent: DdlIntent) -> DispatchOutcome | None:
    """The single dispatch of a permit. ``None`` when the initiator's answer is unknown or a refusal: either way the
    queue entry and the members are observed next, never the dispatch repeated."""
    assert binding.correlation_token is not None and binding.query_digest is not None
    settings = DispatchSettings(
        correlation_token=binding.correlation_token,
        query_digest=binding.query_digest,
        log_comment=canonical_json(
            {
                "dpone": "cluster-external-full-refresh",
                "operation": ctx.request.operation_id[:16],
                "epoch": binding.epoch,
                "token": binding.correlation_token,
            }
        ),
    )
    try:
        return ctx.ports.ddl.dispatch(ctx.inventory, intent, settings)
    except (OutcomeUnknownError, MutationRejectedError):
        return None
