"""The publication receipts: ``dpone.clickhouse.cluster-external-full-refresh-receipt.v1`` (external record) and
``dpone.clickhouse.cluster-full-refresh-receipt.v1`` (internal replicated record v1), ``...-receipt.v2`` (internal
record v2: the same fields plus the quality-replay capsule's state).

A receipt is what a task hands to humans and downstream tasks (XCom, logs): redacted by construction. It names the
operation, generation, digests, counts, phases and opaque member ids with their positions (``shard_num``,
``replica_num``) in the inventory the record bound, and the authority version it was derived from,
so anyone can re-read the authority to check it. It never contains hosts, SQL, paths, physical UUIDs or row values,
and a downstream task never trusts it instead of the authority. Each record version has its own receipt schema; both
are built from a committed record (:func:`external_receipt`, :func:`internal_receipt`; the replication mode names its
builder), and only from one whose every member verified exactly the artifact's rows and content. A publish receipt
also carries ``after_commit`` (:class:`AfterCommit`): every member's target as observed again after the COMMITTED
write, in counts and digests (:mod:`~airflow_provider_dpone.cluster.protocol.after_commit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.external import ExternalAuthorityRecord
from airflow_provider_dpone.cluster.values.authority.internal import InternalAuthorityRecord, InternalAuthorityRecordV2
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.cluster.values.inventory import Position, member_label
from airflow_provider_dpone.cluster.values.quality_capsule import CapsuleState, QualityBinding
from airflow_provider_dpone.cluster.values.quality_read import ColumnCounts
from airflow_provider_dpone.core.canonical import Hex64, MemberId, NonNegative, TimestampMs, UInt64, canonical_json
from airflow_provider_dpone.core.errors import DponeError

RECEIPT_SCHEMA: Literal["dpone.clickhouse.cluster-external-full-refresh-receipt.v1"] = (
    "dpone.clickhouse.cluster-external-full-refresh-receipt.v1"
)
INTERNAL_RECEIPT_SCHEMA: Literal["dpone.clickhouse.cluster-full-refresh-receipt.v1"] = (
    "dpone.clickhouse.cluster-full-refresh-receipt.v1"
)
INTERNAL_RECEIPT_SCHEMA_V2: Literal["dpone.clickhouse.cluster-full-refresh-receipt.v2"] = (
    "dpone.clickhouse.cluster-full-refresh-receipt.v2"
)

ReceiptPhase = Literal["COMMITTED", "CLEANUP_DISPATCHING", "COMPLETED"]
_RECEIPT_PHASES: dict[Phase, ReceiptPhase] = {
    Phase.COMMITTED: "COMMITTED",
    Phase.CLEANUP_DISPATCHING: "CLEANUP_DISPATCHING",
    Phase.COMPLETED: "COMPLETED",
}
_CONFIG = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True)


class ReplicaReceipt(BaseModel):
    """One member's verified generation (internal mode: one replica of the shared candidate), with its position in
    the inventory the record bound (``None``: the live inventory is not that one, so no position is proven)."""

    model_config = _CONFIG

    member_id: MemberId
    shard_num: PositiveInt | None
    replica_num: PositiveInt | None
    row_count: NonNegative
    content_digest: Hex64
    predecessor_absent: bool

    @property
    def label(self) -> str:
        """The member's one name (:func:`~airflow_provider_dpone.cluster.values.inventory.member_label`)."""
        return member_label(self.member_id, self.shard_num, self.replica_num)


class MemberReceipt(ReplicaReceipt):
    """One external member: its own candidate, so its own rebuild count."""

    rebuilds: NonNegative


class MemberLook(BaseModel):
    """One member's published target as observed after the COMMITTED write: whether it still holds exactly the
    committed generation, and what it holds (counts and digests only; ``None`` where the server gave none)."""

    model_config = _CONFIG

    member_id: MemberId
    matched: bool
    same_table: bool
    """The target is still the committed table (its UUID, never shown)."""
    schema_matched: bool
    row_count: NonNegative | None
    content_digest: Hex64 | None


