"""Target side of durable quality replay (seed 002): the shared budget, the bounded read, the generation guard.

One :class:`Budget` (monotonic, :data:`TARGET_BUDGET_MS`) covers every metadata and aggregate read of one
observation; the aggregate read itself is handed the remaining budget by the :class:`AcceptanceReader`, which
interrupts it in flight (the real reader kills its worker process). A spent budget, an unanswered, partial or late
read is ``..._INCOMPLETE``: never success, and never a durable state change.

The generation guard compares **content**, not only UUIDs: every sealed replica must hold the managed generation
under the target name, with the sealed schema, as one healthy replica of one replicated table, and its active parts
must equal the ones convergence verified (``parts_digest``, recorded per replica in the authority). A replica whose
parts changed since (a merge, or any write) is digested again and must still hold exactly the sealed content.
"""

from __future__ import annotations

from airflow_provider_dpone.contracts.authority_codec import AuthorityRecord
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.errors.replay import INCOMPLETE, MISMATCH, UNSUPPORTED
from airflow_provider_dpone.contracts.quality_capsule import QualityCore, TargetPlan
from airflow_provider_dpone.contracts.quality_read import TARGET_BUDGET_MS, TargetCounts, TargetReadPlan
from airflow_provider_dpone.ports.publication import UnavailableError
from airflow_provider_dpone.ports.quality import ReadIncompleteError
from airflow_provider_dpone.protocol.context import Context


class Budget:
    """The one monotonic budget of one observation (metadata and aggregate reads together)."""

    def __init__(self, ctx: Context, total_ms: int = TARGET_BUDGET_MS) -> None:
        self._clock = ctx.ports.clock
        self._deadline = self._clock.monotonic_ms() + total_ms
        self.total_ms = total_ms

    def remaining_ms(self) -> int:
        return self._deadline - self._clock.monotonic_ms()

    def check(self, what: str) -> int:
        """The remaining milliseconds; ``..._INCOMPLETE`` when none is left."""
        remaining = self.remaining_ms()
        if remaining <= 0:
            raise DponeError(INCOMPLETE, f"{what}: the {self.total_ms} ms observation budget is spent")
        return remaining


def read_plan(plan: TargetPlan, database: str, table: str, generation_uuid: str) -> TargetReadPlan:
    """The typed request of the sealed plan's observation of ``database.table`` (never SQL)."""
    return TargetReadPlan(
        database=database,
        table=table,
        generation_uuid=generation_uuid,
        metrics=plan.metrics,
        columns=plan.selected,
    )


def bounded_read(ctx: Context, member_id: str, plan: TargetReadPlan, budget: Budget) -> TargetCounts:
    """One aggregate read on one member, interrupted when the budget is spent; exact answers only."""
    reader = ctx.ports.acceptance
    if reader is None:
        raise DponeError(UNSUPPORTED, "no bounded acceptance reader is configured for target observations")
    remaining = budget.check(f"read on replica {member_id}")
    try:
        counts = reader.observe(ctx.inventory.member(member_id), plan, budget_ms=remaining)
    except (UnavailableError, ReadIncompleteError) as error:
        raise DponeError(INCOMPLETE, f"replica {member_id}: the bounded read did not answer ({error})") from None
    budget.check(f"answer of replica {member_id}")  # a late answer is not an answer
    if not counts.answers(plan):
        raise DponeError(INCOMPLETE, f"replica {member_id}: partial answer (columns or metrics missing)")
    if counts.generation_uuid != plan.generation_uuid:
        raise DponeError(MISMATCH, f"replica {member_id} does not hold the managed generation")
    return counts


def guard(ctx: Context, record: AuthorityRecord, core: QualityCore, budget: Budget) -> None:
    """Every sealed replica holds exactly the managed generation and content (module docstring)."""
    plan = core.target_plan
    assert plan is not None  # v2 cores only (model invariant)
    verified = {member.member_id: member.parts_digest for member in record.members}
    paths = set()
    for member_id in plan.replicas:
        if member_id not in ctx.inventory.member_ids:
            raise DponeError(MISMATCH, f"sealed replica {member_id} is not in the live inventory")
        budget.check(f"guard of replica {member_id}")
        try:
            session = ctx.session(member_id)
            database, target = ctx.request.database, ctx.request.target
            observed = session.observe_table(database, target, with_content=False, with_parts=True)
            if observed.uuid == core.generation_uuid and observed.parts_digest != verified.get(member_id):
                observed = session.observe_table(database, target, with_content=True)  # parts changed: digest
            status = session.replica_status(database, target)
        except UnavailableError:
            raise DponeError(INCOMPLETE, f"replica {member_id} did not answer the generation guard") from None
        if not observed.exists or observed.uuid != core.generation_uuid:
            raise DponeError(MISMATCH, f"replica {member_id} does not hold the managed generation")
        if observed.columns != plan.columns:
            raise DponeError(MISMATCH, f"replica {member_id}: schema differs from the sealed target plan")
        if observed.content_digest is not None and observed.content_digest != core.source_digests[1]:
            raise DponeError(MISMATCH, f"replica {member_id}: content differs from the managed generation")
        if status is None or status.is_readonly:
            raise DponeError(INCOMPLETE, f"replica {member_id} is not a healthy writable replica")
        paths.add(status.zookeeper_path)
    if len(paths) != 1:
        raise DponeError(MISMATCH, "the replicas are not one replicated table")
    budget.check("generation guard")
