"""What each entry point returns to its Airflow task, the same types in both replication modes: identifiers, phases
(before and after the call), per-member progress, receipts and what to poll; never state a later task would trust
instead of re-reading the authority.

The phases and the progress come from the records the entry point read and wrote anyway, so a task logs and pushes
them without reading a port itself. ``phase_before`` is ``"absent"`` when no record held the target. Members are
named by opaque id and by their position in the inventory the record bound
(:meth:`~airflow_provider_dpone.cluster.values.inventory.AdmittedInventory.positions`; never a host).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.inventory import Position, member_label
from airflow_provider_dpone.cluster.values.publication_receipts import (
    PublicationReceipt,
    QualityReceipt,
    quality_receipt,
)
from airflow_provider_dpone.cluster.values.receipts import ArtifactReceipt
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode

ABSENT = "absent"
"""The phase of a target no record holds."""


def phase_of(record: AuthorityRecord | None) -> str:
    return ABSENT if record is None else record.phase.value


@dataclass(frozen=True)
class MemberProgress:
    """One member's stage, verified rows (``None`` until verified) and candidate rebuilds, by opaque id and bound
    position (``None``: the live inventory is not the bound one); the mode derives it:
    :attr:`~airflow_provider_dpone.cluster.protocol.mode.ModeBehaviour.progress`."""

    member_id: str
    shard_num: int | None
    replica_num: int | None
    stage: str
    row_count: int | None
    rebuilds: int

    @property
    def label(self) -> str:
        return member_label(self.member_id, self.shard_num, self.replica_num)


def member_progress(
    member_id: str, positions: Mapping[str, Position], stage: str, row_count: int | None, rebuilds: int
) -> MemberProgress:
    """``member_id``'s progress, with its position in ``positions`` (the bound inventory's; absent: ``None``)."""
    shard_num, replica_num = positions.get(member_id, (None, None))
    return MemberProgress(member_id, shard_num, replica_num, stage, row_count, rebuilds)


def capsule_of(record: AuthorityRecord) -> QualityReceipt | None:
    """The quality-replay capsule a v2 record holds, as humans see it."""
    return None if record.quality is None else quality_receipt(record.quality)


@dataclass(frozen=True)
class FenceResult:
    operation_id: str
    target_key: str
    phase: str
    candidate_name: str
    replication_mode: ReplicationMode
    phase_before: str


@dataclass(frozen=True)
class StageResult:
    """``ready_members``: members whose candidate holds exactly the artifact (internal mode: replicas converged).

    ``schema`` is the record's schema id; ``artifact`` the bound artifact; ``members`` each member's progress;
    ``load_member_id`` (internal mode) the replica the one load went through, the others received it by replication.
    ``quality``: the durable quality-replay capsule of a v2 record, as humans see it (``None`` without one).
    """

    operation_id: str
    phase: str
    generation_id: str | None
    ready_members: int
    replication_mode: ReplicationMode
    phase_before: str
    schema: str
    artifact: ArtifactReceipt | None
    members: tuple[MemberProgress, ...]
    load_member_id: str | None
    quality: QualityReceipt | None = None


@dataclass(frozen=True)
class InProgress:
    """The bound DDL is not finished: poll ``correlation_token`` (and ``entry`` once known) again later.

    Nothing is ever re-dispatched: a poll and a retry of the dispatching task both only reconcile the bound entry.
    ``member_count``: the members the entry must finish on; ``positions``: each bound member's position by id.
    """

    operation_id: str
    stage: Literal["publication", "cleanup"]
    epoch: int
    correlation_token: str | None
    entry: str | None
    pending_members: tuple[str, ...]
    phase_before: str
    phase: str
    member_count: int
    positions: Mapping[str, Position]

    @property
    def pending_labels(self) -> tuple[str, ...]:
        return tuple(member_label(member, *self.positions.get(member, (None, None))) for member in self.pending_members)


@dataclass(frozen=True)
class Committed:
    """The publication is committed; ``receipt.phase`` is the record's phase (COMMITTED, or later once cleanup has
    begun)."""

    receipt: PublicationReceipt
    phase_before: str

    @property
    def phase(self) -> str:
        return self.receipt.phase


@dataclass(frozen=True)
class Completed:
    receipt: PublicationReceipt
    phase_before: str

    @property
    def phase(self) -> str:
        return self.receipt.phase


@dataclass(frozen=True)
class Aborted:
    operation_id: str
    phase: str
    phase_before: str


PublishResult = InProgress | Committed
CleanupResult = InProgress | Completed


@dataclass(frozen=True)
class Voided:
    """An explicitly voided dispatch permit: which step, its epoch and token, and the pinned coordinator server and
    start time that proved it dead; ``phase`` is the phase the operation returned to (its step is dispatched again from there)."""

    operation_id: str
    step: str
    epoch: int
    correlation_token: str
    server_started_at_ms: int
    server_uuid: str
    """The pinned server (or its replacement) whose restart proved it."""
    phase_before: str
    phase: str


@dataclass(frozen=True)
class Released:
    """A publication stopped after its swap, released by the operator's decision (``restored`` or ``accepted``):
    the failure it stopped with, the content digest each member's target held (``None`` where absent), by opaque
    member id, and, for ``accepted``, the declared row count."""

    operation_id: str
    decision: str
    stopped_by: str
    accepted_row_count: int | None
    target_digests: dict[str, str | None]
    phase_before: str
    phase: str
