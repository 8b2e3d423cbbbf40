"""The durable stage object format ``dpone.native-arrow-chunk.v2``: one chunk as an Arrow IPC stream.

Layout::

    MAGIC | u32 header length | canonical JSON header | Arrow IPC stream (one table, the stage schema)

Values are stored in their typed Arrow form (:func:`stage_schema`), decoded and re-encoded by Arrow's C++ code, never
value by value in Python. The chunk's typed sum is the modular sum of the row SHA-256s that the source computed in the
same SELECT over the canonical typed encoding (``core/typed_digest.py``); it is summed here as eight 32-bit limbs
with numpy. A v2 object is protected by its SHA-256 (bound in the journal's chunk receipt); the typed sum is proven
end to end when the target recomputes it over what it stored. An object of another build's format (the per-row
frames of pre-release builds, ``dpone.native-typed-chunk.v1``, or an unknown header format) is refused with
``DPONE_RECORD_FORMAT_UNSUPPORTED``; bytes that are no stage object at all with
``native_transfer.stage_integrity_failed``.
"""

from __future__ import annotations

import datetime as dt
import io
import struct
import uuid
from collections.abc import Iterable, Sequence
from typing import Any, Final

import numpy as np
import pyarrow as pa

from airflow_provider_dpone.core.canonical import canonical_json_bytes, parse_canonical_json
from airflow_provider_dpone.core.columns import NativeColumn, columns_sha256
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.record_format import ANOTHER_BUILD, PRE_RELEASE, format_name, refusal
from airflow_provider_dpone.core.typed_digest import HASH_LIMBS, LogicalType, fold_limb_sums, row_hash
from airflow_provider_dpone.transfer.values.chunk import PRE_RELEASE_STAGE_FORMAT, STAGE_FORMAT, typed_sum_hex

MAGIC: Final[bytes] = b"DPONE-ARROW\x02"
PRE_RELEASE_MAGIC: Final[bytes] = b"DPONE-CHUNK\x01"
"""The first bytes of a pre-release stage object (``dpone.native-typed-chunk.v1``): named only to refuse it."""
SEALED_METADATA_KEY: Final[bytes] = b"dpone.sealed-chunk"
"""Schema metadata of a table decoded from a v2 stage object: its sealed ordinal, rows and typed sum, so a target
that proves it stored exactly these rows can name the typed sum they carry (``sealed_facts``)."""
_U32: Final = struct.Struct(">I")
HASH_BYTES: Final = 32


def _integer_type(column: NativeColumn) -> pa.DataType:
    bits = column.integer_bits or 64
    signed = column.integer_signed is not False
    return {
        (8, True): pa.int8(),
        (16, True): pa.int16(),
        (32, True): pa.int32(),
        (64, True): pa.int64(),
        (8, False): pa.uint8(),
        (16, False): pa.uint16(),
        (32, False): pa.uint32(),
        (64, False): pa.uint64(),
    }[(bits, signed)]


def _time_unit(scale: int) -> str:
    return "s" if scale == 0 else "ms" if scale <= 3 else "us"


def stage_type(column: NativeColumn) -> pa.DataType:
    """The Arrow type a column is staged as: exact for every admitted type (strings as bytes, UTC timestamps)."""
    logical = column.logical
    if logical is LogicalType.INTEGER:
        return _integer_type(column)
    if logical is LogicalType.DECIMAL:
        return pa.decimal128(column.precision or 38, column.scale)
    if logical is LogicalType.STRING:
        return pa.binary()
    if logical is LogicalType.BOOLEAN:
        return pa.bool_()
    if logical is LogicalType.DATE:
        return pa.date32()
    if logical is LogicalType.DATETIME:
        return pa.timestamp(_time_unit(column.scale), tz="UTC")
    return pa.uuid()


def stage_schema(columns: Sequence[NativeColumn]) -> pa.Schema:
    return pa.schema([pa.field(c.name, stage_type(c), nullable=c.nullable) for c in columns])


def _widened(source: pa.DataType, target: pa.DataType) -> bool:
    """The only representation changes on the way in: FixedString to bytes, DateTime's UInt32 seconds to a timestamp."""
    if pa.types.is_fixed_size_binary(source) and not isinstance(source, pa.ExtensionType):
        return bool(target == pa.binary())
    return bool(source == pa.uint32() and target == pa.timestamp("s", tz="UTC"))


