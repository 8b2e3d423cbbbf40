"""Target side of durable quality replay: the shared budget, the bounded observation, the generation guard.

Every read of one observation -- the metadata reads of the guard on every sealed replica, the aggregate read of one
replica, the guard again -- is one call of the :class:`AcceptanceReader` with one monotonic budget
(:data:`TARGET_BUDGET_MS`); the reader interrupts whatever is in flight when it is spent (the real reader kills its
worker process). A spent budget, an unanswered, partial or late answer is ``..._INCOMPLETE``: never success, and never
a durable state change. The reader only reports typed facts; this module judges them.

The generation guard compares **content**, not only UUIDs: every sealed replica must hold the managed generation
under the target name, with the sealed schema, as one healthy replica of one replicated table, and its active parts
must equal the ones convergence verified (``parts_digest``, recorded per replica in the authority). A replica whose
parts changed since (a merge, or any write) is digested again by the reader and must still hold exactly the sealed
content.
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_provider_dpone.cluster.ports import MemberSession, ReadIncompleteError, TableRead
from airflow_provider_dpone.cluster.protocol.authority_io import Held
from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.quality_capsule import AcceptancePlan, QualityCore
from airflow_provider_dpone.cluster.values.quality_read import (
    TARGET_BUDGET_MS,
    Observation,
    ReplicaFacts,
    ReplicaRead,
    TargetCounts,
    TargetReadPlan,
)
from airflow_provider_dpone.cluster.values.receipts import CURRENT_CONTENT_DIGEST, ContentDigestVersion
from airflow_provider_dpone.core.errors import DponeError, UnavailableError
from airflow_provider_dpone.core.errors.replay import INCOMPLETE, MISMATCH, UNSUPPORTED


class Budget:
    """The one monotonic budget of one observation (metadata and aggregate reads together)."""

    def __init__(self, ctx: Context, total_ms: int = TARGET_BUDGET_MS) -> None:
        self._clock = ctx.ports.clock
        self.started_ms = self._clock.monotonic_ms()
        self.total_ms = total_ms

    def elapsed_ms(self) -> int:
        return self._clock.monotonic_ms() - self.started_ms

    def check(self, what: str) -> int:
        """The remaining milliseconds; ``..._INCOMPLETE`` when none is left."""
        remaining = self.total_ms - self.elapsed_ms()
        if remaining <= 0:
            raise DponeError(INCOMPLETE, f"{what}: the {self.total_ms} ms observation budget is spent")
        return remaining


def read_plan(
    ctx: Context,
    table: str,
    generation_uuid: str,
    *,
    digest_version: ContentDigestVersion,
    guard: tuple[ReplicaRead, ...] = (),
    scan: tuple[str, AcceptancePlan] | None = None,
) -> TargetReadPlan:
    """The typed request of one observation of ``table`` (never SQL): ``scan`` is the replica counted and the sealed
    plan whose metrics and selected columns it counts; every digest uses ``digest_version``."""
    return TargetReadPlan(
        digest_version=digest_version,
        schema_columns=() if scan is None else scan[1].columns,
        database=ctx.request.database,
        table=table,
        generation_uuid=generation_uuid,
        guard=guard,
        scan=None if scan is None else scan[0],
        metrics=() if scan is None else scan[1].metrics,
        columns=() if scan is None else scan[1].selected,
    )


def digest_version(record: AuthorityRecord) -> ContentDigestVersion:
    """The digest version the record's artifact receipt names: the source digest's, so digests compare."""
    return CURRENT_CONTENT_DIGEST if record.artifact is None else record.artifact.content_digest_version


def replica_facts(session: MemberSession, plan: TargetReadPlan, read: ReplicaRead) -> ReplicaFacts:
    """One guarded replica's facts as every reader takes them (the real worker and the fake alike): metadata and
    active parts, the content digest (in the plan's version) only where the parts differ from the verified ones, and
    the replica's health."""
    observed = session.observe_table(TableRead(plan.database, plan.table, with_content=False, with_parts=True))
    if observed.exists and observed.uuid == plan.generation_uuid and observed.parts_digest != read.verified_parts:
        content = TableRead(plan.database, plan.table, with_content=True, digest_version=plan.digest_version)
        observed = session.observe_table(content)
    status = session.replica_status(plan.database, plan.table) if observed.exists else None
    return ReplicaFacts(
        member_id=read.member_id,
        exists=observed.exists,
        uuid=observed.uuid,
        columns=observed.columns,
        parts_digest=observed.parts_digest,
        content_digest=observed.content_digest,
        zookeeper_path=None if status is None else status.zookeeper_path,
        readonly=None if status is None else status.is_readonly,
    )


def guarded(record: AuthorityRecord, replicas: tuple[str, ...]) -> tuple[ReplicaRead, ...]:
    """Every sealed replica with the parts digest convergence recorded for it."""
    verified = {member.member_id: member.parts_digest for member in record.members}
    return tuple(ReplicaRead(member_id=mid, verified_parts=verified.get(mid)) for mid in replicas)


def sealed(core: QualityCore, record: AuthorityRecord) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The schema and the replicas the core sealed: its target plan's (v2), else the bound artifact's schema and the
    staged replicas (v1, source/staged-only evidence), whose schema digest the core recorded."""
    plan = core.target_plan
    if plan is not None:
        return plan.columns, plan.replicas
    artifact = record.artifact
    if artifact is None or artifact.schema_digest != core.source_digests[2]:
        raise DponeError(MISMATCH, "the record's artifact is not the one the capsule core sealed")
    return artifact.schema_pairs, tuple(sorted(member_id for member_id, _ in core.staged_rows))


def observe_read(ctx: Context, plan: TargetReadPlan, budget: Budget) -> Observation:
    """One bounded observation, interrupted when the budget is spent; exact answers only."""
    reader = ctx.ports.acceptance
    if reader is None:
        raise DponeError(UNSUPPORTED, "no bounded acceptance reader is configured for target observations")
    for member_id in plan.member_ids:
        if member_id not in ctx.inventory.member_ids:
            raise DponeError(MISMATCH, f"sealed replica {ctx.label(member_id)} is not in the live inventory")
    members = tuple(ctx.inventory.member(member_id) for member_id in plan.member_ids)
    remaining = budget.check("observation")
    try:
        observation = reader.observe(members, plan, budget_ms=remaining)
    except (UnavailableError, ReadIncompleteError) as error:
        raise DponeError(INCOMPLETE, f"the bounded observation did not answer ({error})") from None
    budget.check("answer of the observation")  # a late answer is not an answer
    if not observation.answers(plan):
        raise DponeError(INCOMPLETE, "partial answer (replicas, columns or metrics missing)")
    return observation


def counts_of(ctx: Context, plan: TargetReadPlan, budget: Budget) -> TargetCounts:
    """The counts of a scan plan, on the exact generation."""
    counts = observe_read(ctx, plan, budget).counts
    assert counts is not None and plan.scan is not None  # answers() of a scan plan
    if counts.generation_uuid != plan.generation_uuid:
        raise DponeError(MISMATCH, f"replica {ctx.label(plan.scan)} does not hold the managed generation")
    return counts


def judge(
    ctx: Context,
    core: QualityCore,
    reads: tuple[ReplicaRead, ...],
    facts: tuple[ReplicaFacts, ...],
    columns: tuple[tuple[str, str], ...],
) -> None:
    """The guard's verdict on every sealed replica's facts against the sealed ``columns`` (module docstring)."""
    for read, fact in zip(reads, facts, strict=True):
        member_id = fact.member_id
        if not fact.exists or fact.uuid != core.generation_uuid:
            raise DponeError(MISMATCH, f"replica {ctx.label(member_id)} does not hold the managed generation")
        if fact.parts_digest is None or (fact.parts_digest != read.verified_parts and fact.content_digest is None):
            raise DponeError(
                INCOMPLETE, f"replica {ctx.label(member_id)}: parts changed but no content digest was answered"
            )
        if fact.columns != columns:
            raise DponeError(MISMATCH, f"replica {ctx.label(member_id)}: schema differs from the sealed schema")
        if fact.content_digest is not None and fact.content_digest != core.source_digests[1]:
            raise DponeError(MISMATCH, f"replica {ctx.label(member_id)}: content differs from the managed generation")
        if fact.zookeeper_path is None or fact.readonly is not False:
            raise DponeError(INCOMPLETE, f"replica {ctx.label(member_id)} is not a healthy writable replica")
    if len({fact.zookeeper_path for fact in facts}) != 1:
        raise DponeError(MISMATCH, "the replicas are not one replicated table")


def guard(ctx: Context, record: AuthorityRecord, core: QualityCore) -> None:
    """The generation guard alone (no count). A v2 core: one bounded observation of the reader. A v1 core
    (source/staged-only evidence, no reader): the same facts read through each sealed replica's own session, under
    the same budget (a late answer is no answer)."""
    columns, replicas = sealed(core, record)
    version = digest_version(record)
    reads = guarded(record, replicas)
    request = read_plan(ctx, ctx.request.target, core.generation_uuid, digest_version=version, guard=reads)
    if core.target_plan is not None:
        judge(ctx, core, reads, observe_read(ctx, request, Budget(ctx)).before, columns)
        return
    budget = Budget(ctx)
    for member_id in replicas:
        if member_id not in ctx.inventory.member_ids:
            raise DponeError(MISMATCH, f"sealed replica {ctx.label(member_id)} is not in the live inventory")
    try:
        facts = tuple(replica_facts(ctx.session(read.member_id), request, read) for read in reads)
    except UnavailableError as error:
        raise DponeError(INCOMPLETE, f"the generation guard did not answer ({error})") from None
    budget.check("answer of the generation guard")
    judge(ctx, core, reads, facts, columns)


def store_write(write: Callable[[], Held]) -> Held:
    """An authority write of the quality evidence (a capsule completion, the reader fence): a refused, conflicting or
    unacknowledged write is store access that failed, ``..._INCOMPLETE``; the retry re-reads the retained
    state and resumes."""
    try:
        return write()
    except DponeError as error:
        if error.code.startswith("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_"):
            raise DponeError(INCOMPLETE, f"quality evidence write: {error.code} ({error.detail})") from None
        raise
