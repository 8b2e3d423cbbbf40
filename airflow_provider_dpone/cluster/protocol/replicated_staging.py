"""STAGING -> STAGED, internal mode: one replicated candidate, created once, loaded once, converged.

Each attempt resumes from the shared candidate's state in the authority record:

* INTENDED -> one fenced ``CREATE TABLE ... UUID <intent> ON CLUSTER`` (:mod:`ddl_step`). Each replica is BEFORE
  while the name is free, AFTER once it holds exactly the intended UUID; anything else is foreign (fail closed, touch
  nothing). Its permit rides on the CAS that writes the intent whenever the name was just observed free on every
  replica (the STAGING CAS, :mod:`seal`; a rebuild's drop completion), and this attempt dispatches it next. The completion CAS binds the candidate on every replica *and* the one load (replica = lowest member id,
  deterministic ``query_id`` and ``insert_deduplication_token``); only then, in the same attempt, the load is sent
  once through that replica.
* CREATED -> bounded convergence: every replica must be one replica of one table (``system.replicas``: present, the
  same Keeper path, distinct replica names, as many replicas as members), writable, and caught up
  (``SYSTEM SYNC REPLICA`` with a timeout). A replica that does not catch up within the bound stops the attempt with
  the retryable ``REPLICA_NOT_CONVERGED`` and nothing mutated; a retry waits again. Then the content digest of every
  replica must equal the artifact's (counts are never summed across replicas): CAS READY and STAGED in one write,
  which also binds the durable quality-replay capsule when the request selects it (:mod:`quality_evidence`; a failed
  required gate binds it FAILED and stops with ``..._FAILED``). The replicas are read concurrently (each one's wait
  followed at once by its digest), and judged in member order once all have answered.
* A replica with the sealed schema and fewer rows (empty after an ambiguous or unsent load, partial) -> rebuild (at
  most ``MAX_REBUILDS`` times); duplicated rows, the artifact's row count with other content, or another schema stop
  the operation (``CANDIDATE_DIVERGENT``, every object retained). The rebuild: prove every replica holds exactly the owned UUID, one fenced ``DROP TABLE ... ON CLUSTER``, then a new
  intent with the new CREATE's permit (one CAS, the drop's completion), that CREATE, and the same immutable artifact
  is loaded into the new table.

Why rebuild instead of sending an ambiguous load again: replicated deduplication would make a resend harmless only
within a finite window (``replicated_deduplication_window``) and only if the resend splits into exactly the same
blocks, which depends on client and server settings the protocol does not control. A rebuild depends on nothing: the
old candidate (with whatever a lost or still-running insert put there) is gone, the new one holds exactly one load.
The token stays as defense in depth only.
"""

from __future__ import annotations

from airflow_provider_dpone.cluster.ports import CreateReplicatedTable, DropTable, ReplicaStatus, TableObservation
from airflow_provider_dpone.cluster.protocol.authority_io import Held
from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.protocol.ddl_step import DdlStep, commit_permitted, new_permit, run_step
from airflow_provider_dpone.cluster.protocol.member_mutation import load_identity, load_once
from airflow_provider_dpone.cluster.protocol.observe import diverged, is_exact, observe_candidate, unexplained
from airflow_provider_dpone.cluster.protocol.quality_evidence import FAILED as QUALITY_FAILED
from airflow_provider_dpone.cluster.protocol.quality_evidence import build_capsule
from airflow_provider_dpone.cluster.protocol.reconcile import Side, observe_pair
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.generation import MAX_REBUILDS, DdlBinding
from airflow_provider_dpone.cluster.values.authority.internal import LoadBinding, ReplicatedCandidate, as_internal
from airflow_provider_dpone.cluster.values.authority.phases import MemberStage, Phase
from airflow_provider_dpone.cluster.values.receipts import ArtifactReceipt
from airflow_provider_dpone.core.errors import AccessDeniedError, DponeError, UnavailableError

CANDIDATE_FOREIGN = "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_FOREIGN"
STAGING_DDL_PENDING = "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING"
NOT_CONVERGED = "DPONE_CLICKHOUSE_CLUSTER_REPLICA_NOT_CONVERGED"
REPLICA_SET = "DPONE_CLICKHOUSE_CLUSTER_REPLICA_SET_INVALID"


