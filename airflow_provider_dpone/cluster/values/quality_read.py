"""The typed request and answer of one bounded observation: what the worker is asked, what it returns.

The worker never receives SQL. A :class:`TargetReadPlan` names the table and the exact generation (UUID) it must
find there, the replicas whose metadata to read before and after (``guard``: UUID, columns, active parts, replica
health; the content digest too where the parts differ from the ones convergence verified), and optionally the one
replica to count (``scan``: metrics and selected columns); the adapter renders the statements from it. The answer,
an :class:`Observation`, is accepted only when it :meth:`~Observation.answers` the plan exactly: one fact per guarded
replica in order, before and after, counts exactly when a scan was asked, every count a non-negative integer (never
a boolean: the models are strict), every requested metric present for every selected column and nothing else, so a
missing alias or a partial result can never pass as success. The protocol, not the worker, judges the facts.

``row_count`` is ``count()``; ``null_count`` counts the rows whose value is NULL; ``distinct_count`` counts distinct
non-NULL values (``uniqExact``). All three are over the whole generation on one replica, never summed across
replicas; an empty table answers real zeros.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, Field, StrictBool, StrictStr, field_validator, model_validator

from airflow_provider_dpone.cluster.values.authority.generation import MEMBER_CONFIG
from airflow_provider_dpone.cluster.values.receipts import ContentDigestVersion
from airflow_provider_dpone.core.canonical import Hex64, MemberId, NonNegative, UuidText
from airflow_provider_dpone.core.identifiers import validate_identifier
from airflow_provider_dpone.core.manifest.cluster import COLUMN_METRICS, MAX_TARGET_COLUMNS, TargetMetric

TARGET_BUDGET_MS: Final[int] = 60_000
"""One shared monotonic budget for the metadata and aggregate reads of one target observation."""


class ColumnCounts(BaseModel):
    """The per-column counts of one selected column (``None``: that metric was not requested)."""

    model_config = MEMBER_CONFIG

    name: StrictStr
    null_count: NonNegative | None = None
    distinct_count: NonNegative | None = None


class ReplicaRead(BaseModel):
    """One guarded replica: its active parts as convergence verified them (``None``: not recorded)."""

    model_config = MEMBER_CONFIG

    member_id: MemberId
    verified_parts: Hex64 | None = None


class TargetReadPlan(BaseModel):
    """What one bounded observation reads: guard facts of ``guard`` before and after, and the counts of ``scan``."""

    model_config = MEMBER_CONFIG

    database: StrictStr
    table: StrictStr
    generation_uuid: UuidText
    guard: tuple[ReplicaRead, ...] = ()
    scan: MemberId | None = None
    metrics: tuple[TargetMetric, ...] = ()
    columns: tuple[StrictStr, ...] = Field(default=(), max_length=MAX_TARGET_COLUMNS)
    digest_version: ContentDigestVersion
    """The content digest version of the record's artifact receipt: every digest of the plan is computed with it."""
    schema_columns: tuple[tuple[StrictStr, StrictStr], ...] = ()
    """Every column and type of the table in order (the scan's typed row digest); given exactly with a scan."""

    @property
    def member_ids(self) -> tuple[str, ...]:
        """Every member the observation reads, guarded ones first."""
        ids = [read.member_id for read in self.guard]
        return tuple([*ids, self.scan] if self.scan is not None and self.scan not in ids else ids)

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
        if (self.scan is None) == bool(self.metrics) or (self.scan is None and not self.guard):
            raise ValueError("metrics exactly with a scan, and a plan reads something")
        if (self.scan is None) == bool(self.schema_columns):
            raise ValueError("the table's schema is given exactly with a scan")
        if len({read.member_id for read in self.guard}) != len(self.guard):
            raise ValueError("each replica is guarded once")
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


class ReplicaFacts(BaseModel):
    """What one replica holds under the plan's name: metadata, parts and (if its parts differ from the verified
    ones) content, and its replication health; read as the member session reads them."""

    model_config = MEMBER_CONFIG

    member_id: MemberId
    exists: StrictBool
    uuid: UuidText | None = None
    columns: tuple[tuple[StrictStr, StrictStr], ...] = ()
    parts_digest: Hex64 | None = None
    content_digest: Hex64 | None = None
    zookeeper_path: StrictStr | None = None
    readonly: StrictBool | None = None


class Observation(BaseModel):
    """The answer of one bounded observation: guard facts before, the counts, guard facts after."""

    model_config = MEMBER_CONFIG

    before: tuple[ReplicaFacts, ...] = ()
    counts: TargetCounts | None = None
    after: tuple[ReplicaFacts, ...] = ()

    def answers(self, plan: TargetReadPlan) -> bool:
        """One fact per guarded replica in order before, and again after a scan; counts exactly when a scan was
        asked, answering the plan."""
        guarded = tuple(read.member_id for read in plan.guard)
        after = guarded if plan.scan is not None else ()
        if tuple(f.member_id for f in self.before) != guarded or tuple(f.member_id for f in self.after) != after:
            return False
        if self.counts is None:
            return plan.scan is None
        return plan.scan is not None and self.counts.answers(plan)
