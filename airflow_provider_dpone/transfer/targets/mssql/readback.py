"""Exact read-back of a staged SQL Server chunk: every column in a form the driver returns without loss.

The base's read-back equality (``readback_equality.py``) compares the stored rows with the sealed rows loaded; it may
answer "equal" only if no difference in the stored value can disappear on the way back. pymssql (2.4,
``_mssql.pyx: convert_db_value``) and FreeTDS decide what survives, so each type is read in the form that does:

* ``TINYINT``..``BIGINT``, ``BIT``: as stored (``SQLINT1/2/4/8`` become ``int``, ``SQLBIT`` ``bool``: exact);
* ``VARBINARY``/``BINARY``: as stored (the bytes, ``data[:length]``); FreeTDS's ``dbdata`` returns NULL only for a
  NULL value (``column_cur_size < 0``) and a non-NULL pointer for an empty one, so ``b''`` and NULL stay apart;
* ``DECIMAL(P,S)`` and UInt64's ``DECIMAL(20,0)``: ``CONVERT(VARCHAR(41), v)``, the server's exact decimal text
  (pymssql would convert to text client-side, strip locale characters and build a ``Decimal``): parsed by Arrow into
  the sent type with a safe cast, which refuses any lost digit;
* ``DATETIME2(p)``: 100 ns ticks since 1970 as one ``BIGINT``, ``DATEDIFF_BIG(SECOND, epoch, v) * 10^7 +
  DATEPART(NANOSECOND, v) / 100`` (pymssql returns ``nanosecond // 1000``, dropping the seventh digit; the epoch is
  on a second boundary, so the seconds are floored and the nanoseconds never negative). Compared with the sent
  timestamps scaled to ticks, so a stored 100 ns that the column could hold is never hidden;
* ``DATE``: days since 1970 as ``INT`` (``DATEDIFF(DAY, ...)``), compared with the sent ``date32`` days;
* ``UNIQUEIDENTIFIER``: ``LOWER(CONVERT(CHAR(36), v))``, the server's own canonical text (pymssql builds
  ``uuid.UUID(bytes_le=...)``: a byte-order error made alike on the way in and back would read as equal);
* ``NVARCHAR``: ``CAST(v AS VARBINARY(MAX))``, the stored UTF-16LE code units whatever the collation, decoded
  strictly here (FreeTDS would convert to the client charset and substitute ``?`` for what it cannot map, so an
  unpaired surrogate would read as the ``?`` that might have been sent).

The statement starts with ``SET TEXTSIZE 2147483647`` (the largest ``VARBINARY(MAX)`` value): the server truncates
``(MAX)`` values to the session's TEXTSIZE, which pymssql sets to that value only while the connection's
``conn_properties`` are its defaults. A type without an entry here is not read back (the typed digest decides).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_dpone.core.identifiers import quote_tsql
from airflow_provider_dpone.transfer.targets.mssql.arrow_bcp import uuid_text
from airflow_provider_dpone.transfer.targets.mssql.digest import EPOCH
from airflow_provider_dpone.transfer.targets.mssql.tsql import CHUNK, ROW, staging
from airflow_provider_dpone.transfer.values.target import TargetPlan
from airflow_provider_dpone.transfer.values.target_types import StorageKind

TEXTSIZE: Final[str] = "SET TEXTSIZE 2147483647;"
TICKS_PER_SECOND: Final[int] = 10**7
_UNITS_PER_SECOND: Final[dict[str, int]] = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}
_EXPRESSIONS: Final[dict[StorageKind, str]] = {
    StorageKind.INTEGER: "{v}",
    StorageKind.BOOLEAN: "{v}",
    StorageKind.BINARY: "{v}",
    StorageKind.UINT64: "CONVERT(VARCHAR(41), {v})",
    StorageKind.DECIMAL: "CONVERT(VARCHAR(41), {v})",
    StorageKind.DATETIME: f"DATEDIFF_BIG(SECOND, {EPOCH}, {{v}}) * {TICKS_PER_SECOND} + DATEPART(NANOSECOND, {{v}}) / 100",
    StorageKind.DATE: "DATEDIFF(DAY, CONVERT(DATE, '1970-01-01', 23), {v})",
    StorageKind.UUID: "LOWER(CONVERT(CHAR(36), {v}))",
    StorageKind.TEXT: "CAST({v} AS VARBINARY(MAX))",
}


class NotExactError(Exception):
    """A value read back cannot be the value sent (it does not even decode): the rows are not equal."""


def supported(plan: TargetPlan) -> bool:
    """Whether every column of the plan has an exact read-back form."""
    return all(c.column_type.storage in _EXPRESSIONS for c in plan.columns)


def readback_chunk(plan: TargetPlan) -> str:
    """The committed rows of one ordinal with their positions, each column in its exact form; the ordinal is the
    only parameter."""
    expressions = [ROW] + [
        _EXPRESSIONS[c.column_type.storage].format(v=quote_tsql(c.name)) + f" AS {quote_tsql(c.name)}"
        for c in plan.columns
    ]
    return f"{TEXTSIZE}\nSELECT {', '.join(expressions)} FROM {staging(plan)} WHERE {CHUNK} = %s;"


def _utf16(values: Sequence[object]) -> pa.Array:
    """NVARCHAR's UTF-16LE code units decoded strictly: an unpaired surrogate is not text anything could have sent."""
    texts: list[str | None] = []
    for value in values:
        if value is None:
            texts.append(None)
        elif isinstance(value, bytes):
            try:
                texts.append(value.decode("utf-16-le"))
            except UnicodeDecodeError:
                raise NotExactError from None
        else:
            raise NotExactError
    return pa.array(texts, pa.string())


