"""The producer side of durable quality replay: gates, the immutable core, and the checks every reader runs.

The core is built once, from the *original* observations only: the sealed artifact (source rows, typed content
digest, payload SHA-256, schema digest) and the staged candidate's verified replicas (each replica's own count and
digest, never a sum). It is bound in the same CAS that makes the record STAGED, i.e. before any publication DDL can be
dispatched, together with the target key, operation, fence, inventory, plan and the exact desired generation (the
replicated candidate's UUID). A failed required gate binds the capsule FAILED and blocks publication.

:func:`require_capsule` is what every later reader runs first: the capsule must exist (``REQUIRED``), its core must
hash to its recorded digest (``INVALID``), it must be bound to this request and record (``MISMATCH``), and a FAILED
capsule blocks (``FAILED``). Nothing is ever rebuilt from reports, receipts or current counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.protocol.quality_target import Budget, counts_of, read_plan
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord, encode_payload
from airflow_provider_dpone.cluster.values.authority.generation import MemberGeneration
from airflow_provider_dpone.cluster.values.authority.internal import InternalAuthorityRecordV2
from airflow_provider_dpone.cluster.values.quality_capsule import (
    QUALITY_SCHEMA_V1,
    QUALITY_SCHEMA_V2,
    AcceptancePlan,
    GateResult,
    QualityBinding,
    QualityCore,
    completion_reservation,
    prepared,
)
from airflow_provider_dpone.cluster.values.quality_read import TargetCounts
from airflow_provider_dpone.cluster.values.receipts import ArtifactReceipt
from airflow_provider_dpone.core.canonical import canonical_json, sha256_hex
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.errors.replay import FAILED as FAILED
from airflow_provider_dpone.core.errors.replay import INVALID, MISMATCH, REQUIRED
from airflow_provider_dpone.core.manifest.cluster import QualityPolicy

IDENTITY_REGISTRY: Final[Mapping[str, Mapping[str, str]]] = {
    "PublicationRequest": {
        "cluster": "bound: target_key",
        "database": "bound: target_key",
        "target": "bound: target_key",
        "dag_id": "bound: operation_id",
        "run_id": "bound: run_id, operation_id",
        "normalized_plan_digest": "bound: plan_digest (the manifest's normalized plan, policy included)",
        "replication_mode": "bound: config_digest",
        "table": "bound: see TableSpec",
        "max_source_bytes": "bound: config_digest",
        "max_source_rows": "bound: config_digest (when declared), plan_digest",
        "quality": "bound: policy_identity, config_digest",
    },
    "TableSpec": {
        "columns": "bound: schema digest in source_digests (only the stage task resolves them)",
        "engine": "bound: config_digest",
        "order_by": "bound: config_digest",
        "partition_by": "bound: config_digest",
    },
    "QualityPolicy": {
        "min_rows": "bound: policy_identity",
        "target_metrics": "bound: policy_identity, target_plan",
        "target_columns": "bound: policy_identity, target_plan.selected",
    },
}
"""Every configuration field the capsule could depend on, classified (a test fails when a field is added to one of
these models without a classification here). Nothing is excluded recursively."""

MANIFEST_IDENTITY: Final[Mapping[str, str]] = {
    "version": "bound: plan_digest",
    "name": "excluded: a label; two runs of one DAG with renamed jobs are the same configuration",
    "source.type": "bound: plan_digest",
    "source.connection_id": "bound: plan_digest (the logical connection reference, never a host or secret)",
    "source.query": "bound: plan_digest (its SHA-256), source_digests (the artifact it produced)",
    "source.sha256": "bound: plan_digest (an artifact source is refused at admission)",
    "source.store_uri": "excluded: the artifact is identified by its content SHA-256 (refused at admission)",
    "source.store_connection_id": "excluded: as source.store_uri",
    "sink.type": "bound: plan_digest",
    "sink.connection_id": "bound: plan_digest (the logical connection reference)",
    "sink.database": "bound: plan_digest, target_key",
    "sink.table": "bound: plan_digest, target_key",
    "sink.staging_database": "bound: plan_digest (effective: omitted is sink.database)",
    "sink.options.durable_quality_replay": "bound: plan_digest (the selector of this capsule)",
    "load.strategy": "bound: plan_digest",
    "load.max_source_bytes": "bound: plan_digest, config_digest",
    "load.max_source_rows": "bound: plan_digest, config_digest (when declared)",
    "load.window.column": "bound: plan_digest",
    "load.window.start": "bound: plan_digest (UTC rendering)",
    "load.window.end": "bound: plan_digest (UTC rendering)",
    "physical_design.storage.clickhouse.engine": "bound: plan_digest, config_digest",
    "physical_design.storage.clickhouse.order_by": "bound: plan_digest, config_digest",
    "physical_design.storage.clickhouse.partition_by": "bound: plan_digest, config_digest",
    "physical_design.storage.clickhouse.cluster.name": "bound: plan_digest, target_key",
    "physical_design.storage.clickhouse.cluster.ddl_scope": "bound: plan_digest",
    "physical_design.storage.clickhouse.cluster.replication_mode": "bound: plan_digest, config_digest",
    "physical_design.storage.clickhouse.cluster.access_table": "bound: plan_digest",
    "quality.min_rows": "bound: plan_digest, policy_identity, config_digest",
    "quality.target_metrics": "bound: plan_digest, policy_identity, config_digest",
    "quality.target_columns": "bound: plan_digest, policy_identity, config_digest",
}
"""Every leaf field of the cluster manifest, classified by its dotted path (a test walks the manifest model and
fails on a field missing here). Operator-level inputs are not configuration: the manifest must not be templated
(refused with durable replay), and connection ids passed to an operator are the manifest's when omitted."""

