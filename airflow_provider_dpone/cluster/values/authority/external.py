"""The external-replication authority record ``dpone.clickhouse.cluster-external-full-refresh.v1``.

One record per target key holds everything a fresh process needs to resume without guessing: the fence, the bound
inventory and plan, the sealed artifact and logical generation, the ordered per-member stage/publication/cleanup
records with physical UUIDs and content digests, and the bound DDL queue entries (the shared shape is
:class:`~airflow_provider_dpone.cluster.values.authority.generation.GenerationRecord`). What is external-only: every member
stages its own candidate, so every member carries its own candidate UUID intent, owned UUIDs and stage.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from airflow_provider_dpone.cluster.values.authority.generation import (
    MAX_REBUILDS,
    RECORD_CONFIG,
    AuthorityCore,
    DdlBinding,
    ErrorClassification,
    GenerationRecord,
    MemberGeneration,
)
from airflow_provider_dpone.cluster.values.authority.phases import MemberStage
from airflow_provider_dpone.core.canonical import NonNegative, TimestampMs, UuidText
from airflow_provider_dpone.core.errors import DponeError

EXTERNAL_SCHEMA: Literal["dpone.clickhouse.cluster-external-full-refresh.v1"] = (
    "dpone.clickhouse.cluster-external-full-refresh.v1"
)

MAX_REBUILDS_PER_MEMBER = MAX_REBUILDS
"""Bound on exact drop-and-rebuilds of one member's candidate within one operation (keeps the record bounded)."""

__all__ = [
    "EXTERNAL_SCHEMA",
    "MAX_REBUILDS_PER_MEMBER",
    "AuthorityCore",
    "DdlBinding",
    "ErrorClassification",
    "ExternalAuthorityRecord",
    "MemberRecord",
    "as_external",
]


class MemberRecord(MemberGeneration):
    """One member's stage and candidate identity, on top of what it exposes (:class:`MemberGeneration`)."""

    stage: MemberStage = MemberStage.PENDING
    candidate_uuid_intent: UuidText | None = None
    owned_candidate_uuids: tuple[UuidText, ...] = ()
    rebuilds: NonNegative = Field(default=0, le=MAX_REBUILDS_PER_MEMBER)
    intended_at_ms: TimestampMs | None = Field(default=None, exclude_if=lambda value: value is None)
    """When the current intent was (re)stamped, before its write: its ``CREATE ... UUID`` is sent only within the
    dispatch deadline of it, so no CREATE of this member's intents can reach the member after that plus the send
    timeout (what an abort waits for). ``None``: written before intents were stamped (never created from)."""

    @model_validator(mode="after")
    def _stage_is_consistent(self) -> MemberRecord:
        if self.candidate_uuid_intent is not None and self.candidate_uuid_intent not in self.owned_candidate_uuids:
            raise ValueError("a candidate UUID intent must be listed as owned")
        if self.stage is MemberStage.PENDING and self.candidate_uuid_intent is not None:
            raise ValueError("PENDING has no intent")
        if self.stage is not MemberStage.PENDING and self.candidate_uuid_intent is None:
            raise ValueError(f"{self.stage} requires a candidate UUID intent")
        if self.intended_at_ms is not None and self.candidate_uuid_intent is None:
            raise ValueError("an intent time without an intent")
        bound = self.stage in (MemberStage.CREATED, MemberStage.READY)
        if bound != (self.candidate_uuid is not None) or (bound and self.candidate_uuid != self.candidate_uuid_intent):
            raise ValueError("CREATED/READY bind exactly the intended candidate UUID; earlier stages bind none")
        if (self.stage is MemberStage.READY) != (self.content_digest is not None):
            raise ValueError("READY records the verified row count and content digest; other stages none")
        if len(set(self.owned_candidate_uuids)) != len(self.owned_candidate_uuids):
            raise ValueError("owned candidate UUIDs are unique")
        return self


class ExternalAuthorityRecord(GenerationRecord):
    """The V2 external record (field names are the payload keys; ``schema`` names the version)."""

    model_config = RECORD_CONFIG

    schema_: Literal["dpone.clickhouse.cluster-external-full-refresh.v1"] = Field(
        default=EXTERNAL_SCHEMA, alias="schema"
    )
    replication_mode: Literal["external"] = "external"
    members: tuple[MemberRecord, ...] = Field(min_length=2)
    quality: ClassVar[None] = None
    """An external record never carries a quality-replay capsule."""

    def members_staged(self) -> bool:
        return all(member.stage is MemberStage.READY for member in self.members)

    def member(self, member_id: str) -> MemberRecord:
        for member in self.members:
            if member.member_id == member_id:
                return member
        raise KeyError(member_id)

    def with_member(self, updated: MemberRecord) -> tuple[MemberRecord, ...]:
        """The member tuple with one member replaced (by id)."""
        return tuple(updated if member.member_id == updated.member_id else member for member in self.members)


def as_external(record: GenerationRecord) -> ExternalAuthorityRecord:
    """``record`` typed as the external record an external-mode function holds (type narrowing: the protocol hands a
    mode's functions only records of that mode); any other record is invalid there."""
    if not isinstance(record, ExternalAuthorityRecord):
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_RECORD_INVALID", "an external record was expected")
    return record