_DECODERS: Final[dict[StorageKind, Callable[[Sequence[object]], pa.Array]]] = {
    StorageKind.INTEGER: lambda values: pa.array(values, pa.int64()),
    StorageKind.BOOLEAN: lambda values: pa.array(values, pa.bool_()),
    StorageKind.BINARY: lambda values: pa.array(values, pa.binary()),
    StorageKind.UINT64: lambda values: pa.array(values, pa.string()),
    StorageKind.DECIMAL: lambda values: pa.array(values, pa.string()),
    StorageKind.DATETIME: lambda values: pa.array(values, pa.int64()),
    StorageKind.DATE: lambda values: pa.array(values, pa.int32()),
    StorageKind.UUID: lambda values: pa.array(values, pa.string()),
    StorageKind.TEXT: _utf16,
}


def stored_table(plan: TargetPlan, rows: Sequence[Sequence[object]]) -> pa.Table:
    """The rows the read-back statement returned (position first), column by column as Arrow arrays; raises
    :class:`NotExactError` when a value does not fit the form its expression returns."""
    columns: list[Sequence[object]] = [list(c) for c in zip(*rows, strict=True)] if rows else []
    if not columns:
        columns = [[] for _ in range(len(plan.columns) + 1)]
    if len(columns) != len(plan.columns) + 1:
        raise NotExactError
    try:
        arrays = [pa.array(columns[0], pa.int64())] + [
            _DECODERS[c.column_type.storage](values) for c, values in zip(plan.columns, columns[1:], strict=True)
        ]
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        raise NotExactError from None
    return pa.Table.from_arrays(arrays, names=["position", *plan.column_names])


def _uuid_text(array: pa.ChunkedArray) -> pa.ChunkedArray:
    """Canonical lower-case UUID text of 16-byte values (the form ``LOWER(CONVERT(CHAR(36), v))`` returns)."""
    return pa.chunked_array([uuid_text(chunk) for chunk in array.chunks], pa.string())


def _ticks(array: pa.ChunkedArray) -> pa.ChunkedArray:
    unit = array.type.unit
    factor = TICKS_PER_SECOND // _UNITS_PER_SECOND[unit] if _UNITS_PER_SECOND[unit] <= TICKS_PER_SECOND else 0
    if not factor:
        raise NotExactError  # finer than a tick: no DATETIME2 column holds it
    return pc.multiply_checked(pc.cast(array, pa.int64()), factor)


def comparable(plan: TargetPlan, sent: pa.Table) -> pa.Table:
    """The sealed rows in the forms the read-back returns: datetimes as ticks, dates as days, UUIDs as text."""
    columns = []
    for column, array in zip(plan.columns, sent.columns, strict=True):
        storage = column.column_type.storage
        if storage is StorageKind.DATETIME:
            array = _ticks(array)
        elif storage is StorageKind.DATE:
            array = pc.cast(array, pa.int32())
        elif storage is StorageKind.UUID:
            array = _uuid_text(array)
        columns.append(array)
    return pa.Table.from_arrays(columns, names=list(plan.column_names))
