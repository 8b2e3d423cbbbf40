"""The legacy the specification keeps still reads, beside the one refusal of every other build's format.

Seeds 000/001/002: the internal authority record v1 keeps its own encoding and its v1 receipt, and source/staged-only
quality evidence keeps ``dpone.quality.replay.v1``. Seed 003: the transfer's legacy source binding and its unprefixed
source marker (beside the raw ``clickhouse.raw-query.v1:`` marker), and the ``mssql_native.*`` code aliases.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_dpone.cluster.values.authority import codec
from airflow_provider_dpone.cluster.values.authority.codec import decode, encode
from airflow_provider_dpone.cluster.values.authority.internal import INTERNAL_SCHEMA_V1
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.cluster.values.publication_receipts import InternalPublicationReceipt, internal_receipt
from airflow_provider_dpone.cluster.values.quality_capsule import QUALITY_SCHEMA_V1, QualityBinding
from airflow_provider_dpone.core.errors import REGISTRY, DponeError, lookup
from airflow_provider_dpone.transfer.values.journal_records import GENESIS, decode_record, encode_record
from airflow_provider_dpone.transfer.values.raw_snapshot import decode_source_marker
from tests.support.fakes.records import capsule, internal_record, internal_v1
from tests.support.transfer.raw_snapshot_fixtures import legacy_binding, plan

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("phase", [Phase.STAGED, Phase.PUBLICATION_DISPATCHING, Phase.COMMITTED, Phase.COMPLETED])
def test_the_internal_v1_record_reads_and_re_encodes_to_its_own_bytes(phase: Phase) -> None:
    record = internal_v1(phase)
    row = encode(record)
    value = json.loads(row.payload)
    assert value["schema"] == INTERNAL_SCHEMA_V1 and "quality" not in value
    codec._memo.clear()  # decode the stored bytes, not the record this process encoded
    assert decode(row) == record and encode(decode(row)).payload == row.payload


def test_a_committed_internal_v1_record_gives_the_v1_receipt() -> None:
    receipt = internal_receipt(internal_v1(Phase.COMMITTED), 3, {})
    assert type(receipt) is InternalPublicationReceipt
    assert receipt.model_dump(by_alias=True)["schema"] == "dpone.clickhouse.cluster-full-refresh-receipt.v1"


def test_source_and_staged_only_quality_evidence_keeps_v1() -> None:
    bound = capsule()
    core = bound.core.model_copy(update={"schema_": QUALITY_SCHEMA_V1, "target_plan": None, "expected": None})
    v1 = QualityBinding.model_validate({"core": core, "core_digest": core.digest(), "state": "PREPARED"})
    record = internal_record(Phase.STAGED, quality=v1, v2=True)
    row = encode(record)
    assert json.loads(row.payload)["quality"]["core"]["schema"] == QUALITY_SCHEMA_V1
    codec._memo.clear()
    assert decode(row) == record


@pytest.mark.parametrize("raw", [False, True])
def test_the_legacy_source_binding_and_both_markers_read_from_the_journal(raw: bool) -> None:
    stored = encode_record(0, GENESIS, "plan", plan(raw=raw))
    read = decode_record(stored).body
    assert read == plan(raw=raw) and read.legacy_source_binding_sha256 == legacy_binding()
    marker = decode_source_marker(read.source_query_id)
    assert marker.kind == ("raw_v1" if raw else "legacy")
    assert (marker.binding_sha256 == legacy_binding()) is not raw


def test_the_mssql_native_aliases_still_resolve_and_the_format_code_has_none() -> None:
    assert lookup("mssql_native.stage_integrity_failed") is REGISTRY["native_transfer.stage_integrity_failed"]
    assert DponeError("mssql_native.journal_corrupt").code == "native_transfer.journal_corrupt"
    assert lookup("DPONE_RECORD_FORMAT_UNSUPPORTED").retryable is False
