"""Post-EOF recovery refuses tampered, missing or mismatched bindings BEFORE the target is bound or the source opened.

Each case crashes a run right after stage-complete, alters one durable fact (a re-chained journal record, a stage
object, the request's selector), and retries: the retry must fail closed with a stable code, bind no target and open
no source connection.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.core.canonical import canonical_json_bytes, sha256_hex
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer_options import NativeTransferOptions
from airflow_provider_dpone.transfer.values.journal_records import GENESIS
from tests.support.fakes.transfer_target import SimulatedCrash
from tests.support.transfer.native_route_harness import OPERATION, Harness, crash_at, make_harness, make_table

pytestmark = pytest.mark.protocol

Record = dict[str, Any]


def journal_dir(root: Path) -> Path:
    return root / OPERATION / "journal"


def rewrite_journal(root: Path, edit: Callable[[list[Record]], list[Record]]) -> None:
    """Edit decoded records and write them back as a valid hash chain (a tamperer who knows the format)."""
    directory = journal_dir(root)
    files = sorted(directory.iterdir())
    records = edit([json.loads(path.read_bytes()) for path in files])
    for path in files:
        path.unlink()
    previous = GENESIS
    for seq, record in enumerate(records):
        record["seq"], record["prev_sha256"] = seq, previous
        raw = canonical_json_bytes(record)
        (directory / f"{seq:08d}.json").write_bytes(raw)
        previous = sha256_hex(raw)


def of_kind(records: list[Record], kind: str) -> Record:
    return next(record for record in records if record["kind"] == kind)


def sealed(tmp_path: Path, *, legacy: bool = False) -> Harness:
    harness = make_harness(tmp_path)
    if legacy:
        table = make_table()
        table.engine, table.engine_args = "MergeTree", ""
        harness.source.tables[("db", "events")] = table
        harness.options = NativeTransferOptions.model_validate({"execution": {"chunk_rows": 2}})
    with pytest.raises(SimulatedCrash):
        harness.run(crash_at("stage_complete"))
    harness.expire_lease()
    harness.source.deny = True
    harness.target_bindings = 0
    return harness


def assert_refused_before_target(harness: Harness, code: str) -> None:
    with pytest.raises(DponeError) as refused:
        harness.run()
    assert refused.value.code == code
    assert harness.target_bindings == 0, "the target was bound before the bindings were validated"
    assert harness.source.connections == 1
    assert harness.target.rows() == []


def _eof_rows(records: list[Record]) -> list[Record]:
    of_kind(records, "stage_complete")["body"]["completion_metadata"]["source_snapshot_v1"]["source_eof"]["rows"] += 1
    return records


def _profile_uuid(records: list[Record]) -> list[Record]:
    extension = of_kind(records, "stage_complete")["body"]["completion_metadata"]["source_snapshot_v1"]
    extension["profile"]["relation_uuid"] = "00000000-0000-0000-0000-0000000000aa"
    return records


def _profile_consistent_forgery(records: list[Record]) -> list[Record]:
    """Rewrite the profile AND recompute its digest: the plan's source_query_id binding still refuses it."""
    from airflow_provider_dpone.transfer.values.raw_snapshot_eof import SourceSnapshotExtension

    body = of_kind(records, "stage_complete")["body"]["completion_metadata"]
    extension = SourceSnapshotExtension.model_validate(body["source_snapshot_v1"])
    profile = extension.profile.model_copy(update={"relation_uuid": "00000000-0000-0000-0000-0000000000aa"})
    forged = SourceSnapshotExtension.seal(
        profile, of_kind(records, "plan")["body"]["legacy_source_binding_sha256"], extension.source_eof
    )
    body["source_snapshot_v1"] = forged.to_json()
    return records


def _drop_extension(records: list[Record]) -> list[Record]:
    del of_kind(records, "stage_complete")["body"]["completion_metadata"]["source_snapshot_v1"]
    return records


def _unknown_marker(records: list[Record]) -> list[Record]:
    plan = of_kind(records, "plan")["body"]
    plan["source_query_id"] = plan["source_query_id"].replace("raw-query.v1:", "raw-query.v2:")
    return records


def _extension_in_chunk(records: list[Record]) -> list[Record]:
    extension = of_kind(records, "stage_complete")["body"]["completion_metadata"]["source_snapshot_v1"]
    of_kind(records, "chunk")["body"]["source_snapshot_v1"] = extension
    return records


def _stage_rows(records: list[Record]) -> list[Record]:
    of_kind(records, "stage_complete")["body"]["rows"] += 1
    return records


