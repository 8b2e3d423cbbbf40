"""What every publication authority record holds, whatever its replication mode.

Both modes publish one logical generation (the sealed artifact) to every member of a one-shard cluster through the
same fence, the same one-shot ``ON CLUSTER`` publication and the same fenced cleanup. So both record versions share
this base: the fence core, the bound artifact and baseline, one :class:`MemberGeneration` per member (physical UUIDs
and verified content, which is all that publication and cleanup reconcile), the DDL bindings and the phase invariants.
They differ only in how the candidate comes to exist: one candidate per member (external) or one replicated candidate
shared by every replica (internal); each subclass states when its members are staged.

It never holds hosts, SQL, paths or row values. The validators encode the phase invariants, so a record that claims
STAGED without every member staged cannot even be constructed.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator, model_validator

from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.cluster.values.authority.release import Release
from airflow_provider_dpone.cluster.values.part_digests import MAX_PART_DIGESTS, PartDigest
from airflow_provider_dpone.cluster.values.receipts import ArtifactReceipt, ContentDigestVersion, require_digest_version
from airflow_provider_dpone.core.canonical import (
    CLOSED,
    Hex64,
    MemberId,
    NonNegative,
    TimestampMs,
    Token,
    UInt64,
    UuidText,
)
from airflow_provider_dpone.core.record_format import format_error

MEMBER_CONFIG = ConfigDict(frozen=True, extra="forbid", revalidate_instances="always")
"""Nested records are revalidated inside their parent, so a ``model_copy`` cannot smuggle an invalid member in."""

RECORD_CONFIG = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True)

MAX_REBUILDS = 16
"""Bound on exact drop-and-rebuilds of one candidate within one operation (keeps the record bounded)."""

_STAGED_OR_LATER = frozenset(
    {
        Phase.STAGED,
        Phase.PUBLICATION_DISPATCHING,
        Phase.COMMITTED,
        Phase.CLEANUP_DISPATCHING,
        Phase.COMPLETED,
        Phase.RELEASED,
    }
)

PartDigests = tuple[PartDigest, ...] | None

DdlKind = Literal["create", "exchange", "rename", "drop", "none"]


class ServerName(BaseModel):
    """Which ClickHouse server answered: its ``serverUUID()`` and a digest of its ``hostName()`` (no host is ever
    recorded). A dispatch permit names the server its request was pinned to; a void proof names the server whose
    restart it read, and must name the same one."""

    model_config = MEMBER_CONFIG

    server_uuid: UuidText
    host_digest: Hex64


class DdlBinding(BaseModel):
    """One fenced ON CLUSTER dispatch permit and what identifies its queue entry.

    ``correlation_token`` is random, bound *before* dispatch and carried in ``log_comment``; ``entry`` is the queue
    entry name once observed. Kind ``none`` records a cleanup with nothing to drop (the target was absent, so
    publication was a RENAME). A dispatched permit is always pinned (``server``); a binding without its server, or
    with the ``abandoned`` tokens pre-release builds wrote, is another build's format and refused
    (``DPONE_RECORD_FORMAT_UNSUPPORTED``).
    """

    model_config = MEMBER_CONFIG

    kind: DdlKind
    epoch: UInt64
    correlation_token: Token | None
    query_digest: Hex64 | None
    permitted_at_ms: TimestampMs
    entry: StrictStr | None = None
    server: ServerName | None = None
    """The coordinator the dispatch is pinned to (its request carries the session opened by that identity read);
    ``None`` exactly for kind ``none``."""
    records_dispatch: StrictBool = Field(default=False, exclude_if=lambda value: not value)
    """The permit is sent only after its dispatch is recorded (``dispatching_at_ms``). ``False`` in records written
    before: such a permit may have been sent at any time within the deadline of ``permitted_at_ms``."""
    dispatching_at_ms: TimestampMs | None = Field(default=None, exclude_if=lambda value: value is None)
    """When the permit's one dispatch was recorded (stamped before that write): the request leaves only within the
    dispatch deadline of it. ``None`` (with ``records_dispatch``): never recorded, so never sent."""

    @model_validator(mode="before")
    @classmethod
    def _pinned_format(cls, data: Any) -> Any:
        """Permits of pre-release builds: unpinned (no ``server``) or carrying ``abandoned`` tokens."""
        if isinstance(data, dict):
            if "abandoned" in data:
                raise format_error("DDL binding with abandoned permit tokens")
            if data.get("kind", "none") != "none" and data.get("server") is None:
                raise format_error("DDL permit without its pinned server")
        return data

    @model_validator(mode="after")
    def _token_matches_kind(self) -> DdlBinding:
        dispatched = self.kind != "none"
        if dispatched != (self.correlation_token is not None) or dispatched != (self.query_digest is not None):
            raise ValueError("a dispatched DDL binds a correlation token and a query digest; 'none' binds neither")
        if dispatched != (self.server is not None):
            raise ValueError("a dispatched DDL is pinned to its server; 'none' names none")
        if self.dispatching_at_ms is not None and not (self.records_dispatch and dispatched):
            raise ValueError("only a permit that records its dispatch records a dispatch time")
        return self

    @property
    def unsent(self) -> bool:
        """Provably never sent: its dispatch is recorded before it is sent, and none is recorded."""
        return self.records_dispatch and self.dispatching_at_ms is None

    @property
    def sent_from_ms(self) -> int:
        """The time the permit's request may have left from (it leaves within the dispatch deadline of it): the
        recorded dispatch, or for a permit that records none, the permit itself."""
        return self.permitted_at_ms if self.dispatching_at_ms is None else self.dispatching_at_ms


VoidedStep = Literal["publication", "cleanup", "candidate create", "candidate drop"]

MAX_VOIDED_PERMITS = 8
"""Bound on explicitly voided permits within one operation (keeps the record bounded; past it: abort or new run)."""


class MemberUuids(BaseModel):
    """One member's (target UUID, candidate-name UUID) pair, observed in one snapshot while a permit was voided."""

    model_config = MEMBER_CONFIG

    member_id: MemberId
    target_uuid: UuidText | None
    candidate_uuid: UuidText | None