IDENTITY_VERSION: Final[int] = 1
"""The version of the classifications above and of :func:`config_digest`'s content. A change that makes a field enter
or leave a digest raises it; a golden test pins the digest of a fixed request for this version, so such a change
cannot land unnoticed. A capsule written under another identity no longer validates (``..._MISMATCH``): the
configuration it bound is not the one the task rebuilt."""

COMPLETION_MARGIN_BYTES: Final[int] = 16 * 1024
"""Room kept for the publication and cleanup bindings the record still gains after STAGED."""


def evaluate_gates(
    policy: QualityPolicy, artifact: ArtifactReceipt, staged: Sequence[MemberGeneration]
) -> tuple[GateResult, ...]:
    """The three gates over the original source (artifact) and staged (every replica, separately) observations."""
    counts = [member.row_count for member in staged]
    digests = [member.content_digest for member in staged]
    return (
        GateResult(
            name="row_count_reconciliation",
            passed=bool(counts) and all(count == artifact.row_count for count in counts),
            expected=str(artifact.row_count),
            observed=",".join(str(count) for count in counts),
        ),
        GateResult(
            name="min_rows",
            passed=artifact.row_count >= policy.min_rows,
            expected=f">={policy.min_rows}",
            observed=str(artifact.row_count),
        ),
        GateResult(
            name="typed_hash_reconciliation",
            passed=bool(digests) and all(digest == artifact.content_digest for digest in digests),
            expected=artifact.content_digest,
            observed=",".join(sorted({str(digest) for digest in digests})),
        ),
    )


def config_digest(ctx: Context) -> str:
    """The admission configuration identity: every request field that changes what is published or checked and that
    every task rebuilds identically. The typed columns are not here: the request carries none (only staging knows
    them); they are bound through the sealed schema digest in ``source_digests``."""
    request = ctx.request
    table = request.table
    return sha256_hex(
        canonical_json(
            {
                "mode": request.replication_mode,
                "engine": table.engine,
                "order_by": list(table.order_by),
                "partition_by": table.partition_by,
                "max_source_bytes": request.max_source_bytes,
                **({} if request.max_source_rows is None else {"max_source_rows": request.max_source_rows}),
                "policy": None if request.quality is None else request.quality.model_dump(mode="json"),
            }
        )
    )


def _target_plan(ctx: Context, policy: QualityPolicy, artifact: ArtifactReceipt) -> AcceptancePlan | None:
    if not policy.target_metrics:
        return None
    dataset = f"{ctx.request.database}.{ctx.request.target}"
    selected = policy.selected_columns([name for name, _ in artifact.schema_pairs])
    selection = {"dataset": dataset, "columns": [list(pair) for pair in artifact.schema_pairs], "selected": selected}
    return AcceptancePlan(
        dataset=dataset,
        columns=artifact.schema_pairs,
        metrics=policy.target_metrics,
        selected=selected,
        schema_digest=artifact.schema_digest,
        selection_digest=sha256_hex(canonical_json({**selection, "metrics": list(policy.target_metrics)})),
        replicas=tuple(sorted(ctx.inventory.member_ids)),
    )


