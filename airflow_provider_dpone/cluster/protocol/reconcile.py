"""Reconciliation of one bound ON CLUSTER DDL against its queue entry and every member.

Each member is classified from physical UUIDs only: BEFORE (untouched), AFTER (the intended effect), or foreign (any
other UUID, which fails closed at once). The verdict then combines the sides with the *one* queue entry carrying the
bound correlation token:

* every member AFTER, entry present, no host failure       -> complete;
* some BEFORE whose host is still queued or active          -> in progress (an active partial is not a failure);
* a BEFORE member whose host finished (or failed), an AFTER member whose host failed -> terminal mixed, fail closed;
* no entry: every member BEFORE -> before the quiet period the state is in progress; after it the verdict is VOID
  (no evidence the DDL ever left: the caller fails closed, it never dispatches again). Any AFTER member without an
  entry -> evidence missing.

Nothing here mutates; the caller (:mod:`~airflow_provider_dpone.cluster.protocol.ddl_step`) CASes the outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from airflow_provider_dpone.cluster.ports import HostDdlState, QueueEntry
from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.values.authority.generation import DdlBinding
from airflow_provider_dpone.core.errors import DponeError, UnavailableError


class Side(StrEnum):
    BEFORE = "before"
    AFTER = "after"


class Verdict(StrEnum):
    COMPLETE = "complete"
    IN_PROGRESS = "in_progress"
    VOID = "void"


@dataclass(frozen=True)
class Reconciliation:
    verdict: Verdict
    entry: str | None
    pending: tuple[str, ...]


def read_entry(ctx: Context, binding: DdlBinding) -> QueueEntry | None:
    token = binding.correlation_token
    assert token is not None
    try:
        entry = ctx.ports.ddl.queue_status(ctx.inventory, token)
    except UnavailableError:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_DDL_QUEUE_UNAVAILABLE", f"epoch {binding.epoch}") from None
    if entry is not None and entry.correlation_token != token:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_EVIDENCE_MISSING", "queue entry token differs")
    return entry


def classify_side(
    target: str | None,
    candidate: str | None,
    *,
    before: tuple[str | None, str | None],
    after: tuple[str | None, str | None],
) -> Side | None:
    """BEFORE, AFTER or ``None`` (foreign) for one member's observed (target UUID, candidate UUID) pair."""
    pair = (target, candidate)
    if pair == before:
        return Side.BEFORE
    if pair == after:
        return Side.AFTER
    return None


def classify_observed(
    ctx: Context,
    member_id: str,
    *,
    before: tuple[str | None, str | None],
    after: tuple[str | None, str | None],
) -> Side | None:
    """:func:`classify_side` of the (target UUID, candidate UUID) pair observed on ``member_id`` in one snapshot (two
    separate reads could straddle the DDL and show a pair no moment had, which would read as foreign)."""
    return classify_side(*observe_pair(ctx, member_id), before=before, after=after)


def observe_pair(ctx: Context, member_id: str) -> tuple[str | None, str | None]:
    """The (target UUID, candidate-name UUID) pair of ``member_id``, read in one snapshot."""
    request = ctx.request
    try:
        target, candidate = ctx.session(member_id).table_uuids(
            request.database, (request.target, request.candidate_name)
        )
    except UnavailableError:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE", f"member {ctx.label(member_id)} did not answer"
        ) from None
    return target, candidate


def decide(
    *,
    what: str,
    binding: DdlBinding,
    entry: QueueEntry | None,
    sides: Mapping[str, Side],
    members: Sequence[str],
    label: Callable[[str], str],
    now_ms: int,
    quiet_ms: int,
) -> Reconciliation:
    before = tuple(member for member in members if sides[member] is Side.BEFORE)
    if entry is None:
        if len(before) != len(members):
            raise DponeError(
                "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_EVIDENCE_MISSING",
                f"{what}: no queue entry for epoch {binding.epoch} but {len(members) - len(before)} members changed",
            )
        if now_ms - binding.sent_from_ms >= quiet_ms:
            return Reconciliation(Verdict.VOID, None, before)
        return Reconciliation(Verdict.IN_PROGRESS, None, before)
    hosts = {host.member_id: host for host in entry.hosts}
    if sorted(hosts) != sorted(members) or len(entry.hosts) != len(members):
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_EVIDENCE_MISSING",
            f"{what}: queue entry lists {len(entry.hosts)} hosts for {len(members)} members",
        )
    for member in members:
        host = hosts[member]
        if sides[member] is Side.BEFORE:
            if host.state is HostDdlState.FINISHED:
                raise DponeError(
                    "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_MIXED", f"{what}: member {label(member)} unchanged"
                )
            if host.state in (HostDdlState.REMOVING, HostDdlState.UNKNOWN):
                raise DponeError(
                    "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_EVIDENCE_MISSING",
                    f"{what}: member {label(member)} {host.state}",
                )
        elif host.failed:
            raise DponeError(
                "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_MIXED", f"{what}: member {label(member)} reports failure"
            )
    verdict = Verdict.IN_PROGRESS if before else Verdict.COMPLETE
    return Reconciliation(verdict, entry.entry, before)
