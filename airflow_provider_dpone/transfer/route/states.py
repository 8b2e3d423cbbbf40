"""Fold the journal into invocation views and the route state of the transfer state diagram.

The fold enforces record order (a chunk after its plan, contiguous ordinals, target records only after
stage-complete, one outstanding publication at a time, ...). An impossible order is corruption and fails closed; it
is never "repaired" by guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.values.chunk import ChunkReceipt, NativeChunkPlan, NativeStageComplete
from airflow_provider_dpone.transfer.values.journal_records import (
    InvocationSettled,
    JournalRecord,
    LeaseRecord,
    PublishAbsent,
    Published,
    PublishIntent,
    Succeeded,
    TargetCleaned,
    TargetPrepareIntent,
    TargetVerified,
)


class RouteState(StrEnum):
    PLANNED = "planned"
    EXTRACTING = "extracting"
    REEXTRACT_REQUIRED = "reextract_required"
    STAGE_COMPLETE = "stage_complete"
    PUBLISHING = "publishing"
    OUTCOME_UNKNOWN = "outcome_unknown"
    PUBLISHED = "published"
    SUCCEEDED = "succeeded"


@dataclass
class InvocationView:
    plan: NativeChunkPlan
    receipts: list[ChunkReceipt] = field(default_factory=list)
    stage_complete: NativeStageComplete | None = None
    settled: InvocationSettled | None = None
    prepares: list[TargetPrepareIntent] = field(default_factory=list)
    verified: dict[int, TargetVerified] = field(default_factory=dict)
    cleaned: set[int] = field(default_factory=set)
    publish_intents: list[PublishIntent] = field(default_factory=list)
    absent: set[int] = field(default_factory=set)
    published: Published | None = None
    succeeded: Succeeded | None = None

    @property
    def invocation_id(self) -> str:
        return self.plan.invocation_id

    @property
    def attempt(self) -> int:
        """The current target attempt (0 before the first prepare intent)."""
        return len(self.prepares)

    @property
    def pending_publication(self) -> PublishIntent | None:
        """The publish intent whose outcome is not recorded yet (an unknown commit)."""
        if self.publish_intents and self.published is None:
            last = self.publish_intents[-1]
            if last.attempt not in self.absent:
                return last
        return None

    def state(self) -> RouteState:
        if self.succeeded is not None:
            return RouteState.SUCCEEDED
        if self.settled is not None:
            return RouteState.REEXTRACT_REQUIRED
        if self.stage_complete is None:
            return RouteState.EXTRACTING
        if self.published is not None:
            return RouteState.PUBLISHED
        if self.pending_publication is not None:
            return RouteState.OUTCOME_UNKNOWN
        return RouteState.PUBLISHING if self.prepares else RouteState.STAGE_COMPLETE


def _corrupt(detail: str) -> DponeError:
    return DponeError("native_transfer.journal_corrupt", detail)


def apply_record(view: InvocationView, body: object, kind: str) -> None:
    if view.succeeded is not None or view.settled is not None:
        raise _corrupt(f"{kind} after the invocation ended")
    if isinstance(body, ChunkReceipt):
        if view.stage_complete is not None or body.ordinal != len(view.receipts):
            raise _corrupt("chunk receipt out of order")
        if body.invocation_id != view.invocation_id:
            raise _corrupt("chunk receipt of another invocation")
        view.receipts.append(body)
    elif isinstance(body, NativeStageComplete):
        if view.stage_complete is not None or body.invocation_id != view.invocation_id:
            raise _corrupt("stage-complete repeated or of another invocation")
        view.stage_complete = body
    elif isinstance(body, InvocationSettled):
        if view.stage_complete is not None or view.prepares or body.invocation_id != view.invocation_id:
            raise _corrupt("a sealed invocation cannot be settled for re-extraction")
        view.settled = body
    elif view.stage_complete is None:
        raise _corrupt(f"{kind} before stage-complete")
    else:
        _apply_target(view, body, kind)


def _apply_target(view: InvocationView, body: object, kind: str) -> None:
    if isinstance(body, Published):
        if view.pending_publication is None:
            raise _corrupt("published without a pending publish intent")
        view.published = body
        return
    if isinstance(body, Succeeded):
        if view.published is None or body.invocation_id != view.invocation_id:
            raise _corrupt("succeeded before publication")
        view.succeeded = body
        return
    if not isinstance(body, TargetPrepareIntent | TargetVerified | TargetCleaned | PublishIntent | PublishAbsent):
        raise _corrupt(f"unexpected {kind} record")
    if body.invocation_id != view.invocation_id:
        raise _corrupt(f"{kind} of another invocation")
    if view.published is not None:
        raise _corrupt(f"{kind} after publication")
    pending = view.pending_publication
    if isinstance(body, TargetPrepareIntent):
        if pending is not None or body.attempt != view.attempt + 1:
            raise _corrupt("prepare intent out of order or while a publication outcome is unknown")
        view.prepares.append(body)
        return
    if body.attempt != view.attempt or view.attempt == 0:
        raise _corrupt(f"{kind} for an attempt that is not current")
    if isinstance(body, TargetVerified | TargetCleaned):
        if body.attempt in view.cleaned or pending is not None:
            raise _corrupt(f"{kind} after cleanup or during publication")
        if isinstance(body, TargetVerified):
            if body.attempt in view.verified:
                raise _corrupt("attempt verified twice")
            view.verified[body.attempt] = body
        else:
            view.cleaned.add(body.attempt)
    elif isinstance(body, PublishIntent):
        if body.attempt not in view.verified or body.attempt in view.cleaned or pending is not None:
            raise _corrupt("publish intent for an unverified attempt or while one is outstanding")
        if any(intent.attempt == body.attempt for intent in view.publish_intents):
            raise _corrupt("second publish intent in one attempt")
        view.publish_intents.append(body)
    else:
        if pending is None or pending.attempt != body.attempt:
            raise _corrupt("publish-absent without its publish intent")
        view.absent.add(body.attempt)


def fold(records: list[JournalRecord]) -> list[InvocationView]:
    """Invocation views in order; only the last one may be unfinished."""
    views: list[InvocationView] = []
    for record in records:
        body = record.body
        if isinstance(body, LeaseRecord):
            continue
        if isinstance(body, NativeChunkPlan):
            if views and views[-1].settled is None:
                raise _corrupt("a new plan while the previous invocation is not settled")
            if views and body.operation_id != views[-1].plan.operation_id:
                raise _corrupt("plan of another operation")
            views.append(InvocationView(plan=body))
            continue
        if not views:
            raise _corrupt(f"{record.kind} before any plan")
        apply_record(views[-1], body, record.kind)
    return views