class AfterCommit(BaseModel):
    """Every member's published target observed once more after the COMMITTED write (the publish task's look);
    ``matched`` only when every member still holds exactly the committed generation."""

    model_config = _CONFIG

    observed_at_ms: TimestampMs
    matched: bool
    members: tuple[MemberLook, ...]

    @model_validator(mode="after")
    def _every_member(self) -> AfterCommit:
        if self.matched != all(member.matched for member in self.members) or not self.members:
            raise ValueError("after_commit.matched is every member's verdict")
        return self


class _ReceiptFields(BaseModel):
    model_config = _CONFIG

    target_key: Hex64
    operation_id: Hex64
    generation_id: Hex64
    phase: ReceiptPhase
    authority_version: UInt64
    inventory_digest: Hex64
    normalized_plan_digest: Hex64
    artifact_sha256: Hex64
    artifact_bytes: NonNegative
    row_count: NonNegative
    schema_digest: Hex64
    content_digest: Hex64
    baseline: Literal["absent", "existing"]
    publication_kind: Literal["exchange", "rename"]
    publication_query_digest: Hex64
    dispatch_epoch: UInt64
    committed_at_ms: TimestampMs
    after_commit: AfterCommit | None = None
    """The publish task's look after the COMMITTED write; ``None`` where none was taken (a cleanup receipt, or a
    record already past COMMITTED)."""

    def to_json(self) -> str:
        return canonical_json(self.model_dump(mode="json", by_alias=True))


class ExternalPublicationReceipt(_ReceiptFields):
    schema_: Literal["dpone.clickhouse.cluster-external-full-refresh-receipt.v1"] = Field(
        default=RECEIPT_SCHEMA, alias="schema"
    )
    replication_mode: Literal["external"] = "external"
    members: tuple[MemberReceipt, ...]


class InternalPublicationReceipt(_ReceiptFields):
    """The internal receipt: one replicated candidate, loaded once through ``load_member_id``, rebuilt ``rebuilds``
    times, verified on every replica."""

    schema_: Literal["dpone.clickhouse.cluster-full-refresh-receipt.v1"] = Field(
        default=INTERNAL_RECEIPT_SCHEMA, alias="schema"
    )
    replication_mode: Literal["internal"] = "internal"
    load_member_id: MemberId
    rebuilds: NonNegative
    members: tuple[ReplicaReceipt, ...]


class QualityReceipt(BaseModel):
    """The capsule as humans see it: schema, state, digests, counts and versions; never rows or hosts."""

    model_config = _CONFIG

    schema_: Literal["dpone.quality.replay.v1", "dpone.quality.replay.v2"] = Field(alias="schema")
    state: CapsuleState
    core_digest: Hex64
    policy_identity: Hex64
    gates: tuple[tuple[str, bool], ...]
    completion_version: UInt64 | None
    target_member_id: MemberId | None
    target_row_count: NonNegative | None
    target_columns: tuple[ColumnCounts, ...] = ()
    """The target's null and distinct counts per selected column (column names and counts, never values)."""


class InternalPublicationReceiptV2(InternalPublicationReceipt):
    """The receipt of a v2 record: the v1 receipt plus its quality-replay capsule (``None`` if it holds none)."""

    schema_: Literal["dpone.clickhouse.cluster-full-refresh-receipt.v2"] = Field(  # type: ignore[assignment]
        default=INTERNAL_RECEIPT_SCHEMA_V2, alias="schema"
    )
    quality: QualityReceipt | None


PublicationReceipt = ExternalPublicationReceipt | InternalPublicationReceipt | InternalPublicationReceiptV2


def quality_receipt(binding: QualityBinding) -> QualityReceipt:
    target = binding.target
    return QualityReceipt(
        schema=binding.core.schema_,
        state=binding.state,
        core_digest=binding.core_digest,
        policy_identity=binding.core.policy_identity,
        gates=tuple((gate.name, gate.passed) for gate in binding.core.report),
        completion_version=binding.completion_version,
        target_member_id=None if target is None else target.member_id,
        target_row_count=None if target is None else target.row_count,
        target_columns=() if target is None else target.columns,
    )


