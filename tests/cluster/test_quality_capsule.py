"""The quality-replay capsule's contract: state invariants, the core digest, canonical round trip, v1 records."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from airflow_provider_dpone.cluster.values.authority.codec import decode, encode
from airflow_provider_dpone.cluster.values.authority.internal import InternalAuthorityRecordV2
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.cluster.values.publication_receipts import InternalPublicationReceiptV2, internal_receipt
from airflow_provider_dpone.cluster.values.quality_capsule import QualityBinding, completion_reservation, prepared
from airflow_provider_dpone.core.manifest.cluster import QualityPolicy
from tests.support.fakes.records import capsule, internal_record, internal_v1

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("state", ["PREPARED", "TARGET_PENDING", "COMPLETE", "FAILED"])
def test_every_state_round_trips_in_a_committed_v2_record(state: Any) -> None:
    record = internal_record(Phase.COMMITTED, quality=capsule(state), v2=True)
    assert decode(encode(record)) == record


@pytest.mark.parametrize(
    ("state", "changes"),
    [
        ("PREPARED", {"pending_version": 3}),
        ("TARGET_PENDING", {"pending_version": None}),
        ("COMPLETE", {"target": None}),
        ("COMPLETE", {"completion_version": 7}),  # not after its TARGET_PENDING write (7)
        ("FAILED", {"failure": None}),
    ],
)
def test_impossible_states_are_refused(state: Any, changes: dict[str, Any]) -> None:
    values = {**capsule(state).model_dump(by_alias=True), **changes}
    with pytest.raises(ValidationError):
        QualityBinding.model_validate(values)


def test_v1_evidence_has_no_target_step_and_a_failed_gate_is_bound_failed() -> None:
    core = capsule().core.model_copy(update={"schema_": "dpone.quality.replay.v1", "target_plan": None})
    with pytest.raises(ValidationError):
        QualityBinding.model_validate({"core": core, "core_digest": core.digest(), "state": "TARGET_PENDING"})
    failed_gate = capsule().core.report[0].model_copy(update={"passed": False})
    failing = capsule().core.model_copy(update={"report": (failed_gate,), "passed": False})
    bound = prepared(_revalidated(failing))
    assert bound.state == "FAILED" and bound.failure == failed_gate.name


def _revalidated(core: Any) -> Any:
    """A ``model_copy`` skips validation; the capsule's own invariants must hold on the copy."""
    return type(core).model_validate(core.model_dump(by_alias=True))


def test_the_core_digest_covers_every_core_field() -> None:
    core = capsule().core
    assert core.model_copy(update={"source_rows": core.source_rows + 1}).digest() != core.digest()
    assert core.model_copy(update={"generation_uuid": "00000000-0000-4000-8000-000000000001"}).digest() != core.digest()


def test_the_completion_reservation_is_the_largest_completion() -> None:
    reserved = completion_reservation(capsule("PREPARED"))
    assert reserved.state == "COMPLETE" and reserved.target is not None
    assert len(encode(internal_record(Phase.COMMITTED, quality=reserved, v2=True)).payload) > len(
        encode(internal_record(Phase.COMMITTED, quality=capsule("COMPLETE"), v2=True)).payload
    )


def test_no_capsule_before_the_staged_write_and_v1_records_keep_their_encoding() -> None:
    with pytest.raises(ValueError, match="STAGED"):
        internal_record(Phase.STAGING, quality=capsule(), v2=True)
    v1 = internal_v1(Phase.COMMITTED)
    assert decode(encode(v1)) == v1 and '"quality"' not in encode(v1).payload


def test_a_v2_record_has_its_own_receipt_with_the_capsule_state() -> None:
    record = internal_record(Phase.COMMITTED, quality=capsule("COMPLETE"), v2=True)
    assert isinstance(record, InternalAuthorityRecordV2)
    receipt = internal_receipt(record, 9, {})
    assert isinstance(receipt, InternalPublicationReceiptV2)
    assert receipt.quality is not None and receipt.quality.state == "COMPLETE" and receipt.quality.target_row_count == 3


def test_policy_identity_spells_out_the_defaults() -> None:
    assert QualityPolicy().identity() == QualityPolicy(min_rows=0, target_metrics=("row_count",)).identity()
    assert QualityPolicy(min_rows=1).identity() != QualityPolicy().identity()
    with pytest.raises(ValidationError):
        QualityPolicy(target_metrics=("row_count", "row_count"))


def test_a_reader_fence_round_trips_only_on_a_completed_v2_record_with_a_capsule() -> None:
    from airflow_provider_dpone.cluster.values.authority.internal import ReaderFence

    fence = ReaderFence(token="a" * 32, expires_at_ms=1_790_000_090_000)
    completed = internal_record(Phase.COMPLETED, quality=capsule("COMPLETE"), v2=True)
    fenced = completed.model_copy(update={"reader": fence})
    assert isinstance(fenced, InternalAuthorityRecordV2)
    assert decode(encode(fenced)) == fenced and '"reader"' not in encode(completed).payload
    assert fenced.reader_fenced(fence.expires_at_ms - 1) and not fenced.reader_fenced(fence.expires_at_ms)
    committed = internal_record(Phase.COMMITTED, quality=capsule("COMPLETE"), v2=True)
    with pytest.raises(ValidationError):
        InternalAuthorityRecordV2.model_validate({**committed.model_dump(by_alias=True), "reader": fence})
