"""The closed ``source_snapshot`` selector and native-transfer options."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer_options import (
    NativeTransferOptions,
    ReplicaScope,
    SnapshotMode,
    parse_source_snapshot,
)

pytestmark = pytest.mark.unit


def test_omission_is_none_and_explicit_selector_parses() -> None:
    assert parse_source_snapshot(None) is None
    assert NativeTransferOptions().source_snapshot is None
    parsed = parse_source_snapshot({"mode": "exact_raw_rows", "replica_scope": "connected_replica"})
    assert parsed is not None
    assert (parsed.mode, parsed.replica_scope) == (SnapshotMode.EXACT_RAW_ROWS, ReplicaScope.CONNECTED_REPLICA)


@pytest.mark.parametrize(
    "raw",
    [
        {"mode": "final"},
        {"mode": "exact_raw_rows", "use_final": False},
        {"replica_scope": "single_server"},
        {"mode": "exact_raw_rows", "replica_scope": "all_replicas"},
        {"mode": 1},
        "exact_raw_rows",
    ],
)
def test_invalid_selectors_have_one_code(raw: object) -> None:
    with pytest.raises(DponeError) as info:
        parse_source_snapshot(raw)
    assert info.value.code == "native_transfer.source_snapshot_mode_invalid"


def test_raw_rows_require_target_local_verification() -> None:
    with pytest.raises(ValidationError):
        NativeTransferOptions.model_validate(
            {"source_snapshot": {"mode": "exact_raw_rows"}, "execution": {"verification_backend": "source_only"}}
        )


def test_chunk_bounds_are_strict_integers() -> None:
    with pytest.raises(ValidationError):
        NativeTransferOptions.model_validate({"execution": {"chunk_rows": "100"}})
