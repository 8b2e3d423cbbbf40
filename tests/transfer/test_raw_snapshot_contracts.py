"""Raw-snapshot contracts: golden identities, the closed marker decoder, the completion extension, legacy bytes.

The golden digests pin the canonical bytes of the versioned identities: a change to any of them is a new version,
never a silent edit (persisted recovery records of older runs must keep validating).
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from airflow_provider_dpone.core.canonical import canonical_json_bytes
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.values.chunk import ChunkReceipt, CompletionMetadata, NativeStageComplete
from airflow_provider_dpone.transfer.values.raw_snapshot import (
    RAW_MARKER_PREFIX,
    decode_source_marker,
    raw_source_query_id,
)
from airflow_provider_dpone.transfer.values.raw_snapshot_eof import (
    SourceEof,
    SourceSnapshotExtension,
    eof_descriptor_sha256,
)
from tests.support.transfer.raw_snapshot_fixtures import H, legacy_binding, plan, profile

pytestmark = pytest.mark.contract

GOLDEN_PROFILE_SHA256 = "fa2c2f419adea21f5356817f5d1a69e3814cc69eb841143385d4e30aeb4f8930"
GOLDEN_LEGACY_BINDING = "10d764210a9785ea61372d3d54584eb57429627d636d00167a43ff432a647a23"
GOLDEN_SOURCE_QUERY_ID = "clickhouse.raw-query.v1:59fb15551d6ec2cf815a95a2446bd5d1f9636180cdf0b1b148d3927fd743db7f"


def eof(rows: int = 3, agreement: bool = True) -> SourceEof:
    return SourceEof(
        vendor_query_id_sha256=H,
        rows=rows,
        touched_part_coverage_sha256=H,
        before_physical_profile_sha256=H,
        after_physical_profile_sha256=H if agreement else "cd" * 32,
        endpoint_authority_agreement=agreement,
    )


def test_golden_identities() -> None:
    assert profile().sha256() == GOLDEN_PROFILE_SHA256
    assert legacy_binding() == GOLDEN_LEGACY_BINDING
    assert raw_source_query_id(legacy_binding(), profile().sha256()) == GOLDEN_SOURCE_QUERY_ID
    assert GOLDEN_SOURCE_QUERY_ID.startswith(RAW_MARKER_PREFIX)


def test_profile_digest_binds_every_field() -> None:
    base = profile().sha256()
    variants = [
        profile(relation_uuid="5f0c3f0e-8a7c-4f4e-9f5e-1a2b3c4d5e60"),
        profile(window=None),
        profile(
            pending_classic_mutations=0,
            server={"version": "26.9.2.2", "revision": 54515, "timezone": "UTC", "session_timezone": ""},
        ),
        profile(access={"principal_sha256": H, "roles_sha256": H, "row_policy_sha256": H, "policy_filtered": True}),
        profile(replica={"scope": "connected_replica", "identity_sha256": H}),
    ]
    assert len({base, *(variant.sha256() for variant in variants)}) == len(variants) + 1


def test_profile_holds_no_coordinates_sql_or_hosts() -> None:
    text = canonical_json_bytes(profile().preimage()).decode()
    for forbidden in ("sales", "events", "SELECT", "FROM ", '"default"'):
        assert forbidden not in text


@pytest.mark.parametrize(
    "changes",
    [{"mode": "query_visible"}, {"kind": "dpone.clickhouse-raw-snapshot-profile.v2"}, {"pending_classic_mutations": 1}],
)
def test_profile_is_closed(changes) -> None:
    with pytest.raises(ValidationError):
        profile(**changes)


@pytest.mark.parametrize(
    "value",
    [
        RAW_MARKER_PREFIX + "AB" * 32,
        RAW_MARKER_PREFIX + "ab" * 31,
        "clickhouse.raw-query.v2:" + "ab" * 32,
        "clickhouse.raw-query.v1" + "ab" * 32,
        "ab" * 31,
        "",
    ],
)
def test_marker_decoder_is_closed(value: str) -> None:
    with pytest.raises(DponeError) as info:
        decode_source_marker(value)
    assert info.value.code == "native_transfer.recovery_binding_invalid"


def test_marker_decoder_known_versions() -> None:
    assert decode_source_marker("ab" * 32).kind == "legacy"
    assert decode_source_marker(RAW_MARKER_PREFIX + "ab" * 32).kind == "raw_v1"


def test_extension_round_trip_and_recomputation() -> None:
    extension = SourceSnapshotExtension.seal(profile(), legacy_binding(), eof())
    assert extension.source_query_binding == plan().source_query_id
    assert extension.source_eof_descriptor_sha256 == eof_descriptor_sha256(profile().sha256(), eof())
    again = SourceSnapshotExtension.model_validate_json(canonical_json_bytes(extension.to_json()))
    again.verify_digests(legacy_binding())
    assert set(extension.to_json()) == {
        "kind",
        "mode",
        "source_query_binding",
        "profile",
        "source_snapshot_profile_sha256",
        "source_eof",
        "source_eof_descriptor_sha256",
    }
    assert set(extension.to_json()["source_eof"]) == {
        "vendor_query_id_sha256",
        "rows",
        "touched_part_coverage_sha256",
        "before_physical_profile_sha256",
        "after_physical_profile_sha256",
        "endpoint_authority_agreement",
    }


@pytest.mark.parametrize(
    "tamper",
    [
        lambda ext: ext.model_copy(update={"profile": profile(relation_uuid="00000000-0000-0000-0000-000000000001")}),
        lambda ext: ext.model_copy(update={"source_eof": eof(rows=4)}),
        lambda ext: ext.model_copy(update={"source_eof_descriptor_sha256": "cd" * 32}),
        lambda ext: ext.model_copy(update={"source_query_binding": RAW_MARKER_PREFIX + "cd" * 32}),
    ],
)
def test_tampered_extension_fails_recomputation(tamper) -> None:
    extension = tamper(SourceSnapshotExtension.seal(profile(), legacy_binding(), eof()))
    with pytest.raises(DponeError) as info:
        extension.verify_digests(legacy_binding())
    assert info.value.code == "native_transfer.recovery_binding_invalid"


def test_extension_is_closed() -> None:
    body = SourceSnapshotExtension.seal(profile(), legacy_binding(), eof()).to_json()
    for key, value in [("kind", "dpone.clickhouse-raw-query-snapshot.v2"), ("mode", "query_visible"), ("extra", 1)]:
        with pytest.raises(ValidationError):
            SourceSnapshotExtension.model_validate({**body, key: value})


def receipts() -> list[ChunkReceipt]:
    return [
        ChunkReceipt(
            invocation_id="1" * 32,
            ordinal=i,
            rows=2,
            typed_sum=f"{i + 1:064x}",
            object_key=f"stage/{'1' * 32}/{i:08d}.chunk",
            object_sha256=H,
            object_bytes=100,
        )
        for i in range(2)
    ]


def test_legacy_completion_metadata_never_gains_an_empty_extension() -> None:
    legacy = NativeStageComplete.seal("1" * 32, receipts(), CompletionMetadata(columns_sha256=plan().columns_sha256))
    assert set(legacy.to_json()["completion_metadata"]) == {"stage_format", "columns_sha256"}
    assert b"source_snapshot_v1" not in canonical_json_bytes(legacy.to_json())
    extension = SourceSnapshotExtension.seal(profile(), legacy_binding(), eof(rows=4))
    raw = NativeStageComplete.seal(
        "1" * 32, receipts(), CompletionMetadata(columns_sha256=plan().columns_sha256, source_snapshot_v1=extension)
    )
    assert set(raw.to_json()["completion_metadata"]) == {"stage_format", "columns_sha256", "source_snapshot_v1"}
    assert raw.rows == 4 and raw.typed_sum == f"{3:064x}"
