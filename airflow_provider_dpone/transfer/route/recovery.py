"""Source-free recovery checks: bindings first (journal only), then the durable stage (stage store only).

:func:`validate_sealed_bindings` runs before any runtime binding, target connection or target action: it decodes the
marker with a closed decoder and requires exact agreement among the declared selector, the recomputed marker, the
extension's kind/mode/profile/EOF digests, schema and window, and ``source_eof.rows`` == stage-complete rows.
:func:`validate_stage` then proves every stage object is present and untampered. Neither touches the source.
"""

from __future__ import annotations

from airflow_provider_dpone.core.canonical import sha256_hex
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.typed_digest import native_multiset_digest
from airflow_provider_dpone.transfer.ports import StageStore
from airflow_provider_dpone.transfer.route.admission import SourceRequest
from airflow_provider_dpone.transfer.route.selector import normalized_selector, resolve_selector
from airflow_provider_dpone.transfer.route.states import InvocationView
from airflow_provider_dpone.transfer.values.arrow_chunk import StagedChunk, decode_chunk
from airflow_provider_dpone.transfer.values.chunk import (
    NativeStageComplete,
    receipts_sha256,
    typed_sum_hex,
    workload_totals,
)
from airflow_provider_dpone.transfer.values.raw_snapshot import decode_source_marker, legacy_source_binding_sha256


def _invalid(detail: str) -> DponeError:
    return DponeError("native_transfer.recovery_binding_invalid", detail)


def validate_plan_binding(view: InvocationView, request: SourceRequest) -> None:
    """The plan belongs to this request and its marker is known (valid before and after EOF)."""
    plan = view.plan
    marker = decode_source_marker(plan.source_query_id)
    if plan.operation_id != request.operation_id or plan.route_fingerprint != request.route_fingerprint:
        raise _invalid("plan belongs to another operation or route")
    if plan.relation != request.relation or plan.window != request.window:
        raise _invalid("plan relation or window differs from the request")
    legacy = legacy_source_binding_sha256(plan.relation.identity(), plan.route_fingerprint, plan.window)
    if legacy != plan.legacy_source_binding_sha256:
        raise _invalid("legacy source binding does not recompute")
    if marker.kind == "legacy" and plan.source_query_id != legacy:
        raise _invalid("legacy source_query_id is not the legacy binding")


def validate_sealed_bindings(view: InvocationView, request: SourceRequest) -> NativeStageComplete:
    """All marker/extension/profile/EOF/count bindings of a sealed invocation; raises before any target action."""
    complete = view.stage_complete
    if complete is None:
        raise _invalid("invocation is not sealed")
    validate_plan_binding(view, request)
    plan = view.plan
    requirement = resolve_selector(request.options)
    marker = decode_source_marker(plan.source_query_id)
    if normalized_selector(plan.selector) != requirement.declared:
        raise _invalid("declared selector differs from the sealed plan")
    if (marker.kind == "raw_v1") != requirement.raw:
        raise _invalid("source marker does not match the selector")
    rows, total = workload_totals(view.receipts)
    if (
        complete.rows != rows
        or complete.chunks != len(view.receipts)
        or complete.receipts_sha256 != receipts_sha256(view.receipts)
        or complete.typed_sum != typed_sum_hex(total)
        or complete.workload_digest != native_multiset_digest(rows, total)
    ):
        raise _invalid("stage-complete does not bind its receipts")
    metadata = complete.completion_metadata
    if metadata.columns_sha256 != plan.columns_sha256:
        raise _invalid("completion metadata names another column layout")
    extension = metadata.source_snapshot_v1
    if marker.kind == "legacy":
        if extension is not None:
            raise _invalid("completion extension without the raw marker")
        return complete
    if extension is None:
        raise _invalid("sealed raw invocation lacks its completion extension")
    extension.verify_digests(plan.legacy_source_binding_sha256)
    if extension.source_query_binding != plan.source_query_id:
        raise _invalid("extension binding differs from the plan's source_query_id")
    profile = extension.profile
    if profile.window != plan.window:
        raise _invalid("profile window differs from the plan")
    if [(c.name, c.type) for c in profile.schema_columns] != [(c.name, c.source_type) for c in plan.columns]:
        raise _invalid("profile schema differs from the plan")
    if profile.replica.scope is not requirement.replica_scope:
        raise _invalid("profile replica scope differs from the selector")
    if extension.source_eof.rows != complete.rows:
        raise _invalid("source EOF rows differ from stage-complete rows")
    return complete


def load_verified_chunk(view: InvocationView, ordinal: int, stage: StageStore, *, decode_rows: bool) -> StagedChunk:
    """Read one stage object and prove it is exactly the sealed chunk its receipt names (in the sealed format)."""
    receipt = view.receipts[ordinal]
    try:
        data = stage.get(receipt.object_key)
    except DponeError:
        raise
    except Exception as exc:  # noqa: BLE001 - any unreadable stage object is a missing stage object
        raise DponeError("native_transfer.stage_integrity_failed", f"chunk {ordinal}: {type(exc).__name__}") from None
    if len(data) != receipt.object_bytes or sha256_hex(data) != receipt.object_sha256:
        raise DponeError("native_transfer.stage_integrity_failed", f"chunk {ordinal} differs from its receipt")
    chunk = decode_chunk(data, view.plan.columns, decode_rows=decode_rows)
    header = chunk.header
    if (
        header.get("invocation_id") != view.invocation_id
        or header.get("ordinal") != ordinal
        or header.get("rows") != receipt.rows
        or header.get("typed_sum") != receipt.typed_sum
        or (
            view.stage_complete is not None
            and header.get("format") != view.stage_complete.completion_metadata.stage_format
        )
    ):
        raise DponeError("native_transfer.stage_integrity_failed", f"chunk {ordinal} header differs from its receipt")
    return chunk


def validate_stage(view: InvocationView, stage: StageStore) -> None:
    """Every sealed chunk present and untampered (one object in memory at a time)."""
    for ordinal in range(len(view.receipts)):
        load_verified_chunk(view, ordinal, stage, decode_rows=False)
