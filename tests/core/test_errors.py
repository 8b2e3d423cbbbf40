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
