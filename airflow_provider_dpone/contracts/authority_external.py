"""The external-replication authority record ``dpone.clickhouse.cluster-external-full-refresh.v1`` (seed 000).

One record per target key holds everything a fresh process needs to resume without guessing: the fence, the bound
inventory and plan, the sealed artifact and logical generation, the ordered per-member stage/publication/cleanup
records with physical UUIDs and content digests, and the bound DDL queue entries. It never holds hosts, SQL, paths or
row values. The validators encode the phase invariants, so a record that claims STAGED without every member READY
cannot even be constructed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, model_validator

from airflow_provider_dpone.contracts.authority_fields import (
    CLOSED,
    Hex64,
    MemberId,
    NonNegative,
    TimestampMs,
    Token,
    UInt64,
    UuidText,
)
from airflow_provider_dpone.contracts.authority_phases import MemberStage, Phase
from airflow_provider_dpone.contracts.receipts import ArtifactReceipt

EXTERNAL_SCHEMA: Literal["dpone.clickhouse.cluster-external-full-refresh.v1"] = (
    "dpone.clickhouse.cluster-external-full-refresh.v1"
)

MAX_REBUILDS_PER_MEMBER = 16
"""Bound on exact drop-and-rebuilds of one member's candidate within one operation (keeps the record bounded)."""

_STAGED_OR_LATER = frozenset(
    {Phase.STAGED, Phase.PUBLICATION_DISPATCHING, Phase.COMMITTED, Phase.CLEANUP_DISPATCHING, Phase.COMPLETED}
)

DdlKind = Literal["exchange", "rename", "drop", "none"]


_MEMBER_CONFIG = ConfigDict(frozen=True, extra="forbid", revalidate_instances="always")
"""Nested records are revalidated inside their parent, so a ``model_copy`` cannot smuggle an invalid member in."""


class DdlBinding(BaseModel):
    """One fenced ON CLUSTER dispatch permit and what identifies its queue entry.

    ``correlation_token`` is random, bound *before* dispatch and carried in ``log_comment``; ``entry`` is the queue
    entry name once observed. ``abandoned`` lists tokens of earlier epochs that were proven never to have reached the
    queue (no entry, no member effect, quiet period elapsed), so their permits are void. Kind ``none`` records a
    cleanup with nothing to drop (the target was absent, so publication was a RENAME).
    """

    model_config = _MEMBER_CONFIG

    kind: DdlKind
    epoch: UInt64
    correlation_token: Token | None
    query_digest: Hex64 | None
    permitted_at_ms: TimestampMs
    entry: StrictStr | None = None
    abandoned: tuple[Token, ...] = ()

    @model_validator(mode="after")
    def _token_matches_kind(self) -> DdlBinding:
        dispatched = self.kind != "none"
        if dispatched != (self.correlation_token is not None) or dispatched != (self.query_digest is not None):
            raise ValueError("a dispatched DDL binds a correlation token and a query digest; 'none' binds neither")
        return self


class MemberRecord(BaseModel):
    """One member's stage, candidate identity, baseline target and publication/cleanup observations."""

    model_config = _MEMBER_CONFIG

    member_id: MemberId
    stage: MemberStage = MemberStage.PENDING
    candidate_uuid_intent: UuidText | None = None
    candidate_uuid: UuidText | None = None
    owned_candidate_uuids: tuple[UuidText, ...] = ()
    target_uuid: UuidText | None = None
    target_row_count: NonNegative | None = None
    target_content_digest: Hex64 | None = None
    row_count: NonNegative | None = None
    content_digest: Hex64 | None = None
    rebuilds: NonNegative = Field(default=0, le=MAX_REBUILDS_PER_MEMBER)
    published_uuid: UuidText | None = None
    predecessor_absent: bool = False

    @model_validator(mode="after")
    def _stage_is_consistent(self) -> MemberRecord:
        if self.candidate_uuid_intent is not None and self.candidate_uuid_intent not in self.owned_candidate_uuids:
            raise ValueError("a candidate UUID intent must be listed as owned")
        if self.stage is MemberStage.PENDING and self.candidate_uuid_intent is not None:
            raise ValueError("PENDING has no intent")
        if self.stage is not MemberStage.PENDING and self.candidate_uuid_intent is None:
            raise ValueError(f"{self.stage} requires a candidate UUID intent")
        bound = self.stage in (MemberStage.CREATED, MemberStage.READY)
        if bound != (self.candidate_uuid is not None) or (bound and self.candidate_uuid != self.candidate_uuid_intent):
            raise ValueError("CREATED/READY bind exactly the intended candidate UUID; earlier stages bind none")
        ready = self.stage is MemberStage.READY
        if ready != (self.content_digest is not None) or ready != (self.row_count is not None):
            raise ValueError("READY records the verified row count and content digest; other stages none")
        if (self.target_uuid is None) != (self.target_content_digest is None):
            raise ValueError("an existing baseline target records its content digest")
        if len(set(self.owned_candidate_uuids)) != len(self.owned_candidate_uuids):
            raise ValueError("owned candidate UUIDs are unique")
        return self


