"""The in-memory bounded acceptance reader: the fake world read under the same contract as the real worker
(``tests/cluster/test_acceptance_reader.py``).

Guard facts come from the fake member sessions (their reads stay fault points: ``member.observe`` is counted,
``member.replica_status`` can crash or lose its answer); the scan is one more fault point, ``member.acceptance``.
``slow_ms`` makes the scan of a member take that long on the world's clock: past the budget, the observation is
interrupted (``ReadIncompleteError``) with the budget spent, as when the real reader kills its worker.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from airflow_provider_dpone.cluster.ports import ReadIncompleteError
from airflow_provider_dpone.cluster.protocol.quality_target import replica_facts
from airflow_provider_dpone.cluster.values.inventory import AdmittedMember
from airflow_provider_dpone.cluster.values.quality_read import ColumnCounts, Observation, TargetCounts, TargetReadPlan
from airflow_provider_dpone.core.errors import UnavailableError
from tests.support.fakes.world import content_digest

if TYPE_CHECKING:
    from tests.support.fakes.world import FakeWorld


class FakeAcceptanceReader:
    def __init__(self, world: FakeWorld) -> None:
        self.world = world
        self.slow_ms: dict[str, int] = {}
        self.reads: Counter[tuple[str, str]] = Counter()
        """Completed scans per (member id, table name): what a test counts as target reads."""

    def observe(self, members: tuple[AdmittedMember, ...], plan: TargetReadPlan, *, budget_ms: int) -> Observation:
        from tests.support.fakes.ports import FakeMemberSession

        started = self.world.clock.ms
        sessions = {m.member_id: FakeMemberSession(self.world, self.world.member(m.member_id)) for m in members}
        before = tuple(replica_facts(sessions[read.member_id], plan, read) for read in plan.guard)
        if plan.scan is None:
            return Observation(before=before)
        counts = self._scan(plan.scan, plan, budget_ms - (self.world.clock.ms - started))
        after = tuple(replica_facts(sessions[read.member_id], plan, read) for read in plan.guard)
        return Observation(before=before, counts=counts, after=after)

    def _scan(self, member_id: str, plan: TargetReadPlan, budget_ms: int) -> TargetCounts:
        def effect() -> TargetCounts:
            delay = self.slow_ms.get(member_id, 0)
            if delay > budget_ms:
                self.world.clock.advance(max(0, budget_ms))
                raise ReadIncompleteError(f"interrupted after {budget_ms} ms")
            self.world.clock.advance(delay)
            table = self.world.member(member_id).tables.get((plan.database, plan.table))
            if table is None:
                raise UnavailableError(f"member {member_id}: unknown table")
            names = [name for name, _ in table.columns]
            if not set(plan.columns) <= set(names):
                raise UnavailableError(f"member {member_id}: unknown column")
            columns = []
            for name in plan.columns:
                values = [row[names.index(name)] for row in table.rows]
                nulls = sum(value is None for value in values)
                distinct = len({value for value in values if value is not None})
                columns.append(
                    ColumnCounts(
                        name=name,
                        null_count=nulls if "null_count" in plan.metrics else None,
                        distinct_count=distinct if "distinct_count" in plan.metrics else None,
                    )
                )
            self.reads[(member_id, plan.table)] += 1
            return TargetCounts(
                generation_uuid=table.uuid,
                row_count=len(table.rows),
                content_digest=content_digest(table.columns, table.rows, plan.digest_version),
                columns=tuple(columns),
            )

        return self.world.faults.read("member.acceptance", effect)
