"""The recovery journal's record codec and order rules: closed, canonical, chained, fail-closed."""

from __future__ import annotations

import json

import pytest

from airflow_provider_dpone.core.canonical import canonical_json_bytes
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.route.journal import RouteJournal
from airflow_provider_dpone.transfer.route.states import RouteState, fold
from airflow_provider_dpone.transfer.values.chunk import ChunkReceipt, CompletionMetadata, NativeStageComplete
from airflow_provider_dpone.transfer.values.journal_records import (
    GENESIS,
    MAX_RECORD_BYTES,
    InvocationSettled,
    PublishIntent,
    Succeeded,
    TargetPrepareIntent,
    TargetVerified,
    decode_record,
    encode_record,
)
from airflow_provider_dpone.transfer.values.row_digest import RowDigest
from tests.support.transfer.raw_snapshot_fixtures import H, plan

pytestmark = pytest.mark.contract

INV = "1" * 32


def receipt(ordinal: int) -> ChunkReceipt:
    return ChunkReceipt(
        invocation_id=INV,
        ordinal=ordinal,
        rows=1,
        typed_sum=H,
        object_key=f"stage/{INV}/{ordinal:08d}.chunk",
        object_sha256=H,
        object_bytes=10,
    )


class MemoryJournal:
    def __init__(self) -> None:
        self.records: dict[int, bytes] = {}

    def append(self, seq: int, data: bytes) -> None:
        if seq in self.records:
            raise DponeError("native_transfer.journal_conflict", "exists")
        self.records[seq] = data

    def read_all(self) -> list[tuple[int, bytes]]:
        return sorted(self.records.items())


def test_record_round_trip_is_exact() -> None:
    raw = encode_record(0, GENESIS, "plan", plan())
    record = decode_record(raw)
    assert record.body == plan() and record.raw == raw and record.kind == "plan"


def test_a_plan_sealed_before_the_row_digest_was_recorded_reads_as_typed() -> None:
    body = plan().model_dump(mode="json")
    assert "row_digest" not in body  # the typed method is never written: earlier plans re-encode to their bytes
    record = decode_record(envelope("plan", body))
    assert record.body.row_digest is RowDigest.TYPED_SHA256 and record.body == plan()


def test_the_row_digest_method_is_sealed_with_the_plan() -> None:
    sealed = plan().model_copy(update={"row_digest": RowDigest.PG_RECORD_SHA256})
    body = decode_record(encode_record(0, GENESIS, "plan", sealed)).body
    assert body.row_digest is RowDigest.PG_RECORD_SHA256


def envelope(kind: str, body: dict) -> bytes:
    return canonical_json_bytes({"seq": 0, "prev_sha256": GENESIS, "kind": kind, "body": body})


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (json.dumps({"seq": 0, "prev_sha256": GENESIS, "kind": "plan", "body": {}}).encode(), "journal_corrupt"),
        (canonical_json_bytes({"seq": 0, "prev_sha256": GENESIS, "kind": 7, "body": {}}), "journal_corrupt"),
        (envelope("chunk", {**receipt(0).model_dump(mode="json"), "extra": 1}), "journal_corrupt"),
        (envelope("chunk", {**receipt(0).model_dump(mode="json"), "rows": "1"}), "journal_corrupt"),
        (
            envelope("chunk", {**receipt(0).model_dump(mode="json"), "source_snapshot_v1": {}}),
            "recovery_binding_invalid",
        ),
        (canonical_json_bytes({"seq": 0, "kind": "plan", "body": {}}), "journal_corrupt"),
        (envelope("plan", {**plan().model_dump(mode="json"), "row_digest": "sha3-512.v9"}), "row_digest_unknown"),
        (envelope("plan", {**plan().model_dump(mode="json"), "row_digest": None}), "row_digest_unknown"),
        (b"x" * (MAX_RECORD_BYTES + 1), "journal_corrupt"),
    ],
)
def test_malformed_records_fail_closed(raw: bytes, code: str) -> None:
    with pytest.raises(DponeError) as info:
        decode_record(raw)
    assert info.value.code == "native_transfer." + code


def _stage_complete_with(stage_format: str) -> bytes:
    body = NativeStageComplete.seal(INV, [receipt(0)], CompletionMetadata(columns_sha256=H)).to_json()
    body["completion_metadata"]["stage_format"] = stage_format
    return envelope("stage_complete", body)


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        (
            _stage_complete_with("dpone.native-typed-chunk.v1"),
            "journal stage_complete record, stage format dpone.native-typed-chunk.v1: written by a pre-release dpone "
            "build (before 0.1.0)",
        ),
        (
            _stage_complete_with("dpone.native-arrow-chunk.v3"),
            "journal stage_complete record, stage format dpone.native-arrow-chunk.v3: written by a build other than "
            "this one",
        ),
        (
            envelope("plan", {**plan().model_dump(mode="json"), "kind": "dpone.native-chunk-plan.v2"}),
            "journal plan record, chunk plan kind dpone.native-chunk-plan.v2: written by a build other than this one",
        ),
        (envelope("mystery", {}), "journal record kind mystery: written by a build other than this one"),
    ],
)
def test_records_of_another_builds_format_are_refused_naming_the_format_and_its_writer(raw: bytes, named: str) -> None:
    """The stage format v1 of pre-release builds, and any format this build does not know, are refused with the one
    format code (not as corruption: the bytes may be exactly what that build wrote), never read."""
    with pytest.raises(DponeError) as info:
        decode_record(raw)
    assert info.value.code == "DPONE_RECORD_FORMAT_UNSUPPORTED"
    assert info.value.detail == f"{named}; this build is dpone 0.1.0"