@pytest.mark.parametrize(
    ("edit", "code"),
    [
        (_eof_rows, "native_transfer.recovery_binding_invalid"),
        (_profile_uuid, "native_transfer.recovery_binding_invalid"),
        (_profile_consistent_forgery, "native_transfer.recovery_binding_invalid"),
        (_drop_extension, "native_transfer.recovery_binding_invalid"),
        (_unknown_marker, "native_transfer.recovery_binding_invalid"),
        (_extension_in_chunk, "native_transfer.recovery_binding_invalid"),
        (_stage_rows, "native_transfer.recovery_binding_invalid"),
    ],
)
def test_tampered_bindings_fail_closed(tmp_path, edit, code) -> None:
    harness = sealed(tmp_path)
    rewrite_journal(tmp_path, edit)
    assert_refused_before_target(harness, code)


def test_unchained_edit_is_journal_corruption(tmp_path) -> None:
    harness = sealed(tmp_path)
    path = sorted(journal_dir(tmp_path).iterdir())[2]
    path.write_bytes(path.read_bytes().replace(b'"rows":2', b'"rows":3'))
    assert_refused_before_target(harness, "native_transfer.journal_corrupt")


def test_missing_record_is_journal_corruption(tmp_path) -> None:
    harness = sealed(tmp_path)
    sorted(journal_dir(tmp_path).iterdir())[3].unlink()
    assert_refused_before_target(harness, "native_transfer.journal_corrupt")


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete"])
def test_tampered_or_missing_stage_fails_closed(tmp_path, damage) -> None:
    harness = sealed(tmp_path)
    chunk = sorted((tmp_path / OPERATION / "stage").rglob("*.chunk"))[1]
    data = chunk.read_bytes()
    if damage == "flip":
        chunk.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    elif damage == "truncate":
        chunk.write_bytes(data[:-3])
    else:
        chunk.unlink()
    assert_refused_before_target(harness, "native_transfer.stage_integrity_failed")


def test_selector_change_after_eof_is_refused(tmp_path) -> None:
    harness = sealed(tmp_path)
    harness.options = NativeTransferOptions.model_validate({"execution": {"chunk_rows": 2}})
    assert_refused_before_target(harness, "native_transfer.recovery_binding_invalid")


@pytest.mark.parametrize("sealed_explicit", [False, True], ids=["omitted_then_explicit", "explicit_then_omitted"])
def test_query_visible_spelling_change_after_eof_recovers(tmp_path, sealed_explicit: bool) -> None:
    """Omitted and explicit ``query_visible`` are one normalized selector: same operation, recovery proceeds."""
    omitted = {"execution": {"chunk_rows": 2}}
    explicit = {**omitted, "source_snapshot": {"mode": "query_visible"}}
    harness = make_harness(tmp_path)
    table = make_table()
    table.engine, table.engine_args = "MergeTree", ""
    harness.source.tables[("db", "events")] = table
    harness.options = NativeTransferOptions.model_validate(explicit if sealed_explicit else omitted)
    with pytest.raises(SimulatedCrash):
        harness.run(crash_at("stage_complete"))
    harness.expire_lease()
    harness.source.deny = True
    harness.options = NativeTransferOptions.model_validate(omitted if sealed_explicit else explicit)
    result = harness.run()
    assert result.source_connections == 0 and result.rows == 7 and result.stage_retired


def test_legacy_run_writes_no_extension_and_refuses_one(tmp_path) -> None:
    harness = sealed(tmp_path, legacy=True)
    raw = [path.read_bytes() for path in sorted(journal_dir(tmp_path).iterdir())]
    assert not any(b"source_snapshot_v1" in record for record in raw)
    plan = next(json.loads(r) for r in raw if b'"kind":"plan"' in r)["body"]
    assert plan["source_query_id"] == plan["legacy_source_binding_sha256"]
    assert plan["selector"] is None

    def add_extension(records: list[Record]) -> list[Record]:
        of_kind(records, "stage_complete")["body"]["completion_metadata"]["source_snapshot_v1"] = {"kind": "x"}
        return records

    rewrite_journal(tmp_path, add_extension)
    assert_refused_before_target(harness, "native_transfer.recovery_binding_invalid")


def test_legacy_run_recovers_source_free(tmp_path) -> None:
    harness = sealed(tmp_path, legacy=True)
    result = harness.run()
    assert result.source_connections == 0 and result.endpoint_authority_agreement is None
    assert harness.target_bindings == 1
