"""The external publication receipt ``dpone.clickhouse.cluster-external-full-refresh-receipt.v1``.

A receipt is what a task hands to humans and downstream tasks (XCom, logs): redacted by construction. It names the
operation, generation, digests, counts, phases and opaque member ids, and the authority version it was derived from,
so anyone can re-read the authority to check it. It never contains hosts, SQL, paths, physical UUIDs or row values,
and a downstream task never trusts it instead of the authority.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from airflow_provider_dpone.contracts.authority_external import ExternalAuthorityRecord
from airflow_provider_dpone.contracts.authority_fields import Hex64, MemberId, NonNegative, TimestampMs, UInt64
from airflow_provider_dpone.contracts.authority_phases import Phase
from airflow_provider_dpone.contracts.canonical import canonical_json
from airflow_provider_dpone.contracts.errors import DponeError

RECEIPT_SCHEMA: Literal["dpone.clickhouse.cluster-external-full-refresh-receipt.v1"] = (
    "dpone.clickhouse.cluster-external-full-refresh-receipt.v1"
)

ReceiptPhase = Literal["COMMITTED", "CLEANUP_DISPATCHING", "COMPLETED"]
_RECEIPT_PHASES: dict[Phase, ReceiptPhase] = {
    Phase.COMMITTED: "COMMITTED",
    Phase.CLEANUP_DISPATCHING: "CLEANUP_DISPATCHING",
    Phase.COMPLETED: "COMPLETED",
}
_COMMITTED_OR_LATER = frozenset(_RECEIPT_PHASES)
_CONFIG = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True)


class MemberReceipt(BaseModel):
    model_config = _CONFIG

    member_id: MemberId
    row_count: NonNegative
    content_digest: Hex64
    rebuilds: NonNegative
    predecessor_absent: bool


class ExternalPublicationReceipt(BaseModel):
    model_config = _CONFIG

    schema_: Literal["dpone.clickhouse.cluster-external-full-refresh-receipt.v1"] = Field(
        default=RECEIPT_SCHEMA, alias="schema"
    )
    replication_mode: Literal["external"] = "external"
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
    members: tuple[MemberReceipt, ...]
    committed_at_ms: TimestampMs

    def to_json(self) -> str:
        return canonical_json(self.model_dump(mode="json", by_alias=True))


def build_receipt(record: ExternalAuthorityRecord, version: int) -> ExternalPublicationReceipt:
    """The receipt of a committed record (COMMITTED, CLEANUP_DISPATCHING or COMPLETED); anything else is refused."""
    publication = record.publication
    artifact = record.artifact
    if (
        record.phase not in _COMMITTED_OR_LATER
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
    members = []
    for member in record.members:
        if member.content_digest != artifact.content_digest or member.row_count != artifact.row_count:
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_RECEIPT_INVALID", f"member {member.member_id} differs")
        members.append(
            MemberReceipt(
                member_id=member.member_id,
                row_count=member.row_count,
                content_digest=member.content_digest,
                rebuilds=member.rebuilds,
                predecessor_absent=member.predecessor_absent,
            )
        )
    return ExternalPublicationReceipt(
        target_key=record.target_key,
        operation_id=record.operation_id,
        generation_id=record.generation_id,
        phase=_RECEIPT_PHASES[record.phase],
        authority_version=version,
        inventory_digest=record.inventory_digest,
        normalized_plan_digest=record.normalized_plan_digest,
        artifact_sha256=artifact.sha256,
        artifact_bytes=artifact.byte_size,
        row_count=artifact.row_count,
        schema_digest=record.schema_digest,
        content_digest=artifact.content_digest,
        baseline=record.baseline,
        publication_kind="exchange" if publication.kind == "exchange" else "rename",
        publication_query_digest=publication.query_digest,
        dispatch_epoch=publication.epoch,
        members=tuple(members),
        committed_at_ms=record.committed_at_ms,
    )