def test_stage_complete_never_carries_a_null_extension() -> None:
    complete = NativeStageComplete.seal(INV, [receipt(0)], CompletionMetadata(columns_sha256=H))
    body = complete.to_json()
    body["completion_metadata"]["source_snapshot_v1"] = None
    with pytest.raises(DponeError) as info:
        decode_record(envelope("stage_complete", body))
    assert info.value.code == "native_transfer.journal_corrupt"


def test_chain_and_sequence_are_verified() -> None:
    store = MemoryJournal()
    journal = RouteJournal(store)
    journal.append("plan", plan())
    journal.append("chunk", receipt(0))
    assert len(RouteJournal(store).load()) == 2
    with pytest.raises(DponeError) as conflict:
        store.append(1, b"{}")
    assert conflict.value.code == "native_transfer.journal_conflict"
    store.records[1] = encode_record(1, H, "chunk", receipt(0))
    with pytest.raises(DponeError) as broken:
        RouteJournal(store).load()
    assert broken.value.code == "native_transfer.journal_corrupt"
    del store.records[1]
    store.records[2] = encode_record(2, GENESIS, "chunk", receipt(0))
    with pytest.raises(DponeError) as gap:
        RouteJournal(store).load()
    assert gap.value.code == "native_transfer.journal_corrupt"


def chained(*bodies: tuple[str, object]) -> list:
    journal = RouteJournal(MemoryJournal())
    for kind, body in bodies:
        journal.append(kind, body)  # type: ignore[arg-type]
    return journal.records


COMPLETE = NativeStageComplete.seal(INV, [receipt(0)], CompletionMetadata(columns_sha256=H))
PREPARE = TargetPrepareIntent(invocation_id=INV, attempt=1)
VERIFIED = TargetVerified(invocation_id=INV, attempt=1, rows=1, typed_sum=H)
PUBLISH = PublishIntent(invocation_id=INV, attempt=1)


@pytest.mark.parametrize(
    "bodies",
    [
        [("chunk", receipt(0))],
        [("plan", plan()), ("chunk", receipt(1))],
        [("plan", plan()), ("chunk", receipt(0)), ("chunk", receipt(0))],
        [("plan", plan()), ("plan", plan())],
        [("plan", plan()), ("target_prepare_intent", PREPARE)],
        [("plan", plan()), ("chunk", receipt(0)), ("stage_complete", COMPLETE), ("chunk", receipt(1))],
        [("plan", plan()), ("chunk", receipt(0)), ("stage_complete", COMPLETE), ("publish_intent", PUBLISH)],
        [
            ("plan", plan()),
            ("chunk", receipt(0)),
            ("stage_complete", COMPLETE),
            ("target_prepare_intent", PREPARE),
            ("publish_intent", PUBLISH),
        ],
        [
            ("plan", plan()),
            ("chunk", receipt(0)),
            ("stage_complete", COMPLETE),
            (
                "invocation_settled",
                InvocationSettled(invocation_id=INV, outcome="reextract_required", reason="x", stage_retired=True),
            ),
        ],
        [
            ("plan", plan()),
            ("chunk", receipt(0)),
            ("stage_complete", COMPLETE),
            ("target_prepare_intent", PREPARE),
            ("target_verified", VERIFIED),
            ("publish_intent", PUBLISH),
            ("target_prepare_intent", TargetPrepareIntent(invocation_id=INV, attempt=2)),
        ],
        [
            ("plan", plan()),
            ("chunk", receipt(0)),
            ("stage_complete", COMPLETE),
            (
                "succeeded",
                Succeeded(invocation_id=INV, publication_id="p", rows=1, workload_digest=H, evidence_sha256=H),
            ),
        ],
    ],
)
def test_impossible_record_orders_are_corruption(bodies) -> None:
    with pytest.raises(DponeError) as info:
        fold(chained(*bodies))
    assert info.value.code == "native_transfer.journal_corrupt"


def test_fold_reports_the_diagram_states() -> None:
    steps = [("plan", plan()), ("chunk", receipt(0))]
    assert fold(chained(*steps))[-1].state() is RouteState.EXTRACTING
    steps.append(("stage_complete", COMPLETE))
    assert fold(chained(*steps))[-1].state() is RouteState.STAGE_COMPLETE
    steps += [("target_prepare_intent", PREPARE), ("target_verified", VERIFIED)]
    assert fold(chained(*steps))[-1].state() is RouteState.PUBLISHING
    steps.append(("publish_intent", PUBLISH))
    assert fold(chained(*steps))[-1].state() is RouteState.OUTCOME_UNKNOWN
