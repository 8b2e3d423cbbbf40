"""Operator abort before publication: fence (CAS ABORTING), drop exactly the owned candidates, then CAS ABORTED.

Only LOCKED, STAGING and STAGED may be aborted: once a publication permit exists, the DDL may have reached a member.
The fence comes first: a publish (or stage) try that read the same version takes its permit by a CAS at that version,
so exactly one of the two writes wins. If the abort's wins, no permit can be taken any more (ABORTING refuses every
entry point but abort) and the drops cannot pull a candidate from under an EXCHANGE; if the publish's wins, the
abort's fence fails and its retry is refused ``ABORT_AFTER_PUBLICATION`` before it touches anything. A LOCKED record
binds no candidate and no permit can be taken from it: its abort is the single ABORTED write. An abort that stopped
after its fence resumes from ABORTING (each drop is observed first; the staging-DDL check was passed before the
fence, which no new permit can follow).
A table under the candidate name with a UUID the operation never intended is foreign and is left alone (the abort
stops). ABORTED is terminal, never success, and lets a new operation take the target slot.

External mode: a stage try already past its intent write sends its member-local ``CREATE ... UUID`` with no further
write the fence could beat, so the candidate can land after the drops. That CREATE is sent only within the dispatch
deadline of its intent's stamp (:mod:`staging`), so it reaches the member by that stamp plus the deadline, the send
timeout and the skew margin: until then the abort stays ABORTING after its drops and stops with the retryable
``ABORT_CREATE_IN_FLIGHT``; its retry drops what landed and writes ABORTED.

Both modes drop member by member, each by its exact UUID (``DROP TABLE ... SYNC`` on that member only): in internal
mode that removes each replica of the owned replicated candidate, and the last one removes its Keeper path. In
internal mode the candidate's own ON CLUSTER create or rebuild drop may still be queued on a replica; a drop before
it runs there would leave that replica's CREATE to run after ABORTED, so the abort waits (retryable) until the bound
entry finished on every host. A permit with no entry at all may still be held by a stalled coordinator: the abort
waits until it is queued, or voided with recorded proof (:mod:`void_permit`), which empties the binding.
"""

from __future__ import annotations

from airflow_provider_dpone.cluster.ports import HostDdlState
from airflow_provider_dpone.cluster.protocol.authority_io import Held
from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.protocol.member_mutation import mutate_once
from airflow_provider_dpone.cluster.protocol.mode import ModeBehaviour
from airflow_provider_dpone.cluster.protocol.observe import observe_candidate
from airflow_provider_dpone.cluster.protocol.reconcile import read_entry
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.generation import ErrorClassification
from airflow_provider_dpone.cluster.values.authority.phases import PRE_PUBLICATION_PHASES, Phase
from airflow_provider_dpone.core.errors import DponeError

ABORT_CODE = "DPONE_CLICKHOUSE_CLUSTER_OPERATION_ABORTED"
CREATE_IN_FLIGHT = "DPONE_CLICKHOUSE_CLUSTER_ABORT_CREATE_IN_FLIGHT"


def abort_before_publication(ctx: Context, held: Held, mode: ModeBehaviour) -> Held:
    record = held.record
    if record.phase not in PRE_PUBLICATION_PHASES and record.phase is not Phase.ABORTING:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_ABORT_AFTER_PUBLICATION", f"phase {record.phase}")
    if record.phase is not Phase.ABORTING:
        _require_no_queued_candidate_ddl(ctx, record, mode)
        classification = ErrorClassification(code=ABORT_CODE, phase=record.phase, at_ms=ctx.now())
        if record.phase is Phase.LOCKED:
            return ctx.commit(held, phase=Phase.ABORTED, last_error=classification)
        held = ctx.commit(held, phase=Phase.ABORTING, last_error=classification)
        record = held.record
    for member_id in record.member_ids():
        obs = observe_candidate(ctx, member_id)
        if not obs.exists:
            continue
        if obs.uuid not in mode.owned_uuids(record, member_id) or obs.uuid is None:
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_FOREIGN", f"member {ctx.label(member_id)}")
        _drop_exact(ctx, member_id, record.candidate_name, obs.uuid)
        if observe_candidate(ctx, member_id).exists:
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_MEMBER_OUTCOME_UNKNOWN", f"member {ctx.label(member_id)}: drop")
    _require_no_create_in_flight(ctx, record, mode)
    return ctx.commit(held, phase=Phase.ABORTED)


def _require_no_create_in_flight(ctx: Context, record: AuthorityRecord, mode: ModeBehaviour) -> None:
    """External mode: a stage try past its last intent write sends its CREATE with no write the fence could beat,
    within the dispatch deadline of the intent's stamp; it reaches the member at the latest a send timeout (and the
    skew between the workers' clocks) later. Until then a candidate may still appear after the drops above."""
    since = mode.creates_from(record)
    if since is None:
        return
    settings = ctx.settings
    until = since + settings.dispatch_deadline_ms + settings.send_timeout_ms + settings.void_skew_margin_ms
    if ctx.now() <= until:
        raise DponeError(
            CREATE_IN_FLIGHT, f"a candidate CREATE may still reach a member for {until - ctx.now() + 1} ms"
        )


def _drop_exact(ctx: Context, member_id: str, name: str, uuid: str) -> None:
    session = ctx.session(member_id)
    mutate_once(ctx.label(member_id), "drop", lambda: session.drop_table(ctx.request.database, name, uuid))


def _require_no_queued_candidate_ddl(ctx: Context, record: AuthorityRecord, mode: ModeBehaviour) -> None:
    """No bound staging DDL (internal mode: the candidate's create while INTENDED, or its rebuild drop) may still run
    on a host."""
    step = mode.staging_step(ctx, record)
    pending = None if step is None else step.slot(record)
    if pending is None:
        return
    if pending.unsent:  # never sent, and the abort's fence write makes its holder's dispatch record fail
        return
    entry = read_entry(ctx, pending)
    if entry is None:  # a stalled coordinator may still queue it: only a void with proof releases the permit
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING", f"abort waits for the {pending.kind} entry, or its void"
        )
    if any(host.state in (HostDdlState.INACTIVE, HostDdlState.ACTIVE) for host in entry.hosts):
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING", f"abort waits for the {pending.kind} entry")
