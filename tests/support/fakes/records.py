"""Builders of valid authority records in every phase (for codec, receipt and fencing tests)."""

from __future__ import annotations

from typing import TypeVar

from airflow_provider_dpone.cluster.values.authority.external import ExternalAuthorityRecord, MemberRecord
from airflow_provider_dpone.cluster.values.authority.generation import (
    DdlBinding,
    DdlKind,
    ErrorClassification,
    GenerationRecord,
    MemberGeneration,
    ServerName,
)
from airflow_provider_dpone.cluster.values.authority.internal import (
    InternalAuthorityRecordV1,
    InternalAuthorityRecordV2,
    LoadBinding,
    ReplicatedCandidate,
)
from airflow_provider_dpone.cluster.values.authority.phases import MemberStage, Phase
from airflow_provider_dpone.cluster.values.authority.release import Release, ReleasedMember
from airflow_provider_dpone.cluster.values.identities import (
    INTERNAL_CANDIDATE_INFIX,
    candidate_name,
    member_id,
    target_key,
)
from airflow_provider_dpone.cluster.values.quality_capsule import (
    QUALITY_SCHEMA_V2,
    AcceptancePlan,
    CapsuleState,
    GateResult,
    QualityBinding,
    QualityCore,
    TargetObservation,
)
from airflow_provider_dpone.cluster.values.quality_read import ColumnCounts, TargetCounts
from airflow_provider_dpone.cluster.values.receipts import CURRENT_CONTENT_DIGEST, ArtifactColumn, ArtifactReceipt

TARGET_KEY = target_key("analytics", "analytics_db", "target_table")
OPERATION = "6c47dd41409baff80f32c405d93fcee5804c6b1b2b20a736707dfe8a4de6c3ce"
OTHER_OPERATION = "7" * 64
T0 = 1_790_000_000_000
R = TypeVar("R", bound=GenerationRecord)


def token(n: int) -> str:
    return f"{n:032x}"


def uuid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012x}"


SERVER = ServerName(server_uuid="00000000-0000-4000-8000-000000000900", host_digest="9" * 64)
"""The coordinator every fixture permit is pinned to."""


def permit(kind: DdlKind, epoch: int, n: int, digest: str, at_ms: int, entry: str | None = None) -> DdlBinding:
    """A dispatched permit pinned to :data:`SERVER`: correlation token ``token(n)``, query digest ``digest * 64``."""
    return DdlBinding(
        kind=kind,
        epoch=epoch,
        correlation_token=token(n),
        query_digest=digest * 64,
        permitted_at_ms=at_ms,
        server=SERVER,
        entry=entry,
    )


def artifact(rows: int = 3) -> ArtifactReceipt:
    return ArtifactReceipt(
        sha256="a" * 64,
        byte_size=100 + rows,
        row_count=rows,
        columns=(ArtifactColumn(name="id", type="UInt64"), ArtifactColumn(name="name", type="String")),
        content_digest="c" * 64,
        replayable=True,
        content_digest_version=CURRENT_CONTENT_DIGEST,
    )


_ORDER = [
    Phase.LOCKED,
    Phase.STAGING,
    Phase.STAGED,
    Phase.PUBLICATION_DISPATCHING,
    Phase.COMMITTED,
    Phase.CLEANUP_DISPATCHING,
    Phase.COMPLETED,
]


def _rank(phase: Phase) -> int:
    """How far along ``_ORDER`` a record in ``phase`` got (ABORTED from LOCKED, ABORTING from STAGED)."""
    return {Phase.ABORTED: 0, Phase.ABORTING: 2}.get(phase, _ORDER.index(phase) if phase in _ORDER else 0)


def released(record: R) -> R:
    """``record`` (PUBLICATION_DISPATCHING) stopped with ``PUBLISHED_CONTENT_DIVERGENT`` and released as restored."""
    assert record.publication is not None
    code = "DPONE_CLICKHOUSE_CLUSTER_PUBLISHED_CONTENT_DIVERGENT"
    seen = tuple(
        ReleasedMember(
            member_id=member.member_id,
            target_uuid=member.target_uuid,
            candidate_uuid=member.candidate_uuid,
            row_count=member.target_row_count,
            content_digest=member.target_content_digest,
        )
        for member in record.members
    )
    release = Release(
        decision="restored",
        stopped_by=code,
        publication_epoch=record.publication.epoch,
        members=seen,
        released_at_ms=T0 + 40,
    )
    stopped = ErrorClassification(code=code, phase=Phase.PUBLICATION_DISPATCHING, at_ms=T0 + 35)
    return record.evolve(phase=Phase.RELEASED, release=release, last_error=stopped)


