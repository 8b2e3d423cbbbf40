"""Canonical row values -> the parameters pymssql sends, and read-back values -> digest forms.

Why explicit encodings: pymssql's own conversions are lossy for this route. ``bulk_copy`` binds ``datetime`` as the
legacy DATETIME (milliseconds), refuses ``date``, ``uuid.UUID`` and integers beyond BIGINT, and gives decimals a fixed
precision of 33; its parameter quoting sends ASCII ``bytes`` as a varchar literal. So values that could lose
precision travel as exact text that SQL Server (or FreeTDS's BCP conversion) parses into the column's own type:
decimals in fixed-point notation, UInt64 in digits, datetimes with all six fractional digits, UUIDs in canonical form.
Binary values always travel as binary (``bytearray`` makes pymssql emit a ``0x..`` literal), and so does text
that holds NUL, as its UTF-16LE bytes (:func:`text_or_utf16`). Both backends encode
these forms from Arrow, column by column (:mod:`arrow_bcp`); the per-value encoders here serve a row with an empty
value that BCP cannot send, and a parameter slice that failed a vectorised check (the converters name its row).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from decimal import Decimal

from airflow_provider_dpone.transfer.values.target_types import ColumnType, StorageKind
from airflow_provider_dpone.transfer.values.target_values import readback_normalizer

Encoder = Callable[[object], object]


def _identity(value: object) -> object:
    return value


def _digits(value: object) -> object:
    assert isinstance(value, int | Decimal)
    return format(value, "f") if isinstance(value, Decimal) else str(value)


def _iso_date(value: object) -> object:
    assert isinstance(value, dt.date)
    return value.isoformat()


def _datetime_text(separator: str) -> Encoder:
    def encode(value: object) -> object:
        assert isinstance(value, dt.datetime)
        naive_utc = value.astimezone(dt.UTC).replace(tzinfo=None)
        return naive_utc.isoformat(sep=separator, timespec="microseconds")

    return encode


def _uuid_text(value: object) -> object:
    return str(value)


def text_or_utf16(value: object) -> object:
    """Text holding NUL as its UTF-16LE bytes: pymssql renders a ``bytearray`` as ``0x..`` and
    ``CAST(0x.. AS NVARCHAR(MAX))`` reads those bytes as the same UTF-16 code units, where an ``N'...'`` literal
    would be cut at the NUL (pymssql hands the statement to ``dbcmd`` as a C string)."""
    assert isinstance(value, str)
    return bytearray(value.encode("utf-16-le")) if "\x00" in value else value


def _as_bytearray(value: object) -> object:
    assert isinstance(value, bytes)
    return bytearray(value)


_SQLCLIENT: dict[StorageKind, Encoder] = {
    StorageKind.INTEGER: _identity,
    StorageKind.UINT64: _identity,
    StorageKind.DECIMAL: _digits,
    StorageKind.BINARY: _as_bytearray,
    StorageKind.TEXT: text_or_utf16,
    StorageKind.BOOLEAN: _identity,
    StorageKind.DATE: _iso_date,
    StorageKind.DATETIME: _datetime_text("T"),
    StorageKind.UUID: _uuid_text,
}


def sqlclient_row_encoder(columns: Sequence[ColumnType]) -> Callable[[Sequence[object]], list[object]]:
    """Parameters for the CAST-typed multi-row INSERT, one row (the rows whose values BCP cannot send exactly)."""
    encoders = tuple(_SQLCLIENT[column.storage] for column in columns)

    def encode(row: Sequence[object]) -> list[object]:
        return [None if value is None else encoder(value) for encoder, value in zip(encoders, row, strict=True)]

    return encode


def sqlclient_columns(columns: Sequence[ColumnType], values: Sequence[list[object]]) -> list[list[object]]:
    """Parameters for the CAST-typed multi-row INSERT, column by column (the parameterized "SqlClient" backend):
    the same encoders as :func:`sqlclient_row_encoder`, one loop per column; columns passed as they are stay lists."""
    encoded: list[list[object]] = []
    for column, column_values in zip(columns, values, strict=True):
        encoder = _SQLCLIENT[column.storage]
        if encoder is _identity:
            encoded.append(column_values)
        else:
            encoded.append([None if value is None else encoder(value) for value in column_values])
    return encoded


def _parse_datetime(value: object) -> object:
    if isinstance(value, str):  # TDS < 7.3 returns DATETIME2 as text with 7 fractional digits
        head, _, fraction = value.partition(".")
        digits = (fraction + "000000")[:7]
        if digits[6] != "0":
            return value  # finer than microseconds: left as text, so the digest refuses it loudly
        return dt.datetime.fromisoformat(f"{head}.{digits[:6]}")
    return value


def _parse_date(value: object) -> object:
    return dt.date.fromisoformat(value) if isinstance(value, str) else value


def _parse_uuid(value: object) -> object:
    return uuid.UUID(value) if isinstance(value, str) else value


_READBACK: dict[StorageKind, Encoder] = {
    StorageKind.DATETIME: _parse_datetime,
    StorageKind.DATE: _parse_date,
    StorageKind.UUID: _parse_uuid,
}


def readback(columns: Sequence[ColumnType]) -> Callable[[Sequence[object]], Sequence[object]]:
    """Values as pymssql returns them -> the forms the typed digest encodes (UInt64 Decimal -> int, text dates)."""
    common = readback_normalizer(columns)
    fixes = tuple((i, _READBACK[c.storage]) for i, c in enumerate(columns) if c.storage in _READBACK)

    def normalize(row: Sequence[object]) -> Sequence[object]:
        values = list(common(row))
        for i, fix in fixes:
            if values[i] is not None:
                values[i] = fix(values[i])
        return values

    return normalize
