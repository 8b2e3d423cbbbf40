"""Stage format v2 (Arrow IPC): round trip, the vectorised typed sum, refusals, and v1 objects still read."""

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
from airflow_provider_dpone.transfer.values.arrow_chunk import (
    MAGIC,
    conform,
    decode_chunk,
    encode_chunk,
    hash_sum,
    row_hashes,
    rows_table,
    table_rows,
)
from tests.fixtures.stage_v1_writer import ChunkEncoder
from tests.unit.test_native_stage_codec import COLUMNS, rows

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


@settings(max_examples=30, deadline=None)
@given(st.lists(rows, max_size=10))
def test_v1_objects_sealed_before_the_upgrade_still_decode(batch) -> None:
    encoder = ChunkEncoder(COLUMNS)
    encoder.add_columns([list(column) for column in zip(*batch, strict=True)] or [[] for _ in COLUMNS], 0, len(batch))
    staged = decode_chunk(encoder.seal("a" * 32, 0), COLUMNS)
    assert staged.header["format"] == "dpone.native-typed-chunk.v1"
    again = _digest([tuple(row) for row in table_rows(staged.table, LOGICALS)])
    assert (again.rows, again.total) == (encoder.rows, encoder.total)


def test_unknown_formats_and_damage_are_refused_never_misread() -> None:
    batch = [
        (1, 2, b"x", Decimal("1.0000"), dt.datetime(2026, 1, 1), None, dt.date(2026, 1, 1), True, uuid.UUID(int=5))
    ]
    data = encode_chunk(rows_table(batch, COLUMNS), COLUMNS, "a" * 32, 0, 0)
    future = data.replace(b"dpone.native-arrow-chunk.v2", b"dpone.native-arrow-chunk.v9")
    for damaged in (future, data[:-60], b"DPONE-CHUNK\x07" + data[12:], b"not a chunk"):
        with pytest.raises(DponeError, match="stage_integrity_failed"):
            decode_chunk(damaged, COLUMNS)
    with pytest.raises(DponeError, match="stage_integrity_failed"):
        decode_chunk(data, COLUMNS[:-1])


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
