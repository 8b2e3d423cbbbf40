"""What each entry point returns to its Airflow task: identifiers, phases, receipts and what to poll; never state a
later task would trust instead of re-reading the authority."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from airflow_provider_dpone.contracts.receipts_publication import ExternalPublicationReceipt


@dataclass(frozen=True)
class FenceResult:
    operation_id: str
    target_key: str
    phase: str
    candidate_name: str


@dataclass(frozen=True)
class StageResult:
    operation_id: str
    phase: str
    generation_id: str | None
    ready_members: int


@dataclass(frozen=True)
class InProgress:
    """The bound DDL is not finished: poll ``correlation_token`` (and ``entry`` once known) again later.

    ``redispatch_due`` means the bound permit was proven void (it never reached the queue); the dispatching task (not a
    read-only poller) takes a new permit on its next run.
    """

    operation_id: str
    stage: Literal["publication", "cleanup"]
    epoch: int
    correlation_token: str | None
    entry: str | None
    pending_members: tuple[str, ...]
    redispatch_due: bool = False


@dataclass(frozen=True)
class Committed:
    receipt: ExternalPublicationReceipt


@dataclass(frozen=True)
class Completed:
    receipt: ExternalPublicationReceipt


@dataclass(frozen=True)
class Aborted:
    operation_id: str
    phase: str


PublishResult = InProgress | Committed
CleanupResult = InProgress | Completed
