"""The stage object format: its bytes are exactly the typed digest's preimages, and any damage is detected."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.typed_digest import MultisetDigest, TypedColumn, _encode
from airflow_provider_dpone.transfer.route.schema_admission import map_type
from airflow_provider_dpone.transfer.values.stage_codec import decode_chunk
from tests.fixtures.stage_v1_writer import ChunkEncoder, field_encoder

COLUMNS = [
    map_type("i", "Int64", implicit_utc=False),
    map_type("u", "UInt64", implicit_utc=False),
    map_type("s", "Nullable(String)", implicit_utc=False),
    map_type("d", "Nullable(Decimal(38, 4))", implicit_utc=False),
    map_type("t", "DateTime64(3, 'UTC')", implicit_utc=False),
    map_type("t0", "Nullable(DateTime('UTC'))", implicit_utc=False),
    map_type("day", "Date32", implicit_utc=False),
    map_type("b", "Bool", implicit_utc=False),
    map_type("id", "UUID", implicit_utc=False),
]

datetimes_ms = st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2299, 12, 31)).map(
    lambda value: value.replace(microsecond=value.microsecond // 1000 * 1000)
)
rows = st.tuples(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 2**64 - 1),
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.decimals(min_value=-(10**33), max_value=10**33, places=4, allow_nan=False)),
    datetimes_ms,
    st.one_of(st.none(), datetimes_ms.map(lambda value: value.replace(microsecond=0))),
    st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2299, 12, 31)),
    st.booleans(),
    st.uuids(),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(rows, max_size=25))
def test_sealed_chunk_is_the_typed_digest_of_its_rows_and_decodes_back(batch) -> None:
    encoder = ChunkEncoder(COLUMNS)
    encoder.add_columns([list(column) for column in zip(*batch, strict=True)] or [[] for _ in COLUMNS], 0, len(batch))
    reference = MultisetDigest([column.typed for column in COLUMNS])
    reference.add_rows(batch)
    assert (encoder.rows, encoder.total) == (reference.rows, reference.total)
    decoded = decode_chunk(encoder.seal("a" * 32, 0), COLUMNS)
    again = MultisetDigest([column.typed for column in COLUMNS])
    again.add_rows(decoded.rows)
    assert (again.rows, again.total) == (reference.rows, reference.total)


@pytest.mark.parametrize(
    ("type_", "value"),
    [
        ("Int64", -5),
        ("Nullable(Int64)", None),
        ("String", b"\xff\x00"),
        ("String", "text"),
        ("DateTime64(3, 'UTC')", dt.datetime(1969, 12, 31, 23, 59, 59, 999000)),
        ("DateTime64(3, 'UTC')", dt.datetime(2026, 1, 1, tzinfo=dt.UTC)),
        ("DateTime64(6, 'UTC')", dt.datetime(2026, 1, 1, 0, 0, 0, 1)),
        ("Nullable(String)", None),
    ],
)
def test_fast_paths_are_byte_identical_to_the_digest_encoding(type_: str, value: object) -> None:
    typed: TypedColumn = map_type("c", type_, implicit_utc=False).typed
    encoded = _encode(typed, value)
    assert field_encoder(typed)(value) == len(encoded).to_bytes(4, "big") + encoded


@pytest.mark.parametrize(
    ("type_", "value"),
    [("Int64", True), ("Int64", 1.0), ("String", None), ("DateTime64(3, 'UTC')", dt.datetime(2026, 1, 1, 0, 0, 0, 1))],
)
def test_values_outside_the_type_are_refused_on_the_fast_path_too(type_: str, value: object) -> None:
    with pytest.raises(DponeError) as info:
        field_encoder(map_type("c", type_, implicit_utc=False).typed)(value)
    assert info.value.code == "DPONE_TYPED_VALUE_INVALID"


def sealed() -> bytes:
    encoder = ChunkEncoder(COLUMNS)
    row = (1, 2, b"x", Decimal("1.5"), dt.datetime(2026, 1, 1), None, dt.date(2026, 1, 1), True, uuid.UUID(int=7))
    encoder.add_columns([[value, value] for value in row], 0, 2)
    return encoder.seal("a" * 32, 3)


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-1] + bytes([data[-1] ^ 1]),
        lambda data: data[:-5],
        lambda data: data + b"\x00\x00\x00\x00",
        lambda data: b"X" + data[1:],
        lambda data: data.replace(b'"rows":2', b'"rows":1'),
    ],
)
def test_damaged_chunks_are_refused(damage) -> None:
    with pytest.raises(DponeError) as info:
        decode_chunk(damage(sealed()), COLUMNS)
    assert info.value.code == "native_transfer.stage_integrity_failed"


def test_chunk_of_another_column_layout_is_refused() -> None:
    with pytest.raises(DponeError) as info:
        decode_chunk(sealed(), [*COLUMNS[:-1], map_type("id", "String", implicit_utc=False)])
    assert info.value.code == "native_transfer.stage_integrity_failed"


def test_wide_decimal_neighbours_stay_distinct_and_exact() -> None:
    column = [map_type("d", "Decimal(38, 4)", implicit_utc=False)]
    low, high = Decimal("9999999999999999999999999999999999.9998"), Decimal("9999999999999999999999999999999999.9999")
    sealed_values = []
    for value in (low, high):
        encoder = ChunkEncoder(column)
        encoder.add_columns([[value]], 0, 1)
        sealed_values.append((encoder.total, decode_chunk(encoder.seal("a" * 32, 0), column).rows[0][0]))
    assert sealed_values[0][0] != sealed_values[1][0]
    assert [value for _, value in sealed_values] == [low, high]
