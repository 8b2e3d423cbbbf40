"""A chunk's Arrow table as the rows pymssql's ``bulk_copy`` sends: checked and encoded column by column.

The BCP backend loads the same Arrow batches the route stages and PostgreSQL copies. Each column is checked once,
vectorised (a NULL in a non-nullable column, an integer out of the column's range, a decimal that does not fit
``DECIMAL(P,S)``, a FixedString of another length, text that is not strict UTF-8, a time finer than the column's
precision: ``native_transfer.target_value_invalid`` naming the column, never the value), then encoded in the exact forms
of :mod:`values` (why those forms: see there): integers, booleans and bytes as they are, UInt64 as digits, decimals in
fixed-point notation, dates and datetimes as ISO text with six fractional digits, UUIDs in canonical text. Only the
values Arrow would spell otherwise (its decimal text switches to exponent notation) go through Python one by one.

A row holding a value BCP cannot send exactly (an empty string or binary, or text FreeTDS would trim: see
:mod:`loaders`) cannot travel by BCP; :func:`bcp_rows` marks it, decided per value and vectorised, and the loader
sends it as a parameter row instead, from :func:`canonical_row`. The parameterized backend takes the same
checks and encodings column by column (:func:`parameter_columns`), in its own forms where pymssql's parameter
quoting needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.targets.mssql.values import text_or_utf16
from airflow_provider_dpone.transfer.values.arrow_chunk import chunk_rows
from airflow_provider_dpone.transfer.values.target import TargetPlan
from airflow_provider_dpone.transfer.values.target_types import ColumnType, StorageKind
from airflow_provider_dpone.transfer.values.target_values import RowConverter

SLICE_ROWS: Final[int] = 8192  # rows encoded at once: Python objects are made for one slice at a time
_HEX: Final = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_UUID_DASHES: Final = (8, 12, 16, 20)  # hex positions before which the canonical text has a dash


def _invalid(name: str, why: str) -> DponeError:
    return DponeError("native_transfer.target_value_invalid", f"column {name}: {why}")


def _check(name: str, column: ColumnType, array: pa.ChunkedArray) -> pa.ChunkedArray:
    """The column refused as RowConverter refuses it (BCP binds text with a length, so NUL is allowed), or its
    values in the Arrow type they are encoded from."""
    if not column.nullable and array.null_count:
        raise _invalid(name, "NULL in a non-nullable column")
    storage = column.storage
    if storage is StorageKind.UUID and not (isinstance(array.type, pa.UuidType) or array.type == pa.binary(16)):
        raise _invalid(name, f"{array.type} values are not 16-byte UUIDs")  # the hex encoding reads 16-byte slots
    try:
        if storage is StorageKind.TEXT:
            return array.cast(pa.string(), safe=True)
        if storage is StorageKind.DECIMAL:
            return array.cast(pa.decimal128(column.precision, column.scale), safe=True)
        if storage is StorageKind.DATETIME:
            array = array.cast(pa.timestamp("us", tz="UTC"), safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        raise _invalid(name, f"{array.type} values do not fit {column.tsql} exactly") from None
    if storage in (StorageKind.INTEGER, StorageKind.UINT64) and len(array) and array.null_count < len(array):
        bounds = pc.min_max(array)
        assert column.int_min is not None and column.int_max is not None
        if bounds["min"].as_py() < column.int_min or bounds["max"].as_py() > column.int_max:
            raise _invalid(name, "not an integer in range")
    fixed = column.fixed_length
    if (
        storage is StorageKind.BINARY
        and fixed is not None
        and pc.any(pc.not_equal(pc.binary_length(array), fixed)).as_py()
    ):
        raise _invalid(name, f"FixedString({column.fixed_length}) value of another length")
    if storage is StorageKind.DATETIME:
        step = 10 ** (6 - column.scale)
        micros = pc.cast(array, pa.int64()).fill_null(0).to_numpy()
        if step > 1 and np.any(micros % step):
            raise _invalid(name, f"finer than DateTime64({column.scale})")
    return array


def uuid_text(array: pa.Array) -> pa.StringArray:
    """Canonical lower-case UUID text, from the 16 bytes of each value (vectorised hex, no Python per value)."""
    storage = array.storage if isinstance(array, pa.ExtensionArray) else array
    raw = np.frombuffer(storage.buffers()[1], dtype=np.uint8)[storage.offset * 16 : (storage.offset + len(array)) * 16]
    nibbles = np.stack([raw >> 4, raw & 0x0F], axis=1).reshape(-1, 32)
    texts = np.insert(_HEX[nibbles], _UUID_DASHES, ord("-"), axis=1).reshape(-1)
    offsets = np.arange(0, 36 * len(array) + 1, 36, dtype=np.int32)
    result: pa.StringArray = pa.StringArray.from_buffers(len(array), pa.py_buffer(offsets), pa.py_buffer(texts))
    if storage.null_count == 0:
        return result
    nulls_kept: pa.StringArray = pc.if_else(storage.is_valid(), result, pa.scalar(None, pa.string()))
    return nulls_kept


def _encode(column: ColumnType, array: pa.Array) -> list[object]:
    storage = column.storage
    if storage is StorageKind.UINT64 or storage is StorageKind.DATE:
        array = pc.cast(array, pa.string())
    elif storage is StorageKind.DATETIME:
        array = pc.cast(pc.cast(array, pa.timestamp("us")), pa.string())
    elif storage is StorageKind.DECIMAL:
        return [None if value is None else format(value, "f") for value in array.to_pylist()]
    elif storage is StorageKind.UUID:
        array = uuid_text(array)
    values: list[object] = array.to_pylist()
    return values


def _parameters(column: ColumnType, array: pa.Array) -> list[object]:
    """The parameterized backend's forms (:mod:`values`) of a checked column: as BCP's, except UInt64 as ``int``,
    binary as ``bytearray`` (pymssql's ``0x`` literal) and datetimes with a ``T`` between date and time."""
    storage = column.storage
    if storage is StorageKind.UINT64:
        values: list[object] = array.to_pylist()
        return values
    if storage is StorageKind.BINARY:
        return [None if value is None else bytearray(value) for value in array.to_pylist()]
    if storage is StorageKind.DATETIME:
        text = pc.cast(pc.cast(array, pa.timestamp("us")), pa.string())
        return pc.replace_substring(text, " ", "T", max_replacements=1).to_pylist()  # type: ignore[no-any-return]
    return _encode(column, array)


_STAGED: Final[dict[StorageKind, Callable[[pa.DataType], bool]]] = {
    StorageKind.INTEGER: pa.types.is_integer,
    StorageKind.UINT64: pa.types.is_integer,
    StorageKind.DECIMAL: pa.types.is_decimal,
    StorageKind.BINARY: lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t),
    StorageKind.TEXT: lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t),
    StorageKind.BOOLEAN: pa.types.is_boolean,
    StorageKind.DATE: pa.types.is_date32,
    StorageKind.DATETIME: pa.types.is_timestamp,
    StorageKind.UUID: lambda t: isinstance(t, pa.UuidType),
}
"""The Arrow types a chunk stages each kind as (``native_arrow_chunk.stage_type``): the vectorised parameter path
takes only these; any other table goes through the per-value converters, as it always did."""


