"""Parsing ``source.options.native_transfer`` with stable codes, and the credential-free plan section."""

from __future__ import annotations

import pytest

from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.native_transfer_options import (
    declared_plan_section,
    parse_native_transfer_options,
)


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ({"source_snapshot": {"mode": "final"}}, "mssql_native.source_snapshot_mode_invalid"),
        ({"source_snapshot": {"mode": "exact_raw_rows", "final": False}}, "mssql_native.source_snapshot_mode_invalid"),
        (
            {"source_snapshot": {"mode": "exact_raw_rows"}, "execution": {"verification_backend": "source_only"}},
            "mssql_native.source_snapshot_mode_invalid",
        ),
        ({"execution": {"chunk_rows": 0}}, "DPONE_MANIFEST_FIELD_INVALID"),
        ({"wire": {"mode": "text"}}, "DPONE_MANIFEST_FIELD_INVALID"),
        ("exact_raw_rows", "DPONE_MANIFEST_FIELD_INVALID"),
    ],
)
def test_invalid_options_have_stable_codes(raw: object, code: str) -> None:
    with pytest.raises(DponeError) as info:
        parse_native_transfer_options(raw)
    assert info.value.code == code


def test_plan_section_states_only_the_declaration() -> None:
    omitted = declared_plan_section(parse_native_transfer_options(None))
    assert omitted == {
        "source_snapshot": {
            "declared": None,
            "effective_route": "legacy",
            "final": None,
            "live_admission": "UNVERIFIED",
        }
    }
    raw = declared_plan_section(
        parse_native_transfer_options(
            {"source_snapshot": {"mode": "exact_raw_rows", "replica_scope": "connected_replica"}}
        )
    )
    assert raw["source_snapshot"] == {
        "declared": {"mode": "exact_raw_rows", "replica_scope": "connected_replica"},
        "effective_route": "exact_raw_rows",
        "final": False,
        "live_admission": "UNVERIFIED",
    }
