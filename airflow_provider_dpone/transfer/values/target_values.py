"""Row values checked against their target column types, before any byte is sent to a target.

Each column gets one converter, built once per plan, that returns the value's canonical Python form (the form every
target adapter knows how to write) or raises ``native_transfer.target_value_invalid``. Checking here, not in the
database, matters for two reasons: the refusal is the same on every target (SQL Server, PostgreSQL, the fake), and the
error never carries the value (a database error message may quote it).

Canonical forms: ``int`` (integers and UInt64), ``Decimal``, ``bytes`` (binary strings), ``str`` (text strings),
``bool``, ``datetime.date``, aware UTC ``datetime.datetime``, ``uuid.UUID``, and ``None``.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, InvalidOperation

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.values.target_types import ColumnType, StorageKind

Converter = Callable[[object], object]
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)  # no rounding while checking a decimal


class _InvalidValueError(Exception):
    """Internal: a value does not fit; converted to a DponeError naming the column (never the value)."""


def _integer(column: ColumnType) -> Converter:
    low, high = column.int_min, column.int_max
    assert low is not None and high is not None

    def convert(value: object) -> object:
        if type(value) is int and low <= value <= high:
            return value
        raise _InvalidValueError("not an integer in range")

    return convert


def _decimal(column: ColumnType) -> Converter:
    limit = Decimal(10) ** column.precision

    integer_digits = column.precision - column.scale

    def convert(value: object) -> object:
        if type(value) is Decimal:
            _sign, digits, exponent = value.as_tuple()
            if type(exponent) is int and exponent >= -column.scale and len(digits) + exponent <= integer_digits:
                return value  # at most `scale` fractional digits and fewer than P-S integer digits: fits exactly
        if isinstance(value, bool) or not isinstance(value, Decimal | int):
            raise _InvalidValueError("not a Decimal")
        number = Decimal(value)
        try:
            unscaled = number.scaleb(column.scale, context=_EXACT)
            exact = number.is_finite() and unscaled == unscaled.to_integral_value() and unscaled.copy_abs() < limit
        except InvalidOperation:
            exact = False
        if not exact:
            raise _InvalidValueError(f"does not fit DECIMAL({column.precision},{column.scale}) exactly")
        return number

    return convert


def _binary(column: ColumnType) -> Converter:
    length = column.fixed_length

    def convert(value: object) -> object:
        if type(value) is bytes and (length is None or len(value) == length):
            return value
        if isinstance(value, str):
            try:
                data = value.encode("utf-8")
            except UnicodeEncodeError:
                raise _InvalidValueError("string is not encodable as UTF-8") from None
        elif isinstance(value, bytes | bytearray | memoryview):
            data = bytes(value)
        else:
            raise _InvalidValueError("not bytes or str")
        if length is not None and len(data) != length:
            raise _InvalidValueError(f"FixedString({length}) value of another length")
        return data

    return convert


def _text(*, allow_nul: bool) -> Converter:
    def convert(value: object) -> object:
        if isinstance(value, bytes | bytearray | memoryview):
            try:
                text = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                raise _InvalidValueError("bytes are not strict UTF-8 (map the column as binary)") from None
        elif isinstance(value, str):
            text = value
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise _InvalidValueError("string has lone surrogates") from None
        else:
            raise _InvalidValueError("not str or bytes")
        if not allow_nul and "\x00" in text:
            raise _InvalidValueError("NUL character cannot be stored as text here (map the column as binary)")
        return text

    return convert


def _boolean(value: object) -> object:
    if not isinstance(value, bool):
        raise _InvalidValueError("not a bool")
    return value


def _date(value: object) -> object:
    if not isinstance(value, dt.date) or isinstance(value, dt.datetime):
        raise _InvalidValueError("not a date")
    return value


def _datetime(column: ColumnType) -> Converter:
    step = 10 ** (6 - column.scale)

    def convert(value: object) -> object:
        if type(value) is dt.datetime and value.tzinfo is dt.UTC and not value.microsecond % step:
            return value
        if not isinstance(value, dt.datetime):
            raise _InvalidValueError("not a datetime")
        aware = value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
        if aware.microsecond % step:
            raise _InvalidValueError(f"finer than DateTime64({column.scale})")
        return aware

    return convert


def _uuid(value: object) -> object:
    try:
        if isinstance(value, uuid.UUID):
            return value
        if isinstance(value, str):
            return uuid.UUID(value)
        if isinstance(value, bytes) and len(value) == 16:
            return uuid.UUID(bytes=value)
    except ValueError:
        pass
    raise _InvalidValueError("not a UUID")


def _base_converter(column: ColumnType, *, text_allows_nul: bool) -> Converter:
    storage = column.storage
    if storage in (StorageKind.INTEGER, StorageKind.UINT64):
        return _integer(column)
    if storage is StorageKind.DECIMAL:
        return _decimal(column)
    if storage is StorageKind.BINARY:
        return _binary(column)
    if storage is StorageKind.TEXT:
        return _text(allow_nul=text_allows_nul)
    if storage is StorageKind.BOOLEAN:
        return _boolean
    if storage is StorageKind.DATE:
        return _date
    if storage is StorageKind.DATETIME:
        return _datetime(column)
    return _uuid


def _with_nulls(convert: Converter, *, nullable: bool) -> Converter:
    def convert_or_null(value: object) -> object:
        if value is None:
            if nullable:
                return None
            raise _InvalidValueError("NULL in a non-nullable column")
        return convert(value)

    return convert_or_null


class RowConverter:
    """Converts rows of one plan to canonical values; built once, applied to every row of every chunk.

    The common case (every value fits) is one comprehension over per-column converters, each with a fast path for the
    exact canonical type; only a failing row is walked again, column by column, to name the column that failed.
    """

    def __init__(self, names: Sequence[str], columns: Sequence[ColumnType], *, text_allows_nul: bool = True) -> None:
        self._names = tuple(names)
        self._converters = tuple(
            _with_nulls(_base_converter(column, text_allows_nul=text_allows_nul), nullable=column.nullable)
            for column in columns
        )

    def __call__(self, row: Sequence[object], row_index: int = 0) -> tuple[object, ...]:
        try:
            return tuple([convert(value) for convert, value in zip(self._converters, row, strict=True)])
        except (_InvalidValueError, ValueError):
            raise self._explain(row, row_index) from None

    def columns(self, columns: Sequence[Sequence[object]], first_row: int = 0) -> list[list[object]]:
        """Whole columns converted column by column, with the same per-value converters; when any value fails, the
        rows are walked in order so the error names the same row (counted from ``first_row``) and column as the
        row-wise call."""
        if len(columns) != len(self._converters):
            raise DponeError("native_transfer.target_value_invalid", f"{len(columns)} columns for {len(self._names)}")
        try:
            return [[convert(v) for v in values] for convert, values in zip(self._converters, columns, strict=True)]
        except (_InvalidValueError, ValueError):
            pass
        for index, row in enumerate(zip(*columns, strict=True), start=first_row):
            self(row, index)
        raise DponeError("native_transfer.target_value_invalid", "a value failed its check")  # pragma: no cover

    def _explain(self, row: Sequence[object], row_index: int) -> DponeError:
        if len(row) != len(self._converters):
            return DponeError(
                "native_transfer.target_value_invalid", f"row {row_index}: {len(row)} values for {len(self._names)}"
            )
        for name, convert, value in zip(self._names, self._converters, row, strict=True):
            try:
                convert(value)
            except _InvalidValueError as exc:
                return DponeError("native_transfer.target_value_invalid", f"row {row_index} column {name}: {exc}")
        return DponeError("native_transfer.target_value_invalid", f"row {row_index}")


def readback_normalizer(columns: Sequence[ColumnType]) -> Callable[[Sequence[object]], Sequence[object]]:
    """Turn a row read back from a target into the forms the typed digest expects.

    Only one type needs it: UInt64 is stored as ``DECIMAL(20,0)`` and reads back as a ``Decimal``, while its digest
    encodes an integer. A non-integral value there means the stored data is not what was loaded: it is left as a
    ``Decimal`` so the digest refuses it loudly instead of rounding it into a match.
    """
    positions = tuple(i for i, column in enumerate(columns) if column.storage is StorageKind.UINT64)
    if not positions:
        return lambda row: row

    def normalize(row: Sequence[object]) -> Sequence[object]:
        values = list(row)
        for i in positions:
            value = values[i]
            if isinstance(value, Decimal) and value == value.to_integral_value():
                values[i] = int(value)
        return values

    return normalize
