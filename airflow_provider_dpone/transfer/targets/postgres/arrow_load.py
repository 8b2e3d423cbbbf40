"""A chunk as the Arrow table that PostgreSQL's binary COPY takes (ADBC), checked column by column before any byte.

Binary COPY needs each column in its exact wire type, so every staged column is cast to the Arrow type of its
PostgreSQL column (``int2/int4/int8``, ``numeric`` as ``decimal128(P, S)``, ``bytea``, ``text``, ``bool``, ``date``,
``timestamptz``, ``uuid``). Casts are vectorised and safe: a value that does not fit, bytes that are not strict
UTF-8 in a text column, a NUL in text, a FixedString of another length, or a NULL in a non-nullable column is refused
with ``native_transfer.target_value_invalid`` naming the column, never the value.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.values.target import CHUNK_COLUMN, ROW_COLUMN, TargetPlan
from airflow_provider_dpone.transfer.values.target_types import ColumnType, StorageKind

_INTEGERS: Final[dict[str, pa.DataType]] = {"smallint": pa.int16(), "integer": pa.int32(), "bigint": pa.int64()}


def wire_type(column: ColumnType) -> pa.DataType:
    """The Arrow type whose binary COPY encoding is the PostgreSQL column's."""
    storage = column.storage
    if storage is StorageKind.INTEGER:
        return _INTEGERS[column.postgres]
    if storage is StorageKind.UINT64:
        return pa.decimal128(20, 0)
    if storage is StorageKind.DECIMAL:
        return pa.decimal128(column.precision, column.scale)
    if storage is StorageKind.BINARY:
        return pa.binary()
    if storage is StorageKind.TEXT:
        return pa.string()
    if storage is StorageKind.BOOLEAN:
        return pa.bool_()
    if storage is StorageKind.DATE:
        return pa.date32()
    if storage is StorageKind.DATETIME:
        return pa.timestamp("us", tz="UTC")
    return pa.uuid()


def _invalid(name: str, why: str) -> DponeError:
    return DponeError("native_transfer.target_value_invalid", f"column {name}: {why}")


def _cast(name: str, column: ColumnType, array: pa.ChunkedArray) -> pa.ChunkedArray:
    target = wire_type(column)
    if not column.nullable and array.null_count:
        raise _invalid(name, "NULL in a non-nullable column")
    if array.type == target:
        cast = array
    else:
        try:
            cast = array.cast(target, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            raise _invalid(name, f"{array.type} values do not fit {column.postgres} exactly") from None
    if (
        column.storage is StorageKind.INTEGER
        and column.int_min is not None
        and column.int_max is not None
        and len(cast)
    ):
        bounds = pc.min_max(cast)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is not None and (low < column.int_min or high > column.int_max):
            raise _invalid(name, "not an integer in range")
    if column.storage is StorageKind.TEXT and pc.any(pc.match_substring(cast, "\x00")).as_py():
        raise _invalid(name, "NUL character cannot be stored as text here (map the column as binary)")
    if column.storage is StorageKind.BINARY and column.fixed_length is not None:
        lengths = pc.binary_length(cast)
        if pc.any(pc.not_equal(lengths, column.fixed_length)).as_py():
            raise _invalid(name, f"FixedString({column.fixed_length}) value of another length")
    return cast


def copy_table(data: pa.Table, plan: TargetPlan, ordinal: int) -> pa.Table:
    """The staging rows of one chunk: the ordinal, each row's position, then every planned column in its wire type."""
    if data.num_columns != len(plan.columns):
        raise DponeError("native_transfer.target_value_invalid", f"{data.num_columns} columns for {len(plan.columns)}")
    columns = [_cast(c.name, c.column_type, array) for c, array in zip(plan.columns, data.columns, strict=True)]
    table = pa.Table.from_arrays(columns, names=list(plan.column_names))
    table = table.add_column(0, ROW_COLUMN, pa.array(np.arange(table.num_rows, dtype=np.int32)))
    return table.add_column(0, CHUNK_COLUMN, pa.array(np.full(table.num_rows, ordinal, dtype=np.int32)))
