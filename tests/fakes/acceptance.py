"""The in-memory bounded acceptance reader: the fake world's tables read under the same contract as the real worker
(``tests/contracts/test_acceptance_reader.py``).

A read is one fault point (``member.acceptance``): a crash kills the task process, a lost response is an unanswered
read. ``slow_ms`` makes the next reads of a member take that long on the world's clock: past the budget, the read is
interrupted (``ReadIncompleteError``) and the clock shows the budget spent, as when the real reader kills its worker.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from airflow_provider_dpone.contracts.inventory import AdmittedMember
from airflow_provider_dpone.contracts.quality_read import ColumnCounts, TargetCounts, TargetReadPlan
from airflow_provider_dpone.ports.publication import UnavailableError
from airflow_provider_dpone.ports.quality import ReadIncompleteError
from tests.fakes.world import content_digest

if TYPE_CHECKING:
    from tests.fakes.world import FakeWorld


class FakeAcceptanceReader:
    def __init__(self, world: FakeWorld) -> None:
        self.world = world
        self.slow_ms: dict[str, int] = {}
        self.reads: Counter[tuple[str, str]] = Counter()
        """Completed reads per (member id, table name): what a test counts as scans."""

    def observe(self, member: AdmittedMember, plan: TargetReadPlan, *, budget_ms: int) -> TargetCounts:
        def effect() -> TargetCounts:
            delay = self.slow_ms.get(member.member_id, 0)
            if delay > budget_ms:
                self.world.clock.advance(budget_ms)
                raise ReadIncompleteError(f"interrupted after {budget_ms} ms")
            self.world.clock.advance(delay)
            table = self.world.member(member.member_id).tables.get((plan.database, plan.table))
            if table is None:
                raise UnavailableError(f"member {member.member_id}: unknown table")
            names = [name for name, _ in table.columns]
            if not set(plan.columns) <= set(names):
                raise UnavailableError(f"member {member.member_id}: unknown column")
            columns = []
            for name in plan.columns:
                values = [row[names.index(name)] for row in table.rows]
                columns.append(
                    ColumnCounts(
                        name=name,
                        null_count=sum(value is None for value in values) if "null_count" in plan.metrics else None,
                        distinct_count=len({value for value in values if value is not None})
                        if "distinct_count" in plan.metrics
                        else None,
                    )
                )
            self.reads[(member.member_id, plan.table)] += 1
            return TargetCounts(
                generation_uuid=table.uuid,
                row_count=len(table.rows),
                content_digest=content_digest(table.columns, table.rows),
                columns=tuple(columns),
            )

        return self.world.faults.read("member.acceptance", effect)