def stage_replicated(ctx: Context, held: Held) -> Held:
    """Drive the shared candidate to READY and CAS STAGED, or stop with a stable code (a retry resumes)."""
    for _ in range(ctx.settings.max_member_steps):
        candidate = _candidate(held.record)
        if candidate.stage is not MemberStage.INTENDED:
            if candidate.drop is None:
                converged = _converge(ctx, held)
                if converged is not None:
                    return converged
                if candidate.rebuilds >= MAX_REBUILDS:
                    raise ctx.fail_closed(
                        held, "DPONE_CLICKHOUSE_CLUSTER_STAGING_REBUILD_LIMIT", "replicated candidate"
                    )
            held = _drop(ctx, held)  # completes with a fresh intent and its create permit, dispatched right below
        held = _create(ctx, held)  # never leaves a permit of this attempt undispatched at the end of a step
    raise DponeError("DPONE_CLICKHOUSE_CLUSTER_MEMBER_OUTCOME_UNKNOWN", "replicated candidate did not settle")


def _candidate(record: AuthorityRecord) -> ReplicatedCandidate:
    candidate = as_internal(record).candidate  # the internal mode's staging, so an internal record
    if candidate is None:  # excluded by the record invariants in STAGING
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_RECORD_INVALID", "STAGING without a replicated candidate")
    return candidate


def _artifact(record: AuthorityRecord) -> ArtifactReceipt:
    if record.artifact is None:  # excluded by the record invariants in STAGING
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_RECORD_INVALID", "STAGING without an artifact")
    return record.artifact


# --- CREATE ON CLUSTER, then the one load ------------------------------------------------------------------------


def _create(ctx: Context, held: Held) -> Held:
    held = _complete(ctx, held, create_step(ctx, held.record))
    load = _candidate(held.record).load
    assert load is not None
    load_once(ctx, load.member_id, load.candidate_uuid, _artifact(held.record))
    return held


def create_step(ctx: Context, record: AuthorityRecord) -> DdlStep:
    return DdlStep(
        what="candidate create",
        intent=_create_intent(ctx, _candidate(record).uuid_intent, _artifact(record)),
        phase=Phase.STAGING,
        dispatched_from=Phase.STAGING,
        slot=lambda record: _candidate(record).create,
        bind=lambda record, binding: {"candidate": _candidate(record).model_copy(update={"create": binding})},
        classify=_create_side,
        foreign_code=CANDIDATE_FOREIGN,
        finish=_bind_created,
    )


def _create_intent(ctx: Context, uuid: str, artifact: ArtifactReceipt) -> CreateReplicatedTable:
    """The candidate's ON CLUSTER CREATE: the declared table with the artifact's typed columns."""
    return CreateReplicatedTable(
        cluster=ctx.request.cluster,
        database=ctx.request.database,
        table=ctx.request.candidate_name,
        uuid=uuid,
        spec=ctx.request.candidate_table(artifact.schema_pairs),
    )


def intend(
    ctx: Context,
    record: AuthorityRecord,
    artifact: ArtifactReceipt,
    *,
    names_free: bool,
    previous: ReplicatedCandidate | None = None,
) -> tuple[ReplicatedCandidate, DdlBinding | None]:
    """A fresh candidate UUID intent (of a candidate with ``artifact``'s columns) (after ``previous``: its owned UUIDs kept, rebuilds + 1) for the caller's CAS.

    With ``names_free`` (the caller observed the candidate name free on every replica: the create step's barrier),
    the permit of its ON CLUSTER CREATE rides on the same CAS (:func:`ddl_step.commit_permitted`): the intent must be
    durable before the CREATE anyway, and a permit alone in its own CAS would follow it at once. The states a crash
    can leave are those of the two writes apart, minus the one between them: without the CAS nothing is intended
    (the same attempt starts over); with it, the permit is bound and its dispatch unproven until observed, exactly
    as after a separate permit CAS (``DISPATCH_UNPROVEN`` after the quiet period, released only by the void)."""
    uuid = ctx.ports.entropy.uuid()
    owned = (uuid,) if previous is None else (*previous.owned_uuids, uuid)
    rebuilds = 0 if previous is None else previous.rebuilds + 1
    candidate = ReplicatedCandidate(stage=MemberStage.INTENDED, uuid_intent=uuid, owned_uuids=owned, rebuilds=rebuilds)
    if not names_free:
        return candidate, None
    binding = new_permit(ctx, record, _create_intent(ctx, uuid, artifact))
    return candidate.model_copy(update={"create": binding}), binding


