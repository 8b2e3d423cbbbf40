"""The internal (replicated) authority records, sharing the target-key namespace with external records.

``dpone.clickhouse.cluster-full-refresh.v1`` is the internal replicated-publication record. Its members are the
replicas of one ``Replicated*MergeTree`` table: one candidate, created once by one fenced ``ON CLUSTER`` CREATE with a
persisted UUID intent, loaded once through one replica, and verified on every replica after convergence. So the
candidate state is shared (:class:`ReplicatedCandidate`) while every replica keeps its own
:class:`~airflow_provider_dpone.cluster.values.authority.generation.MemberGeneration` (baseline target, bound candidate,
verified content, publication and cleanup), which is what publication and cleanup reconcile in both modes.

``...v2`` adds the durable quality-replay capsule (:mod:`quality_capsule`) and, while a COMPLETED
operation's capsule is being validated, the durable reader fence (:class:`ReaderFence`); both fields are optional and
a v1 record keeps its v1 encoding (the codec never upgrades a record it reads). The protocol creates a v2 record exactly
when the request selects durable quality replay, and binds the capsule in the CAS that makes the record STAGED.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field, StrictStr, model_validator

from airflow_provider_dpone.cluster.values.authority.generation import (
    MAX_REBUILDS,
    MEMBER_CONFIG,
    RECORD_CONFIG,
    DdlBinding,
    GenerationRecord,
)
from airflow_provider_dpone.cluster.values.authority.phases import MemberStage, Phase
from airflow_provider_dpone.cluster.values.quality_capsule import QualityBinding
from airflow_provider_dpone.core.canonical import Hex64, MemberId, NonNegative, TimestampMs, Token, UuidText
from airflow_provider_dpone.core.errors import DponeError

INTERNAL_SCHEMA_V1: Literal["dpone.clickhouse.cluster-full-refresh.v1"] = "dpone.clickhouse.cluster-full-refresh.v1"
INTERNAL_SCHEMA_V2: Literal["dpone.clickhouse.cluster-full-refresh.v2"] = "dpone.clickhouse.cluster-full-refresh.v2"

_BOUND = (MemberStage.CREATED, MemberStage.READY)


class LoadBinding(BaseModel):
    """The one load of the artifact into the bound candidate: through which replica, with which deterministic query id
    and ``insert_deduplication_token``. Bound *before* the load is sent: once it exists, the load may have happened."""

    model_config = MEMBER_CONFIG

    member_id: MemberId
    candidate_uuid: UuidText
    query_id: StrictStr = Field(pattern=r"^dpone-load-[0-9a-f]{32}$")
    dedup_token: Hex64


class ReplicatedCandidate(BaseModel):
    """The one replicated candidate every replica shares.

    INTENDED: ``uuid_intent`` is persisted; ``create`` is the permit of its ON CLUSTER CREATE once taken. CREATED: the
    CREATE was reconciled on every replica and the single load is bound (it may have been sent). READY: every replica
    converged to exactly the artifact. ``drop`` is the permit of the fenced ON CLUSTER DROP of a CREATED candidate
    that must be rebuilt; when it completes, a new intent replaces this one (``rebuilds`` + 1).
    """

    model_config = MEMBER_CONFIG

    stage: MemberStage
    uuid_intent: UuidText
    owned_uuids: tuple[UuidText, ...]
    rebuilds: NonNegative = Field(default=0, le=MAX_REBUILDS)
    create: DdlBinding | None = None
    load: LoadBinding | None = None
    drop: DdlBinding | None = None

    @model_validator(mode="after")
    def _stage_is_consistent(self) -> ReplicatedCandidate:
        if self.uuid_intent not in self.owned_uuids or len(set(self.owned_uuids)) != len(self.owned_uuids):
            raise ValueError("the UUID intent is listed once among the owned UUIDs")
        if self.stage is MemberStage.PENDING:
            raise ValueError("a replicated candidate starts INTENDED (its first intent rides on the STAGING CAS)")
        if self.create is not None and self.create.kind != "create":
            raise ValueError("the create binding is an ON CLUSTER CREATE")
        if self.drop is not None and (self.drop.kind != "drop" or self.stage is not MemberStage.CREATED):
            raise ValueError("only a CREATED candidate is dropped for a rebuild, by an ON CLUSTER DROP")
        bound = self.stage in _BOUND
        if bound != (self.load is not None) or (bound and self.create is None):
            raise ValueError("CREATED/READY bind the reconciled CREATE and the one load; INTENDED binds no load")
        if self.load is not None and self.load.candidate_uuid != self.uuid_intent:
            raise ValueError("the load targets exactly the intended candidate")
        return self


class _InternalRecord(GenerationRecord):
    model_config = RECORD_CONFIG

    replication_mode: Literal["internal"] = "internal"
    candidate: ReplicatedCandidate | None = None

    def members_staged(self) -> bool:
        return self.candidate is not None and self.candidate.stage is MemberStage.READY

    @model_validator(mode="after")
    def _replicas_share_the_candidate(self) -> _InternalRecord:
        candidate = self.candidate
        if candidate is None:
            if self.phase not in (Phase.LOCKED, Phase.ABORTED):
                raise ValueError(f"{self.phase} requires the replicated candidate")
            if any(member.candidate_uuid or member.content_digest for member in self.members):
                raise ValueError("no replica binds a candidate before the candidate exists")
            return self
        bound = candidate.uuid_intent if candidate.stage in _BOUND else None
        ready = candidate.stage is MemberStage.READY
        for member in self.members:
            if member.candidate_uuid != bound:
                raise ValueError("every replica binds exactly the shared candidate UUID once it is CREATED")
            if ready != (member.content_digest is not None):
                raise ValueError("READY records every replica's verified content; earlier stages none")
        if candidate.load is not None and candidate.load.member_id not in self.member_ids():
            raise ValueError("the load goes through a bound replica")
        return self


class InternalAuthorityRecordV1(_InternalRecord):
    """The internal replicated-publication record, version 1."""

    schema_: Literal["dpone.clickhouse.cluster-full-refresh.v1"] = Field(default=INTERNAL_SCHEMA_V1, alias="schema")
    quality: ClassVar[None] = None
    """A version 1 record never carries a quality-replay capsule."""


class ReaderFence(BaseModel):
    """A validation of a COMPLETED operation's capsule in progress: no successor takes the target before
    ``expires_at_ms`` (wall clock) unless the fence is released first; ``token`` names the validation holding it."""

    model_config = MEMBER_CONFIG

    token: Token
    expires_at_ms: TimestampMs


class InternalAuthorityRecordV2(_InternalRecord):
    """Version 2: version 1 plus the optional durable quality-replay capsule and reader fence."""

    schema_: Literal["dpone.clickhouse.cluster-full-refresh.v2"] = Field(default=INTERNAL_SCHEMA_V2, alias="schema")
    quality: QualityBinding | None = None
    reader: ReaderFence | None = Field(default=None, exclude_if=lambda value: value is None)

    @model_validator(mode="after")
    def _capsule_bound_at_staged(self) -> InternalAuthorityRecordV2:
        # a v2 record without a capsule past STAGING is read, and blocked by the protocol (REQUIRED)
        if self.quality is not None and self.phase in (Phase.LOCKED, Phase.STAGING):
            raise ValueError("the capsule is bound by the STAGED write, not before")
        if self.reader is not None and (self.phase is not Phase.COMPLETED or self.quality is None):
            raise ValueError("a reader fence guards the validation of a COMPLETED operation's capsule only")
        return self

    def reader_fenced(self, now_ms: int) -> bool:
        """Whether an unexpired reader fence keeps successors out."""
        return self.reader is not None and self.reader.expires_at_ms > now_ms


InternalAuthorityRecord = InternalAuthorityRecordV1 | InternalAuthorityRecordV2


def as_internal(record: GenerationRecord) -> InternalAuthorityRecord:
    """``record`` typed as the internal record an internal-mode function holds (type narrowing: the protocol hands a
    mode's functions only records of that mode); any other record is invalid there."""
    if not isinstance(record, InternalAuthorityRecordV1 | InternalAuthorityRecordV2):
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_RECORD_INVALID", "an internal record was expected")
    return record
