"""The durable quality-replay capsule: policy, immutable core, completion state, size reservation.

The capsule rides inside the ``dpone.clickhouse.cluster-full-refresh.v2`` authority record, so every state change is
one acknowledged authority CAS with exact read-back. Its **core** is written once, in the CAS that makes the record
STAGED (before any publication DDL can be dispatched), and never changes: it holds the policy identity, the digests of
the configuration, plan, source and staged observations, the gate report and, for target obligations
(``dpone.quality.replay.v2``), the sealed :class:`AcceptancePlan`. ``core_digest`` is the SHA-256 of the core's canonical
JSON; a reader recomputes it and blocks on any difference (the protocol, not the codec, so the stable code is the
quality family's ``INVALID``).

States: ``PREPARED -> TARGET_PENDING -> COMPLETE | FAILED`` for target obligations, ``PREPARED -> COMPLETE`` for
source/staged-only evidence (``dpone.quality.replay.v1``); a failed source/staged gate is bound ``FAILED`` at once.
``pending_version`` and ``completion_version`` are the authority versions the two completion writes produced.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, model_validator

from airflow_provider_dpone.cluster.values.authority.generation import MEMBER_CONFIG
from airflow_provider_dpone.cluster.values.quality_read import ColumnCounts, TargetCounts
from airflow_provider_dpone.core.canonical import (
    UINT64_MAX,
    Hex64,
    MemberId,
    NonNegative,
    TimestampMs,
    UInt64,
    UuidText,
    canonical_json,
    sha256_hex,
)
from airflow_provider_dpone.core.manifest.cluster import (
    COLUMN_METRICS,
    MAX_TARGET_COLUMNS,
    GateName,
    TargetMetric,
)

QUALITY_SCHEMA_V1: Final = "dpone.quality.replay.v1"
QUALITY_SCHEMA_V2: Final = "dpone.quality.replay.v2"

_CORE_CONFIG = ConfigDict(
    frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True, revalidate_instances="always"
)
CapsuleState = Literal["PREPARED", "TARGET_PENDING", "COMPLETE", "FAILED"]


class GateResult(BaseModel):
    """One gate over the original source and staged observations: counts and digests only, never row values."""

    model_config = MEMBER_CONFIG

    name: GateName
    required: StrictBool = True
    passed: StrictBool
    expected: StrictStr
    observed: StrictStr


class AcceptancePlan(BaseModel):
    """The sealed target obligation: what recovery observes, never replaced from current manifest values."""

    model_config = MEMBER_CONFIG

    dataset: StrictStr
    columns: tuple[tuple[StrictStr, StrictStr], ...] = Field(min_length=1)
    """Every physical column and type, in order: what the generation guard requires on every replica."""
    metrics: tuple[TargetMetric, ...] = Field(min_length=1)
    selected: tuple[StrictStr, ...] = Field(default=(), max_length=MAX_TARGET_COLUMNS)
    """The columns the per-column metrics observe (empty without one)."""
    acceptance_mode: Literal["one_admitted_replica"] = "one_admitted_replica"
    schema_digest: Hex64
    selection_digest: Hex64
    replicas: tuple[MemberId, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _sorted(self) -> AcceptancePlan:
        if list(self.replicas) != sorted(set(self.replicas)):
            raise ValueError("the admitted replica list is sorted and unique")
        names = {name for name, _ in self.columns}
        if not set(self.selected) <= names or bool(self.selected) != bool(COLUMN_METRICS & set(self.metrics)):
            raise ValueError("the selected columns are table columns, exactly when a per-column metric is requested")
        return self


class QualityCore(BaseModel):
    """The immutable evidence, bound to one operation, fence, inventory, plan and exact desired generation."""

    model_config = _CORE_CONFIG

    schema_: Literal["dpone.quality.replay.v1", "dpone.quality.replay.v2"] = Field(alias="schema")
    policy_identity: Hex64
    config_digest: Hex64
    plan_digest: Hex64
    source_digests: tuple[Hex64, Hex64, Hex64]
    """Ordered: artifact SHA-256 (payload), typed content digest (source), schema digest."""
    run_id: StrictStr
    load_id: StrictStr
    target_key: Hex64
    operation_id: Hex64
    fence_token: StrictStr
    inventory_digest: Hex64
    generation_id: Hex64
    generation_uuid: UuidText
    source_rows: NonNegative
    staged_rows: tuple[tuple[MemberId, NonNegative], ...]
    report: tuple[GateResult, ...]
    passed: StrictBool
    requested: tuple[TargetMetric, ...]
    target_plan: AcceptancePlan | None = None
    expected: TargetCounts | None = None
    """The requested observations of the staged candidate (one replica, the same bounded reader): the target's
    counts must equal them. Present exactly with a target plan (v2)."""

    @model_validator(mode="after")
    def _obligation_matches_schema(self) -> QualityCore:
        if (self.schema_ == QUALITY_SCHEMA_V2) != (self.target_plan is not None):
            raise ValueError("target obligations (v2) carry the sealed target plan; v1 evidence carries none")
        if (self.target_plan is None) != (self.expected is None):
            raise ValueError("the staged observations are bound exactly with a target plan")
        if self.passed != all(gate.passed for gate in self.report if gate.required):
            raise ValueError("the core passes exactly when every required gate passed")
        return self

    def digest(self) -> str:
        return sha256_hex(canonical_json(self.model_dump(mode="json", by_alias=True)))


class TargetObservation(BaseModel):
    """Counts of the exact managed generation on one admitted replica (never summed across replicas)."""

    model_config = MEMBER_CONFIG

    member_id: MemberId
    generation_uuid: UuidText
    row_count: NonNegative
    content_digest: Hex64
    columns: tuple[ColumnCounts, ...] = Field(default=(), max_length=MAX_TARGET_COLUMNS)
    elapsed_ms: NonNegative
    observed_at_ms: TimestampMs

    @property
    def counts(self) -> TargetCounts:
        return TargetCounts(
            generation_uuid=self.generation_uuid,
            row_count=self.row_count,
            content_digest=self.content_digest,
            columns=self.columns,
        )


class QualityBinding(BaseModel):
    """The capsule in the authority record: the core, its digest and the completion state."""

    model_config = MEMBER_CONFIG

    core: QualityCore
    core_digest: Hex64
    state: CapsuleState
    pending_version: UInt64 | None = None
    target: TargetObservation | None = None
    completion_version: UInt64 | None = None
    failure: StrictStr | None = Field(default=None, max_length=200)

    @model_validator(mode="after")
    def _state_is_consistent(self) -> QualityBinding:
        v2 = self.core.target_plan is not None
        if self.state == "PREPARED" and (self.pending_version, self.target, self.completion_version) != (None,) * 3:
            raise ValueError("PREPARED carries no completion")
        if self.state == "TARGET_PENDING" and (self.pending_version is None or self.completion_version is not None):
            raise ValueError("TARGET_PENDING carries its version and no completion")
        if self.state == "COMPLETE":
            if self.completion_version is None or (self.target is not None) != v2 or not self.core.passed:
                raise ValueError("COMPLETE carries its version, a target observation iff v2, and a passed core")
            if v2 and (self.pending_version is None or self.pending_version >= self.completion_version):
                raise ValueError("v2 completion follows its TARGET_PENDING write")
        if self.state == "FAILED" and self.failure is None:
            raise ValueError("FAILED names the failed gate or observation")
        if not v2 and (self.state == "TARGET_PENDING" or self.pending_version is not None or self.target is not None):
            raise ValueError("v1 evidence has no target observation step")
        return self


def prepared(core: QualityCore) -> QualityBinding:
    """A fresh capsule: PREPARED when every required gate passed, FAILED (naming the gates) otherwise."""
    failed = [gate.name for gate in core.report if gate.required and not gate.passed]
    state: CapsuleState = "FAILED" if failed else "PREPARED"
    return QualityBinding(core=core, core_digest=core.digest(), state=state, failure=",".join(failed) or None)


def completion_reservation(binding: QualityBinding) -> QualityBinding:
    """The largest completion ``binding`` can grow to: encoded into the record before dispatch, it proves that the
    completion writes fit the 256 KiB envelope."""
    plan = binding.core.target_plan
    target = None
    if plan is not None:
        target = TargetObservation(
            member_id=max(plan.replicas),
            generation_uuid=binding.core.generation_uuid,
            row_count=UINT64_MAX,
            content_digest="f" * 64,
            columns=tuple(
                ColumnCounts(
                    name=name,
                    null_count=UINT64_MAX if "null_count" in plan.metrics else None,
                    distinct_count=UINT64_MAX if "distinct_count" in plan.metrics else None,
                )
                for name in plan.selected
            ),
            elapsed_ms=UINT64_MAX,
            observed_at_ms=UINT64_MAX,
        )
    return binding.model_copy(
        update={
            "state": "COMPLETE",
            "pending_version": UINT64_MAX - 1 if plan is not None else None,
            "target": target,
            "completion_version": UINT64_MAX,
            "failure": "x" * 200,
        }
    )