def external_record(
    phase: Phase = Phase.STAGED,
    *,
    members: int = 2,
    existing: bool = True,
    operation: str = OPERATION,
    version_seed: int = 1,
) -> ExternalAuthorityRecord:
    """A valid external record in ``phase`` (ABORTED is built from LOCKED, ABORTING from STAGED, RELEASED from
    PUBLICATION_DISPATCHING)."""
    if phase is Phase.RELEASED:
        dispatching = Phase.PUBLICATION_DISPATCHING
        options = {"members": members, "existing": existing, "operation": operation, "version_seed": version_seed}
        return released(external_record(dispatching, **options))  # type: ignore[arg-type]
    rank = _rank(phase)
    art = artifact()
    records = []
    for index, mid in enumerate(sorted(member_id(1, replica) for replica in range(1, members + 1))):
        member = MemberRecord(member_id=mid)
        if rank >= 1:
            member = MemberRecord(
                member_id=mid,
                target_uuid=uuid(100 + index) if existing else None,
                target_row_count=2 if existing else None,
                target_content_digest="d" * 64 if existing else None,
            )
        if rank >= 2:
            candidate = uuid(200 + index)
            member = member.model_copy(
                update={
                    "stage": MemberStage.READY,
                    "candidate_uuid_intent": candidate,
                    "candidate_uuid": candidate,
                    "owned_candidate_uuids": (candidate,),
                    "row_count": art.row_count,
                    "content_digest": art.content_digest,
                }
            )
        if rank >= 4:
            member = member.model_copy(update={"published_uuid": member.candidate_uuid})
        if rank >= 6:
            member = member.model_copy(update={"predecessor_absent": True})
        records.append(member)
    publication = None
    cleanup = None
    epoch = 0
    if rank >= 3:
        epoch = 1
        publication = permit(
            "exchange" if existing else "rename", 1, 9, "e", T0 + 10, "query-0000000001" if rank >= 4 else None
        )
    if rank >= 5:
        epoch = 2 if existing else 1
        cleanup = (
            permit("drop", 2, 10, "f", T0 + 20)
            if existing
            else DdlBinding(kind="none", epoch=1, correlation_token=None, query_digest=None, permitted_at_ms=T0 + 20)
        )
    return ExternalAuthorityRecord(
        target_key=TARGET_KEY,
        operation_id=operation,
        fence_token=token(1),
        phase=phase,
        dispatch_epoch=epoch,
        write_id=token(version_seed + 100),
        inventory_digest="9" * 64,
        normalized_plan_digest="5" * 64,
        candidate_name=candidate_name("target_table", operation),
        artifact=art if rank >= 1 else None,
        schema_digest=art.schema_digest if rank >= 1 else None,
        generation_id="4" * 64 if rank >= 1 else None,
        baseline=("existing" if existing else "absent") if rank >= 1 else None,
        members=tuple(records),
        publication=publication,
        cleanup=cleanup,
        created_at_ms=T0,
        updated_at_ms=T0 + 30,
        committed_at_ms=T0 + 15 if rank >= 4 else None,
    )


def internal_record(
    phase: Phase = Phase.STAGED,
    *,
    members: int = 2,
    existing: bool = True,
    operation: str = OTHER_OPERATION,
    quality: QualityBinding | None = None,
    v2: bool = False,
) -> InternalAuthorityRecordV1 | InternalAuthorityRecordV2:
    """A valid internal (replicated) record in ``phase`` (ABORTED is built from LOCKED); the replicas share one
    candidate UUID while each keeps its own baseline target UUID."""
    if phase is Phase.RELEASED:
        dispatching = Phase.PUBLICATION_DISPATCHING
        return released(
            internal_record(
                dispatching, members=members, existing=existing, operation=operation, quality=quality, v2=v2
            )
        )
    rank = _rank(phase)
    art = artifact()
    ids = sorted(member_id(1, replica) for replica in range(1, members + 1))
    shared = uuid(300)
    create = permit("create", 1, 11, "b", T0 + 5)
    candidate = None
    if rank >= 1:
        candidate = ReplicatedCandidate(stage=MemberStage.INTENDED, uuid_intent=shared, owned_uuids=(shared,))
    if rank >= 2:
        load = LoadBinding(
            member_id=ids[0], candidate_uuid=shared, query_id="dpone-load-" + "1" * 32, dedup_token="2" * 64
        )
        candidate = ReplicatedCandidate(
            stage=MemberStage.READY, uuid_intent=shared, owned_uuids=(shared,), create=create, load=load
        )
    records = []
    for index, mid in enumerate(ids):
        member = MemberGeneration(member_id=mid)
        if rank >= 1 and existing:
            member = MemberGeneration(
                member_id=mid, target_uuid=uuid(100 + index), target_row_count=2, target_content_digest="d" * 64
            )
        if rank >= 2:
            member = member.model_copy(
                update={"candidate_uuid": shared, "row_count": art.row_count, "content_digest": art.content_digest}
            )
        if rank >= 4:
            member = member.model_copy(update={"published_uuid": shared})
        if rank >= 6:
            member = member.model_copy(update={"predecessor_absent": True})
        records.append(member)
    epoch = 1 if rank >= 2 else 0
    publication = cleanup = None
    if rank >= 3:
        epoch = 2
        publication = permit(
            "exchange" if existing else "rename", 2, 12, "e", T0 + 10, "query-0000000002" if rank >= 4 else None
        )
    if rank >= 5:
        epoch = 3 if existing else 2
        cleanup = (
            permit("drop", 3, 13, "f", T0 + 20)
            if existing
            else DdlBinding(kind="none", epoch=2, correlation_token=None, query_digest=None, permitted_at_ms=T0 + 20)
        )
    fields = {
        "target_key": TARGET_KEY,
        "operation_id": operation,
        "fence_token": token(3),
        "phase": phase,
        "dispatch_epoch": epoch,
        "write_id": token(4),
        "inventory_digest": "8" * 64,
        "normalized_plan_digest": "6" * 64,
        "candidate_name": candidate_name("target_table", operation, INTERNAL_CANDIDATE_INFIX),
        "artifact": art if rank >= 1 else None,
        "schema_digest": art.schema_digest if rank >= 1 else None,
        "generation_id": "4" * 64 if rank >= 1 else None,
        "baseline": ("existing" if existing else "absent") if rank >= 1 else None,
        "members": tuple(records),
        "candidate": candidate,
        "publication": publication,
        "cleanup": cleanup,
        "created_at_ms": T0,
        "updated_at_ms": T0 + 30,
        "committed_at_ms": T0 + 15 if rank >= 4 else None,
    }
    if v2 or quality is not None:
        return InternalAuthorityRecordV2.model_validate({**fields, "quality": quality})
    return InternalAuthorityRecordV1.model_validate(fields)


