"""Canonical JSON: one byte form per value, refusal of anything that is not canonical."""

from __future__ import annotations

import pytest

from airflow_provider_dpone.core.canonical import (
    canonical_json,
    canonical_json_bytes,
    digest,
    parse_canonical_json,
    sha256_hex,
    tagged_digest,
)
from airflow_provider_dpone.core.errors import DponeError

pytestmark = pytest.mark.unit


def test_keys_are_sorted_and_whitespace_free() -> None:
    assert canonical_json({"b": 1, "a": [True, None, "x"]}) == '{"a":[true,null,"x"],"b":1}'


def test_unicode_is_utf8_not_escaped() -> None:
    assert canonical_json_bytes({"k": "ä"}) == '{"k":"ä"}'.encode()


@pytest.mark.parametrize("value", [1.5, {"a": float("nan")}, {1: "x"}, {"a": {1, 2}}])
def test_non_canonical_values_are_refused(value: object) -> None:
    with pytest.raises(DponeError) as info:
        canonical_json(value)
    assert info.value.code == "DPONE_CANONICAL_JSON_INVALID"


def test_oversize_is_refused() -> None:
    with pytest.raises(DponeError) as info:
        canonical_json_bytes({"a": "x" * 100}, max_bytes=50)
    assert info.value.code == "DPONE_CANONICAL_JSON_OVERSIZE"


def test_round_trip_and_noncanonical_spelling_refused() -> None:
    value = {"z": [1, 2], "a": "b"}
    assert parse_canonical_json(canonical_json_bytes(value)) == value
    with pytest.raises(DponeError) as info:
        parse_canonical_json(b'{"z": [1, 2], "a": "b"}')
    assert info.value.code == "DPONE_CANONICAL_JSON_NONCANONICAL"
    with pytest.raises(DponeError) as info:
        parse_canonical_json(b'{"a":1.0}')
    assert info.value.code == "DPONE_CANONICAL_JSON_INVALID"


def test_digest_golden_vectors() -> None:
    assert sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert digest({}) == sha256_hex(b"{}")
    assert tagged_digest("t", "a") == sha256_hex(b'["t","a"]')
    assert tagged_digest("t1", "a") != tagged_digest("t2", "a")