def parameter_columns(batch: pa.RecordBatch, plan: TargetPlan) -> list[list[object]]:
    """One slice's parameters for the parameterized backend, column by column: checked vectorised like BCP's; text
    holding NUL as its UTF-16LE bytes (``values.text_or_utf16``: a parameter row is a C string in pymssql). A column
    not in its staged Arrow type is refused, so the caller's per-value converters decide it."""
    columns = []
    for c, array in zip(plan.columns, batch.columns, strict=True):
        if not _STAGED[c.column_type.storage](array.type):
            raise _invalid(c.name, f"{array.type} is not the staged type")
        checked = _check(c.name, c.column_type, pa.chunked_array([array]))
        encoded = _parameters(c.column_type, checked.combine_chunks())
        if c.column_type.storage is StorageKind.TEXT and pc.any(pc.match_substring(checked, "\x00")).as_py():
            encoded = [None if value is None else text_or_utf16(value) for value in encoded]
        columns.append(encoded)
    return columns


def bcp_altered(column: ColumnType, array: pa.Array) -> np.ndarray:
    """Per value, whether BCP would not store it exactly: empty (FreeTDS sends a zero bind length as NULL), or, for
    text, what ``rtrim_bcpcol`` changes in an NVARCHAR column after conversion to UTF-16: a value of two or more
    code units ending in U+0020 (its trailing spaces go), or a lone U+0000 (it becomes empty). One code unit or
    more per character, so "two or more characters" is "two or more code units"."""
    altered = pc.equal(pc.binary_length(array), 0)
    if column.storage is StorageKind.TEXT:
        trailing = pc.and_(pc.ends_with(array, " "), pc.greater_equal(pc.utf8_length(array), 2))
        altered = pc.or_(pc.or_(altered, trailing), pc.equal(array, "\x00"))
    result: np.ndarray = altered.fill_null(False).to_numpy(zero_copy_only=False)
    return result


def bcp_rows(table: pa.Table, plan: TargetPlan) -> Iterator[tuple[Sequence[object], bool]]:
    """Each row's ``bulk_copy`` values in column order, and whether it holds a value BCP would alter
    (:func:`bcp_altered`)."""
    if table.num_columns != len(plan.columns):
        raise DponeError("native_transfer.target_value_invalid", f"{table.num_columns} columns for {len(plan.columns)}")
    types = [c.column_type for c in plan.columns]
    checked = pa.Table.from_arrays(
        [_check(c.name, t, array) for c, t, array in zip(plan.columns, types, table.columns, strict=True)],
        names=list(plan.column_names),
    )
    strings = [i for i, t in enumerate(types) if t.storage in (StorageKind.TEXT, StorageKind.BINARY)]
    for batch in checked.to_batches(max_chunksize=SLICE_ROWS):
        columns = [_encode(t, batch.column(i)) for i, t in enumerate(types)]
        altered = np.zeros(batch.num_rows, dtype=bool)
        for i in strings:
            altered |= bcp_altered(types[i], batch.column(i))
        yield from zip(zip(*columns, strict=True), altered.tolist(), strict=True)


def canonical_row(table: pa.Table, plan: TargetPlan, index: int) -> Sequence[object]:
    """One row's canonical values (text may hold NUL: the parameter encoder sends such text as UTF-16LE bytes)."""
    (row,) = chunk_rows(table.slice(index, 1), [c.column_type.logical for c in plan.columns])
    convert = RowConverter(plan.column_names, [c.column_type for c in plan.columns], text_allows_nul=True)
    return convert(row, index)