def bound_staging_step(ctx: Context, record: AuthorityRecord) -> DdlStep | None:
    """The staging DDL step whose permit is bound and not yet reconciled (a rebuild drop, or a create still
    INTENDED), or ``None`` (also before any candidate is intended): what an abort waits for, and what an explicit void
    of a staging permit applies to."""
    candidate = as_internal(record).candidate
    if candidate is None:
        return None
    if candidate.drop is not None:
        return drop_step(ctx)
    if candidate.stage is MemberStage.INTENDED and candidate.create is not None:
        return create_step(ctx, record)
    return None


def _complete(ctx: Context, held: Held, step: DdlStep) -> Held:
    """Run the staging DDL step to completion, or stop retryably while some replica has not run it yet."""
    progress = run_step(ctx, held, step, allow_dispatch=True)
    if not progress.complete:
        raise DponeError(STAGING_DDL_PENDING, f"{step.what}: {len(progress.reconciliation.pending)} replicas pending")
    return progress.held


def _holds_intent(ctx: Context, record: AuthorityRecord, member_id: str) -> bool | None:
    """True: the candidate name holds exactly the intended UUID; False: nothing; None: something foreign.

    Only the name's UUID decides, so only the UUID is read (one request, no schema or count)."""
    _target, held_uuid = observe_pair(ctx, member_id)
    if held_uuid is None:
        return False
    return True if held_uuid == _candidate(record).uuid_intent else None


def _create_side(ctx: Context, record: AuthorityRecord, member_id: str) -> Side | None:
    holds = _holds_intent(ctx, record, member_id)
    return None if holds is None else (Side.AFTER if holds else Side.BEFORE)


def _drop_side(ctx: Context, record: AuthorityRecord, member_id: str) -> Side | None:
    holds = _holds_intent(ctx, record, member_id)
    return None if holds is None else (Side.BEFORE if holds else Side.AFTER)


def _bind_created(ctx: Context, held: Held, binding: DdlBinding) -> Held:
    """CREATED on every replica, and the one load bound before it is sent (lowest member id)."""
    record = held.record
    candidate = _candidate(record)
    loader = record.member_ids()[0]
    query_id, token = load_identity(record.operation_id, loader, candidate.uuid_intent, _artifact(record))
    load = LoadBinding(member_id=loader, candidate_uuid=candidate.uuid_intent, query_id=query_id, dedup_token=token)
    created = candidate.model_copy(update={"stage": MemberStage.CREATED, "create": binding, "load": load})
    members = tuple(member.model_copy(update={"candidate_uuid": candidate.uuid_intent}) for member in record.members)
    return ctx.commit(held, phase=Phase.STAGING, candidate=created, members=members)


# --- convergence -------------------------------------------------------------------------------------------------