def conform(table: pa.Table, columns: Sequence[NativeColumn]) -> pa.Table:
    """A source block's columns in the stage schema; any other type or nullability than admitted is drift."""
    schema = stage_schema(columns)
    if table.column_names != schema.names:
        raise DponeError("native_transfer.source_snapshot_drift", "result columns differ from the admitted projection")
    arrays = []
    for field, source, array in zip(schema, table.schema, table.columns, strict=True):
        if source.nullable and not field.nullable:
            raise DponeError("native_transfer.source_snapshot_drift", f"column {field.name}: nullable in the result")
        if array.type == field.type:
            arrays.append(array)
        elif _widened(array.type, field.type):
            storage = array.cast(pa.int64()) if array.type == pa.uint32() else array
            arrays.append(storage.cast(field.type))
        else:
            raise DponeError(
                "native_transfer.source_snapshot_drift", f"column {field.name}: {array.type} is not {field.type}"
            )
    return pa.Table.from_arrays(arrays, schema=schema)


def hash_sum(hashes: pa.Array | pa.ChunkedArray) -> int:
    """The modular sum of 32-byte big-endian row hashes, vectorised as eight exact 32-bit limb sums."""
    chunks = hashes.chunks if isinstance(hashes, pa.ChunkedArray) else [hashes]
    limbs = np.zeros(HASH_LIMBS, dtype=np.uint64)
    for chunk in chunks:
        if not len(chunk):
            continue
        if chunk.type != pa.binary(HASH_BYTES) or chunk.null_count:
            raise DponeError("native_transfer.source_snapshot_drift", "row hashes are not 32-byte values")
        buffer = chunk.buffers()[-1]
        words = np.frombuffer(buffer, dtype=">u4", count=len(chunk) * HASH_LIMBS, offset=chunk.offset * HASH_BYTES)
        limbs += words.reshape(-1, HASH_LIMBS).astype(np.uint64).sum(axis=0, dtype=np.uint64)
    return fold_limb_sums([int(value) for value in limbs])


def encode_chunk(
    table: pa.Table, columns: Sequence[NativeColumn], invocation_id: str, ordinal: int, total: int
) -> bytes:
    """The complete v2 stage object for one chunk (``table`` already in the stage schema)."""
    header = canonical_json_bytes(
        {
            "format": STAGE_FORMAT,
            "columns_sha256": columns_sha256(columns),
            "invocation_id": invocation_id,
            "ordinal": ordinal,
            "rows": table.num_rows,
            "typed_sum": typed_sum_hex(total),
        }
    )
    # Header and body are written straight into one growing bytes buffer, returned without a final copy: an Arrow
    # sink would be a second chunk-sized allocation and ``to_pybytes`` a third, each paid in fresh pages per chunk.
    sink = io.BytesIO()
    sink.write(MAGIC + _U32.pack(len(header)) + header)
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


class StagedChunk:
    """A stage object read back: its header facts and its rows as a table in the stage schema."""

    def __init__(self, header: dict[str, Any], table: pa.Table) -> None:
        self.header = header
        self.table = table


def decode_chunk(data: bytes, columns: Sequence[NativeColumn], *, decode_rows: bool = True) -> StagedChunk:
    """Read a stage object of this build's format; another build's is refused, anything else is no stage object."""
    if data.startswith(PRE_RELEASE_MAGIC):
        raise refusal(f"stage object {PRE_RELEASE_STAGE_FORMAT}", PRE_RELEASE)
    if not data.startswith(MAGIC):
        raise DponeError("native_transfer.stage_integrity_failed", "not a stage object")
    start = len(MAGIC) + 4
    if len(data) < start:
        raise DponeError("native_transfer.stage_integrity_failed", "truncated chunk header")
    (size,) = _U32.unpack_from(data, len(MAGIC))
    try:
        header = parse_canonical_json(data[start : start + size])
    except DponeError:
        raise DponeError("native_transfer.stage_integrity_failed", "chunk header is not canonical") from None
    if not isinstance(header, dict):
        raise DponeError("native_transfer.stage_integrity_failed", "chunk header is not an object")
    if header.get("format") != STAGE_FORMAT:
        raise refusal(f"stage object format {format_name(header.get('format'))}", ANOTHER_BUILD)
    if header.get("columns_sha256") != columns_sha256(columns):
        raise DponeError("native_transfer.stage_integrity_failed", "chunk column layout differs from the plan")
    if not decode_rows:
        return StagedChunk(header, stage_schema(columns).empty_table())
    try:
        table = pa.ipc.open_stream(pa.py_buffer(data)[start + size :]).read_all()
    except (pa.ArrowInvalid, OSError):
        raise DponeError("native_transfer.stage_integrity_failed", "chunk body is not an Arrow stream") from None
    if not table.schema.equals(stage_schema(columns)) or table.num_rows != header.get("rows"):
        raise DponeError("native_transfer.stage_integrity_failed", "chunk body differs from its header")
    facts = {"ordinal": header.get("ordinal"), "rows": table.num_rows, "typed_sum": header.get("typed_sum")}
    return StagedChunk(header, table.replace_schema_metadata({SEALED_METADATA_KEY: canonical_json_bytes(facts)}))


