"""The publication's column type profile: scalars (optionally Nullable) in, nested and dynamic types out."""

from __future__ import annotations

import pytest

from airflow_provider_dpone.core.column_profile import unsupported_columns, unsupported_type

pytestmark = pytest.mark.unit

ADMITTED = (
    "UInt8",
    "Int256",
    "Float64",
    "Bool",
    "String",
    "FixedString(16)",
    "UUID",
    "IPv6",
    "Date32",
    "DateTime",
    "DateTime('Europe/Berlin')",
    "DateTime64(3, 'UTC')",
    "DateTime64(6)",
    "Decimal(18, 4)",
    "Decimal128(10)",
    "Nullable(Decimal(18, 4))",
    "Nullable(DateTime64(3, 'UTC'))",
    "Nullable(String)",
)

REFUSED = {
    "Array(UInt64)": "Array",
    "Map(String, UInt64)": "Map",
    "Tuple(UInt8, String)": "Tuple",
    "Nested(a UInt8)": "Nested",
    "JSON": "JSON",
    "Object('json')": "Object",
    "Dynamic": "Dynamic",
    "Variant(String, UInt8)": "Variant",
    "LowCardinality(String)": "LowCardinality",
    "Nullable(Array(UInt8))": "Array",
    "AggregateFunction(sum, UInt64)": "AggregateFunction",
    "Enum8('a' = 1)": "Enum8",
    "Nullable(Nullable(String))": "Nullable",
    "String; DROP TABLE t": "String",
}


@pytest.mark.parametrize("type_text", ADMITTED)
def test_scalars_are_admitted(type_text: str) -> None:
    assert unsupported_type(type_text) is None


@pytest.mark.parametrize(("type_text", "constructor"), sorted(REFUSED.items()))
def test_nested_dynamic_and_wrapped_types_are_refused_naming_the_constructor(type_text: str, constructor: str) -> None:
    assert unsupported_type(type_text) == constructor


def test_the_first_refused_column_is_named_by_position_only() -> None:
    columns = (("id", "UInt64"), ("secret_name", "Map(String, String)"), ("x", "JSON"))
    assert unsupported_columns(columns) == "columns[1]: Map"
    assert unsupported_columns((("id", "UInt64"),)) is None
