"""PostgreSQL's server-side chunk digest equals the Python typed digest, value for value, on every admitted type.

The server-side digest re-implements the canonical encoding in SQL; this differential test is what keeps the two
from drifting: boundary values of every type (extremes, zero, negative, pre-1970 instants, empty and non-UTF-8 bytes,
NULL) are staged, and the server digest, the read-back digest and the source's digest of the original rows must all be
equal; a single changed value must change the server digest.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest

from airflow_provider_dpone.adapters.postgres.target import PostgresTransferTarget
from airflow_provider_dpone.contracts.transfer_target import PublicationMode, TargetColumn, TargetPlan
from airflow_provider_dpone.contracts.transfer_target_types import StringMapping
from tests.fixtures.postgres import PostgresServer
from tests.fixtures.target_harness import PostgresHarness, bind, chunk, evidence

UTC = dt.UTC
TYPES = [
    ("i8", "Int8", [-128, 127, 0]),
    ("u8", "UInt8", [0, 255, 1]),
    ("i16", "Int16", [-(2**15), 2**15 - 1, -1]),
    ("u16", "UInt16", [0, 2**16 - 1, 7]),
    ("i32", "Int32", [-(2**31), 2**31 - 1, 0]),
    ("u32", "UInt32", [0, 2**32 - 1, 5]),
    ("i64", "Int64", [-(2**63), 2**63 - 1, -7]),
    ("u64", "UInt64", [0, 2**64 - 1, 2**63]),
    ("d0", "Decimal(9, 0)", [Decimal(-999999999), Decimal(999999999), Decimal(0)]),
    ("d4", "Nullable(Decimal(18, 4))", [Decimal("-0.0001"), None, Decimal("12345678901234.5")]),
    (
        "d38",
        "Decimal(38, 10)",
        [Decimal("-9999999999999999999999999999.9999999999"), Decimal("0.0000000001"), Decimal("1E+5")],
    ),
    ("b", "String", [b"", b"\x00\xff\xfe", "é".encode()]),
    ("fx", "FixedString(3)", [b"\x00\x00\x00", b"abc", b"\xff\x01\x02"]),
    ("t", "Nullable(String)", ["", None, "日本語 😀"]),
    ("flag", "Bool", [True, False, True]),
    ("nflag", "Nullable(Bool)", [None, False, True]),
    ("day", "Date32", [dt.date(1, 1, 1), dt.date(1969, 12, 31), dt.date(2299, 12, 31)]),
    (
        "ts0",
        "DateTime('UTC')",
        [
            dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
            dt.datetime(1970, 1, 1, tzinfo=UTC),
            dt.datetime(2106, 2, 7, 6, 28, 15, tzinfo=UTC),
        ],
    ),
    (
        "ts3",
        "DateTime64(3, 'UTC')",
        [
            dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
            dt.datetime(1900, 1, 1, 0, 0, 0, 1000, tzinfo=UTC),
            dt.datetime(2262, 4, 11, 23, 47, 16, 854000, tzinfo=UTC),
        ],
    ),
    (
        "ts6",
        "Nullable(DateTime64(6, 'UTC'))",
        [
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            None,
            dt.datetime(2026, 3, 1, 0, 0, 0, 1, tzinfo=UTC),
        ],
    ),
    ("u", "UUID", [uuid.UUID(int=0), uuid.UUID(int=2**128 - 1), uuid.UUID("123e4567-e89b-12d3-a456-426614174000")]),
]


BINARY_ONLY = {"b", "fx"}  # bytes that are no text: a table mapping strings to text leaves them out


def _types(mapping: StringMapping) -> list[tuple[str, str, list[object]]]:
    return [t for t in TYPES if mapping is StringMapping.BINARY or t[0] not in BINARY_ONLY]


def _plan(schema: str, mapping: StringMapping) -> TargetPlan:
    columns = tuple(
        TargetColumn(name=name, source_type=source_type, string_mapping=mapping)
        for name, source_type, _ in _types(mapping)
    )
    return TargetPlan(
        invocation_id="digest-differential-1",
        target_schema=schema,
        target_table="boundaries",
        columns=columns,
        mode=PublicationMode.FULL_REFRESH,
    )


def _rows(mapping: StringMapping) -> list[tuple[object, ...]]:
    return [tuple(values[i] for _, _, values in _types(mapping)) for i in range(3)]


@pytest.fixture
def pg(postgres_server: PostgresServer) -> PostgresHarness:
    return PostgresHarness(postgres_server.dsn)


@pytest.mark.parametrize("mapping", list(StringMapping))
def test_server_digest_equals_the_python_digest_on_boundary_values(pg: PostgresHarness, mapping: StringMapping) -> None:
    plan = _plan(pg.schema, mapping)
    rows = _rows(mapping)
    expected = evidence(plan, 0, rows)
    table, invocation = bind(plan)
    server = PostgresTransferTarget(pg._connect, pg.copy_connect, table, verification="server")
    readback = PostgresTransferTarget(pg._connect, pg.copy_connect, table, verification="readback")
    try:
        server.prepare(invocation)
        server.load_chunk(invocation, 0, chunk(invocation, rows))
        assert server.verify_chunk(invocation, expected) == readback.verify_chunk(invocation, expected) == expected
    finally:
        pg.close()


@pytest.mark.parametrize("column", [name for name, _, _ in TYPES])
def test_one_changed_value_changes_the_server_digest(postgres_server: PostgresServer, column: str) -> None:
    pg = PostgresHarness(postgres_server.dsn)
    plan = _plan(pg.schema, StringMapping.BINARY)
    rows = _rows(StringMapping.BINARY)
    position = [name for name, _, _ in TYPES].index(column)
    changed = list(rows[0])
    changed[position] = rows[2][position] if rows[2][position] != rows[0][position] else rows[1][position]
    table, invocation = bind(plan)
    target = PostgresTransferTarget(pg._connect, pg.copy_connect, table, verification="server")
    try:
        target.prepare(invocation)
        target.load_chunk(invocation, 0, chunk(invocation, [tuple(changed), *rows[1:]]))
        assert target.verify_chunk(invocation, evidence(plan, 0, rows)) != evidence(plan, 0, rows)
    finally:
        pg.close()