def _converge(ctx: Context, held: Held) -> Held | None:
    """READY + STAGED when every replica caught up to exactly the artifact; ``None`` when the candidate must be
    rebuilt. Stops (retryable, nothing mutated) while a replica is still behind."""
    record = held.record
    statuses = ctx.each_member(lambda mid: _replica_status(ctx, mid), record.member_ids())
    present = {mid: status for mid, status in statuses.items() if status is not None}
    if len(present) != len(statuses):
        missing = sorted(set(statuses) - set(present))
        raise ctx.fail_closed(held, REPLICA_SET, f"no replica of the candidate on members {ctx.labels(missing)}")
    paths = {status.zookeeper_path for status in present.values()}
    names = {status.replica_name for status in present.values()}
    totals = {status.total_replicas for status in present.values()}
    if len(paths) != 1 or len(names) != len(present) or totals != {len(present)}:
        raise ctx.fail_closed(held, REPLICA_SET, f"{len(paths)} paths, {len(names)} names, totals {sorted(totals)}")
    readonly = sorted(mid for mid, status in present.items() if status.is_readonly)
    if readonly:
        raise DponeError(NOT_CONVERGED, f"read-only replicas {ctx.labels(readonly)}")
    timeout = ctx.settings.replica_sync_timeout_seconds
    artifact = _artifact(record)
    caught_up = ctx.each_member(lambda mid: _caught_up_content(ctx, mid, artifact, timeout), record.member_ids())
    contents = {}
    for member_id, observed in caught_up.items():
        if observed is None:
            raise DponeError(NOT_CONVERGED, f"member {ctx.label(member_id)} not caught up within {timeout:g} s")
        contents[member_id] = observed
    verified = []
    for member in record.members:
        observed = contents[member.member_id]
        if observed.uuid != member.candidate_uuid:
            raise ctx.fail_closed(held, CANDIDATE_FOREIGN, f"member {ctx.label(member.member_id)}")
        if not is_exact(observed, member, artifact):
            reason = unexplained(observed, artifact)
            if reason is not None:
                raise diverged(ctx, held, member.member_id, reason)
            return None  # incomplete after the ambiguous load: rebuilt
        verified.append(
            member.model_copy(
                update={
                    "row_count": observed.row_count,
                    "content_digest": observed.content_digest,
                    "parts_digest": observed.parts_digest,  # the barrier digests again only if parts changed
                    "part_digests": observed.part_digests,  # and then only the parts not listed here
                }
            )
        )
    candidate = _candidate(record)
    ready = candidate.model_copy(update={"stage": MemberStage.READY})
    assert candidate.load is not None  # CREATED binds the load
    quality = build_capsule(ctx, record, verified, candidate.uuid_intent, candidate.load.query_id)
    capsule = {} if quality is None else {"quality": quality}
    held = ctx.commit(held, phase=Phase.STAGED, candidate=ready, members=tuple(verified), **capsule)
    if quality is not None and quality.state == "FAILED":
        raise DponeError(QUALITY_FAILED, f"required gates failed: {quality.failure}")
    return held


def _replica_status(ctx: Context, member_id: str) -> ReplicaStatus | None:
    try:
        return ctx.session(member_id).replica_status(ctx.request.database, ctx.request.candidate_name)
    except UnavailableError:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE", f"member {ctx.label(member_id)} did not answer"
        ) from None


def _caught_up_content(
    ctx: Context, member_id: str, artifact: ArtifactReceipt, timeout: float
) -> TableObservation | None:
    """One replica's wait and then, at once, its content (``None``: not caught up within the bound). Each replica
    runs this on its own, so the replica that took the load is digested while the others still fetch its parts."""
    if not _sync(ctx, member_id, timeout):
        return None
    return observe_candidate(ctx, member_id, artifact=artifact, with_content=True, with_parts=True)


def _sync(ctx: Context, member_id: str, timeout: float) -> bool:
    try:
        return ctx.session(member_id).sync_replica(
            ctx.request.database, ctx.request.candidate_name, timeout_seconds=timeout
        )
    except AccessDeniedError:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_MEMBER_ACCESS_DENIED", f"member {ctx.label(member_id)}: SYSTEM SYNC REPLICA"
        ) from None
    except UnavailableError:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE", f"member {ctx.label(member_id)} did not answer"
        ) from None


# --- rebuild: DROP ON CLUSTER of exactly the owned candidate, then a new intent ----------------------------------


def _drop(ctx: Context, held: Held) -> Held:
    return _complete(ctx, held, drop_step(ctx))


def drop_step(ctx: Context) -> DdlStep:
    return DdlStep(
        what="candidate drop",
        intent=DropTable(cluster=ctx.request.cluster, database=ctx.request.database, table=ctx.request.candidate_name),
        phase=Phase.STAGING,
        dispatched_from=Phase.STAGING,
        slot=lambda record: _candidate(record).drop,
        bind=lambda record, binding: {"candidate": _candidate(record).model_copy(update={"drop": binding})},
        classify=_drop_side,
        foreign_code=CANDIDATE_FOREIGN,
        finish=_intend_again,
    )


def _intend_again(ctx: Context, held: Held, binding: DdlBinding) -> Held:
    """The old candidate is gone from every replica: persist a fresh intent (rebuilds + 1) before any new CREATE,
    with the new CREATE's permit (the drop's reconciliation just observed the name free on every replica)."""
    del binding  # the drop's entry needs no record: the next intent replaces the whole candidate state
    record = held.record
    fresh, permit = intend(ctx, record, _artifact(record), names_free=True, previous=_candidate(record))
    members = tuple(member.model_copy(update={"candidate_uuid": None}) for member in record.members)
    return commit_permitted(ctx, held, permit, phase=Phase.STAGING, candidate=fresh, members=members)
