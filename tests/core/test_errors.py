"""The error registry: every code documented, families well formed, messages one line."""

from __future__ import annotations

import re

import pytest

from airflow_provider_dpone.core.errors import ALIASES, REGISTRY, DponeError, lookup

pytestmark = pytest.mark.unit

_CODE = re.compile(r"^(DPONE_[A-Z0-9_]+|native_transfer\.[a-z0-9_]+)$")


@pytest.mark.parametrize("code", sorted(REGISTRY))
def test_every_code_is_well_formed_and_documented(code: str) -> None:
    entry = REGISTRY[code]
    assert _CODE.match(code)
    assert entry.cause and entry.action
    assert "\n" not in entry.cause + entry.action


REPRESENTATIVE_DETAILS = (
    "cluster dpone_clustr",
    "member m0123456789abcdef (shard 1, replica 2) did not answer",
    "held by operation 8871b566d6b01c13 in phase STAGING",
    "chunk 3: 100000 rows staged, 99999 verified",
)


@pytest.mark.parametrize("code", sorted(REGISTRY))
def test_every_headline_fits_a_short_first_line_and_the_detail_and_advice_have_their_own(code: str) -> None:
    """A log view cuts lines at about 119 characters, after the time stamp and the task prefix: the first line of a
    failure, the code, its short cause and the outcome, stays within 100 characters, and with any detail every line
    of the block does (a detail or advice runs on over more lines, never past the width)."""
    outcome = " (retryable)" if REGISTRY[code].retryable else " (terminal: no retry)"
    for detail in REPRESENTATIVE_DETAILS:
        error = DponeError(code, detail)
        first, *rest = error.lines()
        assert first == error.headline() and first.startswith(f"{code}: ")
        assert len(first + outcome) <= 100, first + outcome
        assert detail not in first and rest[0] == f"  [{detail}]"
        assert all(len(line) <= 100 for line in rest), rest
        assert [line for line in rest if line.startswith("Next: ")] == [error.advice()[0]]


def test_unregistered_code_fails_at_raise_site() -> None:
    with pytest.raises(KeyError):
        DponeError("DPONE_NOT_A_CODE")


def test_message_is_one_line_with_next_action() -> None:
    error = DponeError("DPONE_MANIFEST_UNKNOWN_FIELD", "sink.bogus")
    text = str(error)
    assert text.startswith("DPONE_MANIFEST_UNKNOWN_FIELD: ")
    assert "[sink.bogus]" in text and ". Next: " in text and "\n" not in text
    assert error.as_dict()["code"] == "DPONE_MANIFEST_UNKNOWN_FIELD"


def test_seed_families_are_present() -> None:
    families = {entry.family for entry in REGISTRY.values()}
    assert {"DPONE_REPLAY_QUALITY_EVIDENCE", "native_transfer", "DPONE"} <= families


def test_the_earlier_native_transfer_names_are_aliases_of_the_registered_codes() -> None:
    native = sorted(code for code in REGISTRY if code.startswith("native_transfer."))
    assert native and len(ALIASES) == len(native)
    for code in native:
        alias = "mssql_native." + code.removeprefix("native_transfer.")
        assert ALIASES[alias] == code and lookup(alias) is REGISTRY[code]
    error = DponeError("mssql_native.target_unavailable", "detail")
    assert error.code == "native_transfer.target_unavailable", "an alias is accepted, the registered code is emitted"
    assert str(error).startswith("native_transfer.target_unavailable: ")
    assert not set(ALIASES) & set(REGISTRY)


def test_no_advice_names_a_publisher_this_provider_does_not_have() -> None:
    """There is no local (single-server) publication: no cause or next action may send a user to one."""
    for entry in REGISTRY.values():
        assert "local publication" not in f"{entry.cause} {entry.action}".lower(), entry.code
    assert "remote_servers" in REGISTRY["DPONE_CLICKHOUSE_CLUSTER_INVENTORY_TOO_FEW_MEMBERS"].action
