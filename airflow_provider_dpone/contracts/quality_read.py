"""The typed request and answer of one bounded acceptance read (seed 002): what the worker is asked, what it returns.

The worker never receives SQL: a :class:`TargetReadPlan` names the table, the exact generation (UUID) it must find
there, the metrics and the selected columns; the adapter renders the one aggregate statement from it. The answer,
:class:`TargetCounts`, is accepted only when it :meth:`~TargetCounts.answers` the plan exactly: every count a
non-negative integer (never a boolean: the models are strict), every requested metric present for every selected
column and nothing else, so a missing alias or a partial result can never pass as success.

``row_count`` is ``count()``; ``null_count`` counts the rows whose value is NULL; ``distinct_count`` counts distinct
non-NULL values (``uniqExact``). All three are over the whole generation on one replica, never summed across
replicas; an empty table answers real zeros.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, Field, StrictStr, field_validator, model_validator

from airflow_provider_dpone.contracts.authority_fields import Hex64, NonNegative, UuidText
from airflow_provider_dpone.contracts.authority_generation import MEMBER_CONFIG
from airflow_provider_dpone.contracts.identifiers import validate_identifier

MAX_TARGET_COLUMNS: Final[int] = 256
"""At most this many selected columns in one acceptance read (seed 002: bounded observation)."""
TARGET_BUDGET_MS: Final[int] = 60_000
"""One shared monotonic budget for the metadata and aggregate reads of one target observation."""

TargetMetric = Literal["row_count", "null_count", "distinct_count"]
COLUMN_METRICS: Final[frozenset[str]] = frozenset({"null_count", "distinct_count"})
"""The metrics observed per selected column (``row_count`` is one number for the table)."""


class ColumnCounts(BaseModel):
    """The per-column counts of one selected column (``None``: that metric was not requested)."""

    model_config = MEMBER_CONFIG

    name: StrictStr
    null_count: NonNegative | None = None
    distinct_count: NonNegative | None = None


class TargetReadPlan(BaseModel):
    """What one bounded read observes: the exact generation of ``database.table``, the metrics, the columns."""

    model_config = MEMBER_CONFIG

    database: StrictStr
    table: StrictStr
    generation_uuid: UuidText
    metrics: tuple[TargetMetric, ...] = Field(min_length=1)
    columns: tuple[StrictStr, ...] = Field(default=(), max_length=MAX_TARGET_COLUMNS)

    @field_validator("database", "table")
    @classmethod
    def _identifier(cls, value: str) -> str:
        return validate_identifier(value, what="table")

    @field_validator("columns")
    @classmethod
    def _column_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            validate_identifier(name, what="column")
        if len(set(value)) != len(value):
            raise ValueError("selected columns are listed once each")
        return value

    @model_validator(mode="after")
    def _selection_matches_metrics(self) -> TargetReadPlan:
        if len(set(self.metrics)) != len(self.metrics):
            raise ValueError("metrics are listed once each")
        if bool(self.columns) != bool(COLUMN_METRICS & set(self.metrics)):
            raise ValueError("columns are selected exactly when a per-column metric is requested")
        return self


class TargetCounts(BaseModel):
    """The answer of one bounded read: the UUID read in the same statement as the counts, and the counts."""

    model_config = MEMBER_CONFIG

    generation_uuid: UuidText
    row_count: NonNegative
    content_digest: Hex64
    columns: tuple[ColumnCounts, ...] = Field(default=(), max_length=MAX_TARGET_COLUMNS)

    def answers(self, plan: TargetReadPlan) -> bool:
        """Exactly the plan's columns, in order, with exactly the requested per-column metrics."""
        if tuple(column.name for column in self.columns) != plan.columns:
            return False
        nulls, distincts = "null_count" in plan.metrics, "distinct_count" in plan.metrics
        return all(
            (column.null_count is not None) == nulls and (column.distinct_count is not None) == distincts
            for column in self.columns
        )
