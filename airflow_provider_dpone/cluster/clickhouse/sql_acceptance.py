"""SQL of the bounded acceptance read: one aggregate statement rendered from a typed plan.

The worker never receives SQL; it renders this from a :class:`TargetReadPlan` whose names were validated as plain
identifiers, and quotes every name. One statement reads, over the whole table on one server: the row count and the
canonical multiset sum of :mod:`sql_digest` in the plan's digest version (so the answer is bound to the exact content), the table's UUID (so it is
bound to the exact generation: a name exchanged meanwhile shows another UUID), and per selected column the NULL count
(``countIf(isNull(c))``) and the distinct non-NULL count (``uniqExact(c)``) under positional aliases. An empty table
answers real zeros (aggregates without ``GROUP BY`` always return one row).
"""

from __future__ import annotations

from typing import Final

from airflow_provider_dpone.cluster.clickhouse import sql_digest
from airflow_provider_dpone.cluster.clickhouse.literals import string_literal
from airflow_provider_dpone.cluster.values.quality_read import TargetReadPlan
from airflow_provider_dpone.core.identifiers import qualified_clickhouse, quote_clickhouse

UUID_ALIAS: Final[str] = "generation_uuid"


def aliases(plan: TargetReadPlan) -> tuple[str, ...]:
    """The aliases of the per-column counts, in answer order (``null_<i>``, ``distinct_<i>``)."""
    names = []
    for index in range(len(plan.columns)):
        if "null_count" in plan.metrics:
            names.append(f"null_{index}")
        if "distinct_count" in plan.metrics:
            names.append(f"distinct_{index}")
    return tuple(names)


def target_counts(plan: TargetReadPlan) -> str:
    """``SELECT count(), <multiset sum>, <uuid> AS generation_uuid, <per-column counts> FROM db.table``."""
    uuid = (
        f"(SELECT toString(uuid) FROM system.tables WHERE database = {string_literal(plan.database)}"
        f" AND name = {string_literal(plan.table)}) AS {UUID_ALIAS}"
    )
    counts = []
    for index, column in enumerate(plan.columns):
        quoted = quote_clickhouse(column)
        if "null_count" in plan.metrics:
            counts.append(f"countIf(isNull({quoted})) AS null_{index}")
        if "distinct_count" in plan.metrics:
            counts.append(f"uniqExact({quoted}) AS distinct_{index}")
    select = ", ".join([sql_digest.aggregates(plan.schema_columns, plan.digest_version), uuid, *counts])
    return f"SELECT {select} FROM {qualified_clickhouse(plan.database, plan.table)}"


def read_settings(budget_seconds: int) -> dict[str, int | str]:
    """The server interrupts the read itself when the budget is spent (the client kills the worker anyway)."""
    return {"max_execution_time": max(1, budget_seconds), "timeout_overflow_mode": "throw"}
