"""Golden test: the row SHA-256 ClickHouse computes in the data SELECT equals the Python typed digest, per row.

Every admitted type at its minimum and maximum, zeros, empties and NULLs (``bounds``), strings of every byte value
and over 8,000 bytes (``large``), multi-byte text, and 100 columns cycling through the types (``wide``): each row's
hash from the engine (``core/clickhouse/row_hash.py``) must be byte-identical to
``core.typed_digest.row_hash`` of the same row's values as they are staged (Arrow, in the stage schema).
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa
import pytest

from airflow_provider_dpone.core.clickhouse.row_hash import (
    ROW_HASH_COLUMN,
    _text,
    _unwrap,
    row_hash_expression,
    row_hash_sql,
)
from airflow_provider_dpone.core.identifiers import quote_clickhouse
from airflow_provider_dpone.core.typed_digest import row_hash
from airflow_provider_dpone.transfer.route.schema_admission import map_type
from airflow_provider_dpone.transfer.values.arrow_chunk import conform, table_rows
from tests.cluster.clickhouse.test_publication_digest import _columns as _publication_columns
from tests.cluster.clickhouse.test_publication_digest import _query as _publication_query
from tests.support.transfer.native_chdb import admin, db
from tests.support.transfer.native_route_corpus import CORPUS, CorpusTable

__all__ = ["admin", "db"]

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.mark.parametrize("table", CORPUS, ids=[table.name for table in CORPUS])
def test_engine_row_hash_equals_the_typed_digest(admin, db: str, table: CorpusTable) -> None:
    relation = table.create(admin, db)
    described = admin.query(
        "SELECT name, type FROM system.columns WHERE database = {d:String} AND table = {t:String} ORDER BY position",
        parameters={"d": db, "t": relation.table},
    ).result_rows
    columns = tuple(map_type(name, type_text, implicit_utc=True) for name, type_text in described)
    projection = ", ".join(quote_clickhouse(column.name) for column in columns)
    query = f"SELECT {projection}, {row_hash_sql(columns)} FROM {quote_clickhouse(db)}.{quote_clickhouse(table.name)}"
    checked = 0
    with admin.query_arrow_stream(query, use_strings=False) as stream:
        for batch in stream:
            assert batch.schema.names[-1] == ROW_HASH_COLUMN
            staged = conform(pa.Table.from_batches([batch]).drop_columns([ROW_HASH_COLUMN]), columns)
            rows = table_rows(staged, [column.logical for column in columns])
            typed = [column.typed for column in columns]
            for index, (row, engine_hash) in enumerate(
                zip(rows, batch.column(ROW_HASH_COLUMN).to_pylist(), strict=True)
            ):
                assert engine_hash == row_hash(typed, row).to_bytes(32, "big"), (table.name, index)
                checked += 1
    assert checked == table.rows


_NULLABLE_TYPES: Final = (
    "Nullable(UInt8)",
    "Nullable(Int32)",
    "Nullable(UInt64)",
    "Nullable(Decimal(9, 2))",
    "Nullable(Decimal(18, 4))",
    "Nullable(String)",
    "Nullable(FixedString(4))",
    "LowCardinality(Nullable(String))",
    "Nullable(Bool)",
    "Nullable(Date)",
    "Nullable(DateTime('UTC'))",
    "Nullable(DateTime64(6, 'UTC'))",
)
_NULLABLE_ROWS: Final = (
    ("NULL",) * 12,
    ("0", "0", "0", "0", "0", "''", "unhex('00000000')", "''", "false", "'1970-01-01'", "0", "0"),
    (
        "255",
        "-2147483648",
        "18446744073709551615",
        "-9999999.99",
        "99999999999999.9999",
        "unhex('00')",
        "unhex('61000000')",
        "'x'",
        "true",
        "'2149-06-06'",
        "4294967295",
        "'2299-12-31 23:59:59.999999'",
    ),
)
NULLABLES: Final = CorpusTable(
    "nullables",
    "(k UInt32, " + ", ".join(f"n{index} {type_}" for index, type_ in enumerate(_NULLABLE_TYPES)) + ")",
    "ReplacingMergeTree ORDER BY k",
    tuple(f"VALUES ({row}, {', '.join(values)})" for row, values in enumerate(_NULLABLE_ROWS)),
    rows=3,
)
"""Every admitted type as ``Nullable`` (and ``LowCardinality(Nullable(String))``): NULL, zero/empty, NUL-padded and
extreme values, each present field next to a NULL one (a NULL field has no bytes of its own but its prefix)."""


def test_nullable_fields_hash_as_the_typed_digest(admin, db: str) -> None:
    test_engine_row_hash_equals_the_typed_digest(admin, db, NULLABLES)


def _nested_field(name: str, type_text: str) -> str:
    """The form the row hash was first written in (``concat`` per field, a NULL field as one literal): the bytes any
    stored digest-version-2 record and stage object were computed over."""
    inner, low_cardinality = _unwrap(type_text, "LowCardinality")
    base, nullable = _unwrap(inner, "Nullable")
    quoted = quote_clickhouse(name)

    def present(value: str) -> str:
        text = _text(base, value, low_cardinality=low_cardinality)
        return f"concat(reverse(reinterpretAsFixedString(toUInt32(length({text}) + 1))), '\\x01', {text})"

    if not nullable:
        return present(quoted)
    return f"if(isNull({quoted}), unhex('0000000100'), {present(f'assumeNotNull({quoted})')})"


def test_the_publication_profile_keeps_the_bytes_of_the_first_form(admin, db: str) -> None:
    """Floats (``-0.0``, NaN, infinities), IPv4/IPv6, the widest integers and decimals, time zones, NUL-padded strings,
    each plain and ``Nullable`` (NULL in the last row), plus ``LowCardinality(Nullable(String))``: the row hash is
    byte-identical to the first form's, so existing content digests stay valid."""
    columns = (*_publication_columns(), ("lc", "LowCardinality(Nullable(String))"))
    table = f"{quote_clickhouse(db)}.profile"
    admin.command(f"CREATE TABLE {table} ({', '.join(f'`{n}` {t}' for n, t in columns)}) ENGINE = Memory")
    values = ", ".join(f"`{name}`" for name, _ in columns[:-1])
    lc = "multiIf(`c0` = -128, '', `c0` = 127, unhex('00ff'), NULL)"
    admin.command(f"INSERT INTO {table} SELECT {values}, {lc} FROM ({_publication_query(columns[:-1])})")
    old = f"SHA256(concat('dpone.typed-row.v1\\0', {', '.join(_nested_field(n, t) for n, t in columns)}))"
    rows = admin.query(f"SELECT hex({row_hash_expression(columns)}), hex({old}) FROM {table}").result_rows
    assert len(rows) == 3
    assert len({new for new, _ in rows}) == 3
    assert all(new == first for new, first in rows)
