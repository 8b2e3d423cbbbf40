"""LOCKED -> STAGING: bind the sealed artifact, the logical generation and the observed baseline.

The artifact is produced by the injected source only while no artifact is bound; afterwards every attempt reopens the
bound one. An unsupported artifact (not replayable, over ``max_source_bytes`` or the row budget ``max_source_rows``, or a
schema other than the table's)
aborts the operation before any member mutation; so does a column type outside the encoder profile
(:mod:`~airflow_provider_dpone.core.column_profile`), before the source is even extracted. The baseline is the existing target on every member (equal schema
and content) or absent on every member; anything mixed blocks without mutating. Empty input is a valid generation:
the empty artifact's digests identify it like any other.

The same CAS persists the first candidate UUID intent (one per member in external mode, the one shared intent of the
replicated candidate in internal mode), so no CREATE can ever precede its intent. The candidate name is observed on
every member alongside the baseline, before that CAS: staging starts from that observation, and in internal mode,
when the name is free on every replica (the create step's barrier), the CAS also carries the permit of the ON
CLUSTER CREATE, which the stage then dispatches (:mod:`replicated_staging`).

An existing target must have the mode's engine class, except that a record which succeeded a terminal record of the
*other* mode (a mode migration, ``previous_schema``) adopts a target of that mode's engine: that is the physical
truth the previous operation left, observed equal on every member before anything is mutated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import NoReturn

from airflow_provider_dpone.cluster.ports import ArtifactSource, TableObservation
from airflow_provider_dpone.cluster.protocol.authority_io import Held
from airflow_provider_dpone.cluster.protocol.context import Context, alongside
from airflow_provider_dpone.cluster.protocol.ddl_step import commit_permitted
from airflow_provider_dpone.cluster.protocol.observe import baseline_state, observe_baseline_target, observe_candidate
from airflow_provider_dpone.cluster.protocol.replicated_staging import intend
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.external import ErrorClassification, MemberRecord
from airflow_provider_dpone.cluster.values.authority.generation import DdlBinding, MemberGeneration, PublishedMember
from airflow_provider_dpone.cluster.values.authority.phases import MemberStage, Phase
from airflow_provider_dpone.cluster.values.clickhouse_engines import EngineClass, classify_engine
from airflow_provider_dpone.cluster.values.identities import generation_id
from airflow_provider_dpone.cluster.values.receipts import ArtifactReceipt
from airflow_provider_dpone.core.column_profile import COLUMN_TYPE_UNSUPPORTED, unsupported_columns
from airflow_provider_dpone.core.errors import DponeError

ARTIFACT_UNSUPPORTED = "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_UNSUPPORTED"
TARGET_DIVERGENT = "DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT"


Observations = Mapping[str, TableObservation]
FirstIntents = Callable[
    [Context, AuthorityRecord, ArtifactReceipt, Observations, Observations], tuple[dict[str, object], DdlBinding | None]
]
"""The STAGING CAS's first candidate intents, the mode's (:mod:`mode`): (record, the artifact that CAS binds, each
member's baseline, each member's candidate name as observed) -> the record changes, and the permit that rides on that
CAS (``None``: none)."""


def bind_artifact_and_baseline(
    ctx: Context, held: Held, source: ArtifactSource, first_intents: FirstIntents
) -> tuple[Held, Observations]:
    """Observe the baseline, seal (or fail and abort), and CAS STAGING with the mode's ``first_intents``; with it,
    each member's candidate name as observed just before that CAS (staging starts from it instead of reading again).

    A column type outside the encoder profile aborts, and an existing target that cannot be adopted blocks, before
    the source is extracted."""
    untyped = unsupported_columns(source.columns)
    if untyped is not None:
        _abort(ctx, held, COLUMN_TYPE_UNSUPPORTED, untyped)
    record = held.record
    # the existing target first: a divergent one or one of the wrong engine blocks before any source I/O
    engines = adoptable_engines(ctx, record.previous_schema)
    ids = ctx.open_sessions(record.member_ids())
    observations, candidates = alongside(
        lambda: observe_baseline(ctx, ids, engines, record.predecessor),
        lambda: ctx.each_member(lambda member_id: observe_candidate(ctx, member_id), ids),
        ctx.settings.member_parallelism,
    )
    receipt = source.seal()
    problem = unsupported_reason(ctx, receipt, source.columns)
    if problem is not None:
        _abort(ctx, held, ARTIFACT_UNSUPPORTED, problem)
    present = any(obs.exists for obs in observations.values())
    changes, permit = first_intents(ctx, record, receipt, observations, candidates)
    staged = commit_permitted(
        ctx,
        held,
        permit,
        phase=Phase.STAGING,
        artifact=receipt,
        schema_digest=receipt.schema_digest,
        generation_id=generation_id(
            operation_id_hex=record.operation_id,
            artifact_sha256=receipt.sha256,
            schema_digest_hex=receipt.schema_digest,
            row_count=receipt.row_count,
        ),
        baseline="existing" if present else "absent",
        **changes,
    )
    return staged, candidates


def _abort(ctx: Context, held: Held, code: str, problem: str) -> NoReturn:
    """LOCKED -> ABORTED before any member mutation (nothing to clean up), then fail with ``code``."""
    ctx.commit(
        held, phase=Phase.ABORTED, last_error=ErrorClassification(code=code, phase=held.record.phase, at_ms=ctx.now())
    )
    raise DponeError(code, problem)


def adoptable_engines(ctx: Context, previous: str | None) -> frozenset[EngineClass]:
    """The engine classes an existing target may have: the mode's, plus the other mode's when the record succeeded
    a record of the other mode (``previous`` is its schema)."""
    return ctx.request.mode.adoptable_engines(previous)


def observe_baseline(
    ctx: Context,
    member_ids: Iterable[str],
    engines: frozenset[EngineClass],
    published: Iterable[PublishedMember] = (),
) -> dict[str, TableObservation]:
    """The target on every member, with content: absent everywhere, or present everywhere with equal schema and
    content and an adoptable engine. Physical UUIDs may be distinct or equal: ``CREATE TABLE ... ON CLUSTER`` in an
    Atomic database gives every member the same one, and replicas of one replicated table share theirs. Each member
    records its own UUID, and publication and cleanup reconcile per member, so equal UUIDs need nothing else. Two
    inventory entries that are one server still cannot publish: the second finds the first one's candidate under the
    candidate name, a UUID it never intended, and stops as CANDIDATE_FOREIGN before any target is touched.

    A member's content digest is the one its COMPLETED predecessor ``published`` (and verified) while the target
    still holds that candidate's UUID, row count and parts; when only its parts changed, just the parts not recorded
    are read; otherwise it is digested whole (observe.py)."""
    facts = {member.member_id: member for member in published}
    observations = ctx.each_member(lambda mid: observe_baseline_target(ctx, mid, facts.get(mid)), member_ids)
    present = {mid for mid, obs in observations.items() if obs.exists}
    if not present:
        return observations
    if len(present) != len(observations):
        raise DponeError(TARGET_DIVERGENT, f"target on {len(present)} of {len(observations)}")
    shapes = {(obs.columns, obs.row_count, obs.content_digest) for obs in observations.values()}
    if len(shapes) != 1 or any(obs.content_digest is None for obs in observations.values()):
        raise DponeError(TARGET_DIVERGENT, "schema or content differs between members")
    kinds = {mid: classify_engine(obs.engine or "") for mid, obs in observations.items()}
    bad = sorted(mid for mid, kind in kinds.items() if kind not in engines)
    if bad or len(set(kinds.values())) != 1:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED", f"target on members {ctx.labels(bad) or 'mixed'}"
        )
    return observations


def unsupported_reason(ctx: Context, receipt: ArtifactReceipt, columns: tuple[tuple[str, str], ...]) -> str | None:
    if not receipt.replayable:
        return "artifact is not replayable"
    if receipt.byte_size > ctx.request.max_source_bytes:
        return f"{receipt.byte_size} bytes > max_source_bytes {ctx.request.max_source_bytes}"
    budget = ctx.request.max_source_rows
    if budget is not None and receipt.row_count > budget:
        return f"{receipt.row_count} rows > max_source_rows {budget}"
    if receipt.schema_pairs != columns:
        return "artifact schema differs from the table definition"
    return None


def _baseline(member_id: str, obs: TableObservation) -> dict[str, object]:
    """What the member's baseline observation records; with an existing target, its schema and active parts as
    seen with its content, which the publication barrier compares before it digests anything again."""
    if not obs.exists:
        return {"member_id": member_id}
    return {
        "member_id": member_id,
        "target_uuid": obs.uuid,
        "target_row_count": obs.row_count,
        "target_content_digest": obs.content_digest,
        **baseline_state(obs),
    }


def external_intents(
    ctx: Context,
    record: AuthorityRecord,
    artifact: ArtifactReceipt,
    observations: Mapping[str, TableObservation],
    candidates: Mapping[str, TableObservation],
) -> tuple[dict[str, object], DdlBinding | None]:
    """External mode: one candidate UUID intent per member, and no permit (each member creates its own candidate
    from the bound artifact's columns; staging starts from the ``candidates`` observed)."""
    del artifact, candidates
    members = []
    for member_id in record.member_ids():
        intent = ctx.ports.entropy.uuid()
        members.append(
            MemberRecord.model_validate(
                {
                    **_baseline(member_id, observations[member_id]),
                    "stage": MemberStage.INTENDED,
                    "candidate_uuid_intent": intent,
                    "owned_candidate_uuids": (intent,),
                    "intended_at_ms": ctx.now(),
                }
            )
        )
    return {"members": tuple(members)}, None


def internal_intents(
    ctx: Context,
    record: AuthorityRecord,
    artifact: ArtifactReceipt,
    observations: Mapping[str, TableObservation],
    candidates: Mapping[str, TableObservation],
) -> tuple[dict[str, object], DdlBinding | None]:
    """Internal mode: the one shared candidate UUID intent, with the permit of its ON CLUSTER CREATE when the
    candidate name was observed free on every replica (:func:`replicated_staging.intend`); every replica records its
    own baseline."""
    members = tuple(
        MemberGeneration.model_validate(_baseline(member_id, observations[member_id]))
        for member_id in record.member_ids()
    )
    names_free = not any(obs.exists for obs in candidates.values())
    candidate, permit = intend(ctx, record, artifact, names_free=names_free)
    return {"members": members, "candidate": candidate}, permit