def _staged_observation(
    ctx: Context, plan: AcceptancePlan, artifact: ArtifactReceipt, candidate_uuid: str
) -> TargetCounts:
    """The requested observations of the verified staged candidate, on the first sealed replica, through the same
    bounded reader the target acceptance uses: what the target's counts must equal after publication."""
    version = artifact.content_digest_version
    request = read_plan(
        ctx, ctx.request.candidate_name, candidate_uuid, digest_version=version, scan=(plan.replicas[0], plan)
    )
    counts = counts_of(ctx, request, Budget(ctx))
    if counts.row_count != artifact.row_count or counts.content_digest != artifact.content_digest:
        raise DponeError(
            MISMATCH, f"replica {ctx.label(plan.replicas[0])}: the staged candidate changed after verification"
        )
    return counts


def build_capsule(
    ctx: Context, record: AuthorityRecord, staged: Sequence[MemberGeneration], generation_uuid: str, load_id: str
) -> QualityBinding | None:
    """The capsule the STAGED write binds (``None`` when durable replay is not selected); refuses a capsule whose
    largest completion would not fit the authority envelope, before anything can be dispatched."""
    policy = ctx.request.quality
    if policy is None:
        return None
    artifact = record.artifact
    # the record version that carries a capsule (v2, created for a request that selects replay), not the mode
    if not isinstance(record, InternalAuthorityRecordV2) or artifact is None or record.generation_id is None:
        raise DponeError(REQUIRED, f"{record.schema_} cannot carry the capsule")
    plan = _target_plan(ctx, policy, artifact)
    report = evaluate_gates(policy, artifact, staged)
    core = QualityCore(
        schema=QUALITY_SCHEMA_V2 if plan is not None else QUALITY_SCHEMA_V1,
        policy_identity=policy.identity(),
        config_digest=config_digest(ctx),
        plan_digest=ctx.request.normalized_plan_digest,
        source_digests=(artifact.sha256, artifact.content_digest, artifact.schema_digest),
        run_id=ctx.request.run_id,
        load_id=load_id,
        target_key=record.target_key,
        operation_id=record.operation_id,
        fence_token=record.fence_token,
        inventory_digest=ctx.inventory.digest,
        generation_id=record.generation_id,
        generation_uuid=generation_uuid,
        source_rows=artifact.row_count,
        staged_rows=tuple((member.member_id, member.row_count or 0) for member in staged),
        report=report,
        passed=all(gate.passed for gate in report if gate.required),
        requested=policy.target_metrics,
        target_plan=plan,
        expected=None if plan is None else _staged_observation(ctx, plan, artifact, generation_uuid),
    )
    binding = prepared(core)
    reserved = record.model_copy(update={"quality": completion_reservation(binding)})
    if len(encode_payload(reserved).encode("utf-8")) + COMPLETION_MARGIN_BYTES > 256 * 1024:
        raise DponeError(INVALID, "the capsule with its completion reservation exceeds 256 KiB")
    return binding


def require_capsule(ctx: Context, record: AuthorityRecord) -> QualityBinding:
    """The record's capsule, proven intact and bound to this request and record; FAILED blocks."""
    quality = record.quality
    if quality is None:
        raise DponeError(REQUIRED, f"{record.schema_} in phase {record.phase} holds no quality capsule")
    core = quality.core
    if core.digest() != quality.core_digest:
        raise DponeError(INVALID, "the capsule core does not hash to its recorded digest")
    policy = ctx.request.quality
    bound = (core.target_key, core.operation_id, core.fence_token, core.generation_id, core.plan_digest)
    recorded = (
        record.target_key,
        record.operation_id,
        record.fence_token,
        record.generation_id,
        record.normalized_plan_digest,
    )
    if policy is None or core.policy_identity != policy.identity() or core.config_digest != config_digest(ctx):
        raise DponeError(MISMATCH, "the capsule was produced under another policy or configuration")
    if bound != recorded:
        raise DponeError(MISMATCH, "the capsule is bound to another operation, fence or generation")
    if quality.state == "FAILED":
        raise DponeError(FAILED, f"capsule FAILED: {quality.failure}")
    return quality