class VoidedPermit(BaseModel):
    """The recorded proof that a dispatch permit's request can no longer execute.

    ``permit`` is the binding that was voided, whole (so its token can never be confused with a later permit's).
    The proof: the coordinator's server started at ``server_started_at_ms`` (a lower bound, its own clock), later than
    ``permit.permitted_at_ms`` plus the dispatch deadline, the client's send timeout and the clock-skew margin, so a
    request that permit sent died with the old server; no queue entry carried the token after that restart
    (``queue_entry_absent``); and every member showed exactly the pre-dispatch UUIDs (``members``).
    """

    model_config = MEMBER_CONFIG

    step: VoidedStep
    permit: DdlBinding
    server_started_at_ms: TimestampMs
    dispatch_deadline_ms: NonNegative
    send_timeout_ms: NonNegative
    skew_margin_ms: NonNegative
    queue_entry_absent: Literal[True] = True
    members: tuple[MemberUuids, ...] = Field(min_length=1)
    voided_at_ms: TimestampMs
    server: ServerName
    """The server whose start time is the proof: the permit's own server, or, with ``server_replaced``, the server
    that took its place on the same host."""
    server_replaced: bool = False
    """The permit's server identity was declared retired by the operator (its data directory was lost, so its
    ``serverUUID()`` can never answer again) and ``server`` is a new identity on the same host (the same
    ``hostName()`` digest) that started after every margin: every request the permit could send reached the retired
    process, or nothing, before the new one started."""

    @model_validator(mode="after")
    def _restart_after_every_margin(self) -> Self:
        if self.permit.kind == "none" or self.permit.entry is not None:
            raise ValueError("only a dispatched permit whose queue entry was never observed is voided")
        pinned = self.permit.server
        assert pinned is not None  # a dispatched permit is pinned (DdlBinding)
        if self.server_replaced:
            if self.server.host_digest != pinned.host_digest or self.server.server_uuid == pinned.server_uuid:
                raise ValueError("the replacement is a new server identity on the pinned server's host")
        elif self.server != pinned:
            raise ValueError("the restart proof must be read from the server the permit was dispatched to")
        if self.server_started_at_ms <= self.earliest_restart_ms:
            raise ValueError("the coordinator must have started after the permit plus every margin")
        return self

    @property
    def earliest_restart_ms(self) -> int:
        """The server start time a proof must exceed (the last moment the permit's request could still arrive)."""
        permit = self.permit
        return permit.permitted_at_ms + self.dispatch_deadline_ms + self.send_timeout_ms + self.skew_margin_ms


