"""ClickHouse -> SQL Server / PostgreSQL type mapping: admitted types map losslessly, the rest are refused by code."""

from __future__ import annotations

import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer import StringMapping
from airflow_provider_dpone.core.typed_digest import LogicalType
from airflow_provider_dpone.transfer.values.target_types import StorageKind, parse_column_type

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("source", "tsql", "postgres", "nullable"),
    [
        ("Int8", "SMALLINT", "smallint", False),
        ("UInt8", "TINYINT", "smallint", False),
        ("Int16", "SMALLINT", "smallint", False),
        ("UInt16", "INT", "integer", False),
        ("Int32", "INT", "integer", False),
        ("UInt32", "BIGINT", "bigint", False),
        ("Int64", "BIGINT", "bigint", False),
        ("UInt64", "DECIMAL(20,0)", "numeric(20,0)", False),
        ("Decimal(18, 4)", "DECIMAL(18,4)", "numeric(18,4)", False),
        ("Decimal32(2)", "DECIMAL(9,2)", "numeric(9,2)", False),
        ("Decimal128(10)", "DECIMAL(38,10)", "numeric(38,10)", False),
        ("String", "VARBINARY(MAX)", "bytea", False),
        ("FixedString(16)", "BINARY(16)", "bytea", False),
        ("Bool", "BIT", "boolean", False),
        ("Date", "DATE", "date", False),
        ("Date32", "DATE", "date", False),
        ("DateTime('UTC')", "DATETIME2(0)", "timestamp(0) with time zone", False),
        ("DateTime64(3, 'UTC')", "DATETIME2(3)", "timestamp(3) with time zone", False),
        ("DateTime64(6,'UTC')", "DATETIME2(6)", "timestamp(6) with time zone", False),
        ("UUID", "UNIQUEIDENTIFIER", "uuid", False),
        ("Nullable(Int32)", "INT", "integer", True),
        ("LowCardinality(String)", "VARBINARY(MAX)", "bytea", False),
        ("LowCardinality(Nullable(String))", "VARBINARY(MAX)", "bytea", True),
        ("Nullable(Decimal(38, 38))", "DECIMAL(38,38)", "numeric(38,38)", True),
    ],
)
def test_admitted_types_map_to_both_dialects(source: str, tsql: str, postgres: str, nullable: bool) -> None:
    mapped = parse_column_type(source)
    assert (mapped.tsql, mapped.postgres, mapped.nullable) == (tsql, postgres, nullable)


def test_uint64_keeps_its_full_range_as_an_integer() -> None:
    mapped = parse_column_type("UInt64")
    assert mapped.storage is StorageKind.UINT64 and mapped.logical is LogicalType.INTEGER
    assert (mapped.int_min, mapped.int_max) == (0, 2**64 - 1)


def test_text_mapping_is_an_explicit_opt_in() -> None:
    assert parse_column_type("String", StringMapping.TEXT).tsql == "NVARCHAR(MAX)"
    assert parse_column_type("String", StringMapping.TEXT).postgres == "text"
    assert parse_column_type("String").storage is StorageKind.BINARY


@pytest.mark.parametrize(
    "source",
    [
        "Float64",
        "Float32",
        "Int128",
        "UInt256",
        "Decimal(39, 2)",
        "Decimal256(2)",
        "Decimal(10, 11)",
        "DateTime",
        "DateTime('Europe/Berlin')",
        "DateTime64(3)",
        "DateTime64(9, 'UTC')",
        "Array(Int32)",
        "Map(String, String)",
        "Tuple(Int32, String)",
        "Enum8('a' = 1)",
        "Nullable(Nullable(Int32))",
        "IPv4",
        "JSON",
        "FixedString(0)",
        "FixedString(9000)",
        "",
        "Int32)",
    ],
)
def test_unsupported_types_are_refused_with_a_code(source: str) -> None:
    with pytest.raises(DponeError) as caught:
        parse_column_type(source)
    assert caught.value.code == "native_transfer.target_type_unsupported"


def test_fixed_string_cannot_be_text() -> None:
    with pytest.raises(DponeError, match="target_type_unsupported"):
        parse_column_type("FixedString(4)", StringMapping.TEXT)