class ErrorClassification(BaseModel):
    """Redacted last failure: the stable code and the phase it happened in; no detail text."""

    model_config = CLOSED

    code: StrictStr = Field(pattern=r"^DPONE_[A-Z0-9_]+$")
    phase: Phase
    at_ms: TimestampMs


class AuthorityCore(BaseModel):
    """The fields every authority record version carries, whatever its replication mode: the fence, the phase and
    the identities a same-operation retry re-derives and compares."""

    target_key: Hex64
    operation_id: Hex64
    fence_token: Token
    phase: Phase
    dispatch_epoch: UInt64 = 0
    write_id: Token
    inventory_digest: Hex64
    normalized_plan_digest: Hex64


class ExternalAuthorityRecord(AuthorityCore):
    """The V2 external record (field names are the payload keys; ``schema`` names the version)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True)

    schema_: Literal["dpone.clickhouse.cluster-external-full-refresh.v1"] = Field(
        default=EXTERNAL_SCHEMA, alias="schema"
    )
    replication_mode: Literal["external"] = "external"
    candidate_name: StrictStr
    previous_schema: StrictStr | None = None
    previous_operation_id: StrictStr | None = None
    artifact: ArtifactReceipt | None = None
    schema_digest: Hex64 | None = None
    generation_id: Hex64 | None = None
    baseline: Literal["absent", "existing"] | None = None
    members: tuple[MemberRecord, ...] = Field(min_length=2)
    publication: DdlBinding | None = None
    cleanup: DdlBinding | None = None
    created_at_ms: TimestampMs
    updated_at_ms: TimestampMs
    committed_at_ms: TimestampMs | None = None
    last_error: ErrorClassification | None = None

    @model_validator(mode="after")
    def _phase_invariants(self) -> ExternalAuthorityRecord:
        ids = [member.member_id for member in self.members]
        if ids != sorted(set(ids)):
            raise ValueError("members are unique and ordered by member_id")
        phase = self.phase
        bound = phase not in (Phase.LOCKED, Phase.ABORTED)
        if bound and (self.artifact is None or self.generation_id is None or self.baseline is None):
            raise ValueError(f"{phase} requires the bound artifact, generation and baseline")
        if self.artifact is not None and self.schema_digest != self.artifact.schema_digest:
            raise ValueError("schema_digest must be the artifact's schema digest")
        if self.baseline is not None:
            existing = [member.target_uuid is not None for member in self.members]
            if any(existing) != (self.baseline == "existing") or any(existing) != all(existing):
                raise ValueError("the baseline is uniform: every member has a predecessor, or none has")
        if phase in _STAGED_OR_LATER:
            if any(member.stage is not MemberStage.READY for member in self.members):
                raise ValueError(f"{phase} requires every member READY")
            if phase is not Phase.STAGED and self.publication is None:
                raise ValueError(f"{phase} requires the bound publication")
        if phase in (Phase.COMMITTED, Phase.CLEANUP_DISPATCHING, Phase.COMPLETED):
            if any(member.published_uuid != member.candidate_uuid for member in self.members):
                raise ValueError(f"{phase} requires every member to expose its candidate as the target")
            if self.committed_at_ms is None:
                raise ValueError(f"{phase} records the commit time")
        if phase in (Phase.CLEANUP_DISPATCHING, Phase.COMPLETED) and self.cleanup is None:
            raise ValueError(f"{phase} requires the bound cleanup")
        if phase is Phase.COMPLETED and not all(member.predecessor_absent for member in self.members):
            raise ValueError("COMPLETED requires the predecessor absent on every member")
        if self.publication is not None and self.publication.epoch > self.dispatch_epoch:
            raise ValueError("a bound epoch cannot exceed the dispatch epoch")
        return self

    def member_ids(self) -> tuple[str, ...]:
        return tuple(member.member_id for member in self.members)

    def member(self, member_id: str) -> MemberRecord:
        for member in self.members:
            if member.member_id == member_id:
                return member
        raise KeyError(member_id)

    def with_member(self, updated: MemberRecord) -> tuple[MemberRecord, ...]:
        """The member tuple with one member replaced (by id)."""
        return tuple(updated if member.member_id == updated.member_id else member for member in self.members)

    def evolve(self, **changes: Any) -> ExternalAuthorityRecord:
        """A validated copy with ``changes`` applied (``model_copy`` would skip the invariants)."""
        data = {name: getattr(self, name) for name in type(self).model_fields}
        data.update(changes)
        return ExternalAuthorityRecord.model_validate(data)