class MemberGeneration(BaseModel):
    """What one member exposes: its baseline target, the candidate bound to it, the verified content, and whether
    publication and cleanup reached it. Publication and cleanup reconcile exactly these fields, in both modes."""

    model_config = MEMBER_CONFIG

    member_id: MemberId
    candidate_uuid: UuidText | None = None
    target_uuid: UuidText | None = None
    target_row_count: NonNegative | None = None
    target_content_digest: Hex64 | None = None
    target_schema_digest: Hex64 | None = Field(default=None, exclude_if=lambda value: value is None)
    """The baseline target's ordered columns (``cluster.values.identities.schema_digest``), observed with its content: a
    metadata-only ALTER (``ADD COLUMN`` keeps every part) changes it. Left out of the payload when absent."""
    target_parts_digest: Hex64 | None = Field(default=None, exclude_if=lambda value: value is None)
    """The baseline target's active parts (names and checksums) seen with its content: while they and the schema are
    unchanged no row of the target moved; the publication barrier digests the target again only when they changed
    (``cluster/protocol/observe.py``). Absent in records written without it (the barrier then digests the target
    whole) and left out of the payload, so such a record re-encodes to its own bytes."""
    row_count: NonNegative | None = None
    content_digest: Hex64 | None = None
    parts_digest: Hex64 | None = Field(default=None, exclude_if=lambda value: value is None)
    """The candidate's active parts (names and checksums) seen with its verified content: the publication barrier
    digests the content again only when they changed. Left out of the payload when absent, so a record written
    without it re-encodes to its own bytes."""
    part_digests: PartDigests = Field(default=None, max_length=MAX_PART_DIGESTS, exclude_if=lambda value: value is None)
    """What each active part added to the verified content (``cluster/values/part_digests.py``): when the parts changed,
    only parts not listed here are read again. Absent in records written without it, and for candidates of more
    than :data:`MAX_PART_DIGESTS` parts; then the whole candidate is read again (left out of the payload)."""
    published_uuid: UuidText | None = None
    predecessor_absent: bool = False

    @model_validator(mode="after")
    def _observations_are_paired(self) -> Self:
        if (self.target_uuid is None) != (self.target_content_digest is None):
            raise ValueError("an existing baseline target records its content digest")
        if self.target_uuid is None and (self.target_schema_digest, self.target_parts_digest) != (None, None):
            raise ValueError("a baseline schema or parts digest is recorded only for an existing target")
        if (self.target_schema_digest is None) != (self.target_parts_digest is None):
            raise ValueError("a baseline target records its schema and parts digests together")
        if (self.row_count is None) != (self.content_digest is None):
            raise ValueError("a verified candidate records its row count and content digest together")
        if self.parts_digest is not None and self.content_digest is None:
            raise ValueError("a parts digest is recorded only with the verified content")
        if self.part_digests is not None and self.parts_digest is None:
            raise ValueError("part digests are recorded only with the parts digest of the verified content")
        return self


class PublishedMember(BaseModel):
    """What a COMPLETED predecessor published on one member, carried into its successor's record by the fence: the
    target's UUID (the predecessor's candidate), and the row count, content digest (with its version) and active
    parts that candidate was verified with. The successor's baseline reuses the digest only while the target still
    holds exactly that UUID and those parts (cluster/protocol/seal.py); otherwise it digests the target again."""

    model_config = MEMBER_CONFIG

    member_id: MemberId
    target_uuid: UuidText
    row_count: NonNegative
    content_digest: Hex64
    digest_version: ContentDigestVersion
    parts_digest: Hex64

    @field_validator("digest_version", mode="before")
    @classmethod
    def _digest_version_of_this_build(cls, value: Any) -> Any:
        require_digest_version(value, "predecessor")
        return value

    part_digests: PartDigests = Field(default=None, max_length=MAX_PART_DIGESTS, exclude_if=lambda value: value is None)
    """The verified candidate's part facts, when recorded: a successor whose target's parts changed since (a
    merge) reads only the parts not listed. Left out of the payload when absent."""


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