def sealed_facts(table: pa.Table) -> tuple[int, int, str] | None:
    """``(ordinal, rows, typed_sum)`` of a table decoded from a sealed stage object; None for any other table."""
    raw = (table.schema.metadata or {}).get(SEALED_METADATA_KEY)
    if raw is None:
        return None
    facts = parse_canonical_json(raw)
    if not isinstance(facts, dict):
        return None
    ordinal, rows, typed_sum = facts.get("ordinal"), facts.get("rows"), facts.get("typed_sum")
    if not isinstance(ordinal, int) or rows != table.num_rows or not isinstance(typed_sum, str):
        return None
    return ordinal, rows, typed_sum


def rows_table(rows: Iterable[Sequence[object]], columns: Sequence[NativeColumn]) -> pa.Table:
    """Python rows (the typed digest's value forms) as a table in the stage schema."""
    listed = [tuple(row) for row in rows]
    schema = stage_schema(columns)
    arrays = []
    for index, field in enumerate(schema):
        values = [row[index] for row in listed]
        if field.type == pa.binary():
            values = [value.encode("utf-8") if isinstance(value, str) else value for value in values]
        elif isinstance(field.type, pa.UuidType):
            values = [_uuid_bytes(value) for value in values]
            arrays.append(pa.ExtensionArray.from_storage(field.type, pa.array(values, pa.binary(16))))
            continue
        try:
            arrays.append(pa.array(values, type=field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            raise DponeError("DPONE_TYPED_VALUE_INVALID", f"column {field.name}: value outside its type") from None
    return pa.Table.from_arrays(arrays, schema=schema)


def row_hashes(rows: Sequence[Sequence[object]], columns: Sequence[NativeColumn]) -> pa.Array:
    """Each row's typed SHA-256 as computed by the reference digest (for sources that hand over Python values)."""
    typed = [column.typed for column in columns]
    return pa.array([row_hash(typed, row).to_bytes(HASH_BYTES, "big") for row in rows], pa.binary(HASH_BYTES))


def _uuid_bytes(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return uuid.UUID(value).bytes
    if isinstance(value, uuid.UUID):
        return value.bytes
    raise DponeError("DPONE_TYPED_VALUE_INVALID", f"{type(value).__name__} is not a uuid value")


def _text_or_bytes(value: bytes) -> object:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value


def table_columns(table: pa.Table | pa.RecordBatch, logicals: Sequence[LogicalType]) -> list[list[object]]:
    """A staged table's columns as Python values in the forms the row-based targets take (text when UTF-8, aware UTC
    datetimes), one list per column."""
    decoded: list[list[object]] = []
    for logical, array in zip(logicals, table.columns, strict=True):
        values: list[Any] = array.to_pylist()
        if logical is LogicalType.STRING:
            values = [None if v is None else _text_or_bytes(v) for v in values]
        elif logical is LogicalType.DATETIME:
            values = [None if v is None else v.replace(tzinfo=dt.UTC) for v in values]
        decoded.append(values)
    return decoded


def table_rows(table: pa.Table, logicals: Sequence[LogicalType]) -> list[tuple[object, ...]]:
    """A staged table as Python rows (:func:`table_columns`, row by row)."""
    decoded = table_columns(table, logicals)
    return list(zip(*decoded, strict=True)) if decoded else []


def chunk_rows(
    data: pa.Table | Iterable[Sequence[object]], logicals: Sequence[LogicalType]
) -> Iterable[Sequence[object]]:
    """Rows of a chunk handed to a row-based target: a staged table is converted, rows pass through."""
    return table_rows(data, logicals) if isinstance(data, pa.Table) else data