def internal_v1(phase: Phase, *, operation: str = OTHER_OPERATION) -> InternalAuthorityRecordV1:
    record = internal_record(phase, operation=operation)
    assert isinstance(record, InternalAuthorityRecordV1)
    return record


def capsule(state: CapsuleState = "PREPARED", *, members: int = 2) -> QualityBinding:
    """A structurally valid v2 capsule in ``state`` (not bound to any particular record: codec and receipt tests)."""
    ids = tuple(sorted(member_id(1, replica) for replica in range(1, members + 1)))
    plan = AcceptancePlan(
        dataset="analytics_db.target_table",
        columns=(("id", "UInt64"), ("name", "String")),
        metrics=("row_count", "null_count", "distinct_count"),
        selected=("name",),
        schema_digest="d" * 64,
        selection_digest="e" * 64,
        replicas=ids,
    )
    gates = tuple(GateResult(name=name, passed=True, expected="3", observed="3") for name in ("min_rows",))
    core = QualityCore(
        schema=QUALITY_SCHEMA_V2,
        policy_identity="1" * 64,
        config_digest="2" * 64,
        plan_digest="5" * 64,
        source_digests=("a" * 64, "c" * 64, "d" * 64),
        run_id="scheduled__2026-09-18",
        load_id="dpone-load-" + "0" * 32,
        target_key=TARGET_KEY,
        operation_id=OTHER_OPERATION,
        fence_token=token(1),
        inventory_digest="4" * 64,
        generation_id="6" * 64,
        generation_uuid=uuid(9),
        source_rows=3,
        staged_rows=tuple((mid, 3) for mid in ids),
        report=gates,
        passed=True,
        requested=plan.metrics,
        target_plan=plan,
        expected=TargetCounts(
            generation_uuid=uuid(9),
            row_count=3,
            content_digest="c" * 64,
            columns=(ColumnCounts(name="name", null_count=0, distinct_count=3),),
        ),
    )
    assert core.expected is not None
    observed = TargetObservation(
        member_id=ids[0],
        generation_uuid=uuid(9),
        row_count=3,
        content_digest="c" * 64,
        columns=core.expected.columns,
        elapsed_ms=5,
        observed_at_ms=T0,
    )
    completion: dict[str, object] = {
        "PREPARED": {},
        "TARGET_PENDING": {"pending_version": 7},
        "COMPLETE": {"pending_version": 7, "target": observed, "completion_version": 8},
        "FAILED": {"pending_version": 7, "target": observed, "completion_version": 8, "failure": "target_acceptance"},
    }[state]
    return QualityBinding.model_validate({"core": core, "core_digest": core.digest(), "state": state, **completion})


def internal_v2(phase: Phase, *, with_quality: bool = True) -> InternalAuthorityRecordV2:
    bound = with_quality and phase not in (Phase.LOCKED, Phase.STAGING, Phase.ABORTED)
    quality = (
        capsule("COMPLETE" if phase in (Phase.CLEANUP_DISPATCHING, Phase.COMPLETED) else "PREPARED") if bound else None
    )
    record = internal_record(phase, quality=quality, v2=True)
    assert isinstance(record, InternalAuthorityRecordV2)
    return record
