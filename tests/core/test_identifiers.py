"""Identifier validation refuses every hostile spelling before SQL is built, without echoing it."""

from __future__ import annotations

import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import (
    qualified_clickhouse,
    quote_postgres,
    quote_tsql,
    validate_identifier,
)

pytestmark = pytest.mark.unit

HOSTILE = [
    "a`b",
    'a"b',
    "a'b",
    "a\x00b",
    "a b",
    "a;DROP",
    "x" * 129,
    "",
    "t\u0430ble",  # Cyrillic a look-alike
    "1abc",
    "a]b",
    "a.b",
]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_refused_with_code_and_not_echoed(name: str) -> None:
    with pytest.raises(DponeError) as info:
        validate_identifier(name, what="sink.table")
    assert info.value.code == "DPONE_IDENTIFIER_INVALID"
    assert "sink.table" in str(info.value)
    if len(name) > 2:
        assert name not in str(info.value)


def test_plain_names_are_quoted_per_dialect() -> None:
    assert validate_identifier("x" * 128) == "x" * 128
    assert qualified_clickhouse("db", "t_1") == "`db`.`t_1`"
    assert quote_tsql("Orders") == "[Orders]"
    assert quote_postgres("_x9") == '"_x9"'


def test_non_string_is_refused() -> None:
    with pytest.raises(DponeError):
        validate_identifier(5)
