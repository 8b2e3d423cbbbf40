"""The stage format (Arrow IPC): round trip, the vectorised typed sum, and refusals: another build's objects with
``DPONE_RECORD_FORMAT_UNSUPPORTED``, damage with ``native_transfer.stage_integrity_failed``."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.typed_digest import MultisetDigest
from airflow_provider_dpone.transfer.route.schema_admission import map_type
from airflow_provider_dpone.transfer.values.arrow_chunk import (
    MAGIC,
    PRE_RELEASE_MAGIC,
    conform,
    decode_chunk,
    encode_chunk,
    hash_sum,
    row_hashes,
    rows_table,
    table_rows,
)

pytestmark = pytest.mark.unit

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

LOGICALS = [column.logical for column in COLUMNS]


def _digest(batch: list[tuple[object, ...]]) -> MultisetDigest:
    reference = MultisetDigest([column.typed for column in COLUMNS])
    reference.add_rows(batch)
    return reference


@settings(max_examples=60, deadline=None)
@given(st.lists(rows, max_size=25))
def test_v2_round_trip_keeps_every_typed_value_and_the_vectorised_sum_is_the_digest(batch) -> None:
    reference = _digest(batch)
    table = rows_table(batch, COLUMNS)
    assert hash_sum(row_hashes(batch, COLUMNS)) == reference.total
    data = encode_chunk(table, COLUMNS, "a" * 32, 3, reference.total)
    staged = decode_chunk(data, COLUMNS)
    assert staged.header["rows"] == len(batch) and staged.header["ordinal"] == 3
    assert staged.header["format"] == "dpone.native-arrow-chunk.v2"
    again = _digest([tuple(row) for row in table_rows(staged.table, LOGICALS)])
    assert (again.rows, again.total) == (reference.rows, reference.total)


@settings(max_examples=40, deadline=None)
@given(st.lists(rows, max_size=25), st.integers(min_value=0, max_value=5))
def test_v2_object_is_byte_for_byte_the_arrow_stream_an_arrow_sink_writes(batch, start) -> None:
    """The object is written into a bytes buffer directly; its bytes are exactly what an Arrow buffer sink produced
    (the encoding sealed before), also for a sliced, multi-chunk table as a chunk buffer can hand over."""
    table = rows_table(batch, COLUMNS)
    table = pa.concat_tables([table, table]).slice(min(start, table.num_rows))
    data = encode_chunk(table, COLUMNS, "a" * 32, 1, 7)
    prefix = len(MAGIC) + 4 + int.from_bytes(data[len(MAGIC) : len(MAGIC) + 4], "big")
    sink = pa.BufferOutputStream()
    sink.write(data[:prefix])
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    assert data == sink.getvalue().to_pybytes()
    assert decode_chunk(data, COLUMNS).table.equals(table)


def test_hash_sum_folds_carries_across_limbs_and_chunks() -> None:
    top = pa.array([b"\xff" * 32] * 3, pa.binary(32))
    chunked = pa.chunked_array([top.slice(0, 1), top.slice(1, 2)])
    assert hash_sum(chunked) == (3 * (2**256 - 1)) % 2**256
    with pytest.raises(DponeError, match="source_snapshot_drift"):
        hash_sum(pa.array([b"\x00" * 31], pa.binary(31)))


def _one_row_object() -> bytes:
    batch = [
        (1, 2, b"x", Decimal("1.0000"), dt.datetime(2026, 1, 1), None, dt.date(2026, 1, 1), True, uuid.UUID(int=5))
    ]
    return encode_chunk(rows_table(batch, COLUMNS), COLUMNS, "a" * 32, 0, 0)


def test_damage_is_refused_never_misread() -> None:
    data = _one_row_object()
    for damaged in (data[:-60], b"DPONE-CHUNK\x07" + data[12:], b"not a chunk"):
        with pytest.raises(DponeError, match="stage_integrity_failed"):
            decode_chunk(damaged, COLUMNS)
    with pytest.raises(DponeError, match="stage_integrity_failed"):
        decode_chunk(data, COLUMNS[:-1])


def test_objects_of_another_builds_format_are_refused_naming_the_format_and_its_writer() -> None:
    """A pre-release object (per-row frames, ``dpone.native-typed-chunk.v1``) and an object whose header names an
    unknown format are another build's: refused with the one format code, never decoded."""
    data = _one_row_object()
    header_length = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 4], "big")
    pre_release = PRE_RELEASE_MAGIC + data[len(MAGIC) : len(MAGIC) + 4 + header_length]
    future = data.replace(b"dpone.native-arrow-chunk.v2", b"dpone.native-arrow-chunk.v9")
    for stored, named in (
        (pre_release, "stage object dpone.native-typed-chunk.v1: written by a pre-release dpone build"),
        (future, "stage object format dpone.native-arrow-chunk.v9: written by a build other than this one"),
    ):
        with pytest.raises(DponeError) as info:
            decode_chunk(stored, COLUMNS)
        assert info.value.code == "DPONE_RECORD_FORMAT_UNSUPPORTED"
        assert named in info.value.detail and "this build is dpone 0.1.0" in info.value.detail


def test_wide_decimal_neighbours_stay_distinct_and_exact() -> None:
    column = [map_type("d", "Decimal(38, 4)", implicit_utc=False)]
    low, high = Decimal("9999999999999999999999999999999999.9998"), Decimal("9999999999999999999999999999999999.9999")
    sealed = []
    for value in (low, high):
        table = rows_table([(value,)], column)
        total = hash_sum(row_hashes([(value,)], column))
        sealed.append((total, decode_chunk(encode_chunk(table, column, "a" * 32, 0, total), column).table))
    assert sealed[0][0] != sealed[1][0]
    assert [table_rows(table, [column[0].logical])[0][0] for _, table in sealed] == [low, high]


def test_conform_accepts_only_the_admitted_representations() -> None:
    narrow = [COLUMNS[0], COLUMNS[5]]  # Int64, Nullable(DateTime('UTC'))
    admitted = pa.schema([pa.field("i", pa.int64(), nullable=False), pa.field("t0", pa.uint32())])
    seconds = pa.table({"i": pa.array([1], pa.int64()), "t0": pa.array([86400], pa.uint32())}, schema=admitted)
    conformed = conform(seconds, narrow)
    assert conformed.column("t0").to_pylist() == [dt.datetime(1970, 1, 2, tzinfo=dt.UTC)]
    for drifted in (
        pa.table(
            {"i": pa.array([1], pa.int32()), "t0": pa.array([1], pa.uint32())},
            schema=admitted.set(0, pa.field("i", pa.int32(), nullable=False)),
        ),
        pa.table({"x": pa.array([1], pa.int64()), "t0": pa.array([1], pa.uint32())}),
        pa.table({"i": pa.array([1], pa.int64()), "t0": pa.array([1], pa.uint32())}),  # `i` nullable: not admitted
    ):
        with pytest.raises(DponeError, match="source_snapshot_drift"):
            conform(drifted, narrow)
