"""What each entry point returns to its Airflow task, the same types in both replication modes: identifiers, phases,
receipts and what to poll; never state a later task would trust instead of re-reading the authority."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from airflow_provider_dpone.contracts.inventory import ReplicationMode
from airflow_provider_dpone.contracts.receipts_publication import PublicationReceipt


@dataclass(frozen=True)
class FenceResult:
    operation_id: str
    target_key: str
    phase: str
    candidate_name: str
    replication_mode: ReplicationMode


@dataclass(frozen=True)
class StageResult:
    """``ready_members``: members whose candidate holds exactly the artifact (internal mode: replicas converged)."""

    operation_id: str
    phase: str
    generation_id: str | None
    ready_members: int
    replication_mode: ReplicationMode


@dataclass(frozen=True)
class InProgress:
    """The bound DDL is not finished: poll ``correlation_token`` (and ``entry`` once known) again later.

    Nothing is ever re-dispatched: a poll and a retry of the dispatching task both only reconcile the bound entry.
    """

    operation_id: str
    stage: Literal["publication", "cleanup"]
    epoch: int
    correlation_token: str | None
    entry: str | None
    pending_members: tuple[str, ...]


@dataclass(frozen=True)
class Committed:
    receipt: PublicationReceipt


@dataclass(frozen=True)
class Completed:
    receipt: PublicationReceipt


@dataclass(frozen=True)
class Aborted:
    operation_id: str
    phase: str


PublishResult = InProgress | Committed
CleanupResult = InProgress | Completed