def external_receipt(
    record: ExternalAuthorityRecord, version: int, positions: Mapping[str, Position]
) -> ExternalPublicationReceipt:
    """The receipt of a committed external record: every member with its own rebuild count."""
    fields, replicas = _committed(record, version, positions)
    members = tuple(
        MemberReceipt(**replica.model_dump(), rebuilds=member.rebuilds)
        for replica, member in zip(replicas, record.members, strict=True)
    )
    return ExternalPublicationReceipt(**fields, members=members)


def internal_receipt(
    record: InternalAuthorityRecord, version: int, positions: Mapping[str, Position]
) -> InternalPublicationReceipt | InternalPublicationReceiptV2:
    """The receipt of a committed internal record: the v1 receipt, or for a v2 record the v2 receipt with its
    capsule."""
    fields, replicas = _committed(record, version, positions)
    candidate = record.candidate
    if candidate is None or candidate.load is None:  # excluded by the record invariants once committed
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_RECEIPT_INVALID", "committed without a loaded candidate")
    internal = {**fields, "load_member_id": candidate.load.member_id, "rebuilds": candidate.rebuilds}
    if isinstance(record, InternalAuthorityRecordV2):  # the record version (v2 adds the capsule), not the mode
        quality = None if record.quality is None else quality_receipt(record.quality)
        return InternalPublicationReceiptV2(**internal, members=replicas, quality=quality)
    return InternalPublicationReceipt(**internal, members=replicas)


def _committed(
    record: AuthorityRecord, version: int, positions: Mapping[str, Position]
) -> tuple[dict[str, Any], tuple[ReplicaReceipt, ...]]:
    """The fields every receipt shares and each member's verified generation, from a committed record (COMMITTED,
    CLEANUP_DISPATCHING or COMPLETED), each member with its position in ``positions`` (the bound inventory's,
    :meth:`~airflow_provider_dpone.cluster.values.inventory.AdmittedInventory.positions`); anything else is refused."""
    publication = record.publication
    artifact = record.artifact
    if (
        record.phase not in _RECEIPT_PHASES
        or publication is None
        or publication.kind not in ("exchange", "rename")
        or publication.query_digest is None
        or artifact is None
        or record.generation_id is None
        or record.baseline is None
        or record.schema_digest is None
        or record.committed_at_ms is None
    ):
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_RECEIPT_INVALID", f"phase {record.phase} has no commit receipt")
    replicas = []
    for member in record.members:
        shard_num, replica_num = positions.get(member.member_id, (None, None))
        if member.content_digest != artifact.content_digest or member.row_count != artifact.row_count:
            label = member_label(member.member_id, shard_num, replica_num)
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_RECEIPT_INVALID", f"member {label} differs")
        replicas.append(
            ReplicaReceipt(
                member_id=member.member_id,
                shard_num=shard_num,
                replica_num=replica_num,
                row_count=member.row_count,
                content_digest=member.content_digest,
                predecessor_absent=member.predecessor_absent,
            )
        )
    fields: dict[str, Any] = {
        "target_key": record.target_key,
        "operation_id": record.operation_id,
        "generation_id": record.generation_id,
        "phase": _RECEIPT_PHASES[record.phase],
        "authority_version": version,
        "inventory_digest": record.inventory_digest,
        "normalized_plan_digest": record.normalized_plan_digest,
        "artifact_sha256": artifact.sha256,
        "artifact_bytes": artifact.byte_size,
        "row_count": artifact.row_count,
        "schema_digest": record.schema_digest,
        "content_digest": artifact.content_digest,
        "baseline": record.baseline,
        "publication_kind": "exchange" if publication.kind == "exchange" else "rename",
        "publication_query_digest": publication.query_digest,
        "dispatch_epoch": publication.epoch,
        "committed_at_ms": record.committed_at_ms,
    }
    return fields, tuple(replicas)