class GenerationRecord(AuthorityCore):
    """The shared shape of both publication records (field names are the payload keys; ``schema`` names the version).

    ``previous_schema``/``previous_operation_id`` name the terminal record this one succeeded by a versioned CAS
    (they cross modes on a mode migration). Subclasses add the candidate state and say when members are staged.
    """

    candidate_name: StrictStr
    previous_schema: StrictStr | None = None
    previous_operation_id: StrictStr | None = None
    artifact: ArtifactReceipt | None = None
    schema_digest: Hex64 | None = None
    generation_id: Hex64 | None = None
    baseline: Literal["absent", "existing"] | None = None
    members: tuple[MemberGeneration, ...] = Field(min_length=2)
    publication: DdlBinding | None = None
    cleanup: DdlBinding | None = None
    created_at_ms: TimestampMs
    updated_at_ms: TimestampMs
    committed_at_ms: TimestampMs | None = None
    last_error: ErrorClassification | None = None
    voided: tuple[VoidedPermit, ...] = Field(
        default=(), max_length=MAX_VOIDED_PERMITS, exclude_if=lambda value: not value
    )
    """Permits voided by the explicit operator action, oldest first, each with its proof. Left out of the payload
    while empty, so a record written without it re-encodes to its own bytes."""
    predecessor: tuple[PublishedMember, ...] = Field(default=(), exclude_if=lambda value: not value)
    """The COMPLETED predecessor's published facts (members it verified with a parts digest), ordered by member id.
    Left out of the payload while empty (no predecessor, or a record written without them), so such a record
    re-encodes to its own bytes and its baseline is digested."""
    release: Release | None = Field(default=None, exclude_if=lambda value: value is None)
    """The operator's recorded release of a publication stopped after its swap (exactly in RELEASED). Left out of
    the payload while absent, so a record written without it re-encodes to its own bytes."""

    def members_staged(self) -> bool:
        """Whether every member holds its verified candidate (what STAGED and later phases require)."""
        raise NotImplementedError

    def reader_fenced(self, now_ms: int) -> bool:
        """Whether an unexpired quality-replay reader fence keeps successors out (only a record that carries the
        capsule can hold one)."""
        del now_ms
        return False

    @model_validator(mode="after")
    def _phase_invariants(self) -> Self:
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
            if not self.members_staged():
                raise ValueError(f"{phase} requires every member staged")
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
        carried = [member.member_id for member in self.predecessor]
        if carried != sorted(set(carried)) or (carried and self.previous_operation_id is None):
            raise ValueError("predecessor facts are unique, ordered by member_id, and name a previous operation")
        if self.publication is not None and self.publication.epoch > self.dispatch_epoch:
            raise ValueError("a bound epoch cannot exceed the dispatch epoch")
        if (phase is Phase.RELEASED) != (self.release is not None):
            raise ValueError("RELEASED, and only it, records the release")
        if self.release is not None:
            self._release_matches_members(self.release)
        return self

    def _release_matches_members(self, release: Release) -> None:
        """Each member as the decision says: restored, the pre-publication pair (nothing published); accepted, the
        post-publication pair (its candidate published)."""
        if tuple(member.member_id for member in release.members) != self.member_ids():
            raise ValueError("the release observes every member, in member order")
        if self.publication is None or release.publication_epoch != self.publication.epoch:
            raise ValueError("the release names the bound publication's epoch")
        for member, seen in zip(self.members, release.members, strict=True):
            expected: tuple[str | None, str | None, str | None]
            if release.decision == "restored":
                expected = (member.target_uuid, member.candidate_uuid, None)
            else:
                expected = (member.candidate_uuid, member.target_uuid, member.candidate_uuid)
            if (seen.target_uuid, seen.candidate_uuid, member.published_uuid) != expected:
                raise ValueError(f"{release.decision}: a member's tables are not as the decision says")

    def published(self) -> tuple[PublishedMember, ...]:
        """What this record leaves published on each member, for a successor's baseline: a COMPLETED record's
        verified candidates (only members verified with a parts digest: without one, a digest cannot be reused); an
        ABORTED one never published, so what its own predecessor published; nothing otherwise (a RELEASED one's
        target was observed by its release, not verified as an artifact: a successor digests it again)."""
        if self.phase is Phase.ABORTED:
            return self.predecessor
        if self.phase is not Phase.COMPLETED or self.artifact is None:
            return ()
        return tuple(
            PublishedMember(
                member_id=member.member_id,
                target_uuid=member.candidate_uuid,
                row_count=member.row_count,
                content_digest=member.content_digest,
                digest_version=self.artifact.content_digest_version,
                parts_digest=member.parts_digest,
                part_digests=member.part_digests,
            )
            for member in self.members
            if member.candidate_uuid is not None
            and member.row_count is not None
            and member.content_digest is not None
            and member.parts_digest is not None
        )

    def member_ids(self) -> tuple[str, ...]:
        return tuple(member.member_id for member in self.members)

    def member(self, member_id: str) -> MemberGeneration:
        for member in self.members:
            if member.member_id == member_id:
                return member
        raise KeyError(member_id)

    def evolve(self, **changes: Any) -> Self:
        """A validated copy with ``changes`` applied (``model_copy`` would skip the invariants)."""
        data = {name: getattr(self, name) for name in type(self).model_fields}
        data.update(changes)
        return type(self).model_validate(data)
