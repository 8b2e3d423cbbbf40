"""Literals and the column-type grammar: the only ways a value or a type becomes SQL text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.cluster.clickhouse.column_types import canonical_columns, canonical_type
from airflow_provider_dpone.cluster.clickhouse.literals import (
    settings_clause,
    string_literal,
    uint_literal,
    uuid_literal,
)
from airflow_provider_dpone.core.errors import DponeError

pytestmark = pytest.mark.adapter


def unescape(literal: str) -> str:
    """ClickHouse's reading of a single-quoted literal with backslash escapes (the subset ``string_literal`` emits)."""
    assert literal[0] == literal[-1] == "'"
    escapes = {"\\": "\\", "'": "'", "0": "\x00", "b": "\b", "f": "\f", "r": "\r", "n": "\n", "t": "\t"}
    out, body, index = [], literal[1:-1], 0
    while index < len(body):
        char = body[index]
        if char == "\\":
            out.append(escapes[body[index + 1]])
            index += 2
            continue
        assert char != "'", "an unescaped quote would end the literal"
        out.append(char)
        index += 1
    return "".join(out)


@given(st.text())
def test_string_literal_round_trips_any_text(value: str) -> None:
    assert unescape(string_literal(value)) == value


def test_string_literal_escapes_quote_and_backslash() -> None:
    assert string_literal("it's \\ ok") == "'it\\'s \\\\ ok'"


def test_uuid_and_uint_literals_accept_only_their_kind() -> None:
    assert uuid_literal("00000000-0000-4000-8000-000000000001") == "'00000000-0000-4000-8000-000000000001'"
    for bad in ["00000000-0000-4000-8000-00000000000G", "x' OR 1 --", "00000000-0000-4000-8000-00000000000A"]:
        with pytest.raises(ValueError):
            uuid_literal(bad)
    assert uint_literal(7) == "7"
    for bad_int in [-1, True, 1.0]:
        with pytest.raises(ValueError):
            uint_literal(bad_int)  # type: ignore[arg-type]


def test_settings_clause() -> None:
    assert settings_clause({}) == ""
    assert settings_clause({"a_b": 1, "c": "x'y"}) == " SETTINGS a_b = 1, c = 'x\\'y'"
    with pytest.raises(ValueError):
        settings_clause({"a; DROP": 1})


@pytest.mark.parametrize(
    ("declared", "canonical"),
    [
        ("UInt64", "UInt64"),
        ("Nullable(Decimal(18,4))", "Nullable(Decimal(18, 4))"),
        ("DateTime64(3,'UTC')", "DateTime64(3, 'UTC')"),
        ("  DateTime64( 3 , 'Europe/Berlin' ) ", "DateTime64(3, 'Europe/Berlin')"),
        ("Array(LowCardinality(Nullable(String)))", "Array(LowCardinality(Nullable(String)))"),
        ("Map(String, UInt8)", "Map(String, UInt8)"),
        ("FixedString(064)", "FixedString(64)"),
    ],
)
def test_types_are_rendered_as_clickhouse_reports_them(declared: str, canonical: str) -> None:
    assert canonical_type(declared) == canonical


@pytest.mark.parametrize(
    "hostile",
    [
        "",
        "String)",
        "Nullable(String",
        "String; DROP TABLE x",
        "String -- comment",
        "Enum8('a' = 1)",
        "Tuple(a UInt8)",
        "DateTime64(3, 'UTC\\')",
        "DateTime64(3, 'it''s')",
        "String`",
        "\u0405tring",
        "Nullable(" * 10 + "String" + ")" * 10,
        "A" * 600,
    ],
)
def test_types_outside_the_grammar_are_refused_without_echo(hostile: str) -> None:
    with pytest.raises(DponeError) as caught:
        canonical_type(hostile)
    assert caught.value.code == "DPONE_CLICKHOUSE_TYPE_UNSUPPORTED"
    if len(hostile) > 3:
        assert hostile not in str(caught.value)


def test_canonical_columns_keeps_names_and_order() -> None:
    assert canonical_columns((("b", "Decimal(9,2)"), ("a", "String"))) == (("b", "Decimal(9, 2)"), ("a", "String"))
