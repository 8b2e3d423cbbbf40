"""The reader of the superseded stage object format ``dpone.native-typed-chunk.v1`` (stages sealed before v2).

Each row was stored as exactly the preimage that :func:`~airflow_provider_dpone.core.typed_digest.row_hash` hashes
(length-prefixed canonical value encodings in column order). Layout::

    MAGIC | u32 header length | canonical JSON header | rows x (u32 frame length | frame)

:func:`decode_chunk` recomputes the typed sum from the stored frames and checks it, with the row count and column
layout, against the header before decoding anything; each decoded value is then re-encoded and compared with its
stored field, so a decoder defect can never hand the target a row whose digest differs from the sealed one. Nothing
writes this format any more; the journal's chunk receipt binds the object's SHA-256, so it is also tamper-evident.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import struct
import uuid
from collections.abc import Iterator, Sequence
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal
from typing import Any, Final

from airflow_provider_dpone.core.canonical import parse_canonical_json
from airflow_provider_dpone.core.columns import NativeColumn, columns_sha256
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.typed_digest import _ROW_TAG, MODULUS, LogicalType, TypedColumn, _encode
from airflow_provider_dpone.transfer.values.chunk import STAGE_FORMAT, typed_sum_hex

MAGIC: Final[bytes] = b"DPONE-CHUNK\x01"
_U32: Final = struct.Struct(">I")
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICRO: Final = dt.timedelta(microseconds=1)
_PRESENT: Final = b"\x01"
_NULL_FIELD: Final = _U32.pack(1) + b"\x00"
_EXACT: Final = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
"""Decimal scaling must be exact: the default context would round DECIMAL(38, s) values to 28 digits."""


def _split(data: bytes) -> tuple[dict[str, Any], memoryview]:
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 4:
        raise DponeError("native_transfer.stage_integrity_failed", "not a typed chunk object")
    (size,) = _U32.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = parse_canonical_json(data[start : start + size])
    except DponeError:
        raise DponeError("native_transfer.stage_integrity_failed", "chunk header is not canonical") from None
    if not isinstance(header, dict) or header.get("format") != STAGE_FORMAT:
        raise DponeError("native_transfer.stage_integrity_failed", "unknown chunk format")
    return header, memoryview(data)[start + size :]


def _frames(body: memoryview) -> Iterator[bytes]:
    offset = 0
    end = len(body)
    while offset < end:
        if offset + 4 > end:
            raise DponeError("native_transfer.stage_integrity_failed", "truncated frame length")
        (size,) = _U32.unpack_from(body, offset)
        offset += 4
        if offset + size > end:
            raise DponeError("native_transfer.stage_integrity_failed", "truncated frame")
        yield bytes(body[offset : offset + size])
        offset += size


def _decode_value(column: TypedColumn, raw: bytes) -> object:
    if raw == b"\x00":
        return None
    text = raw[1:]
    logical = column.logical
    if logical is LogicalType.INTEGER:
        return int(text)
    if logical is LogicalType.DECIMAL:
        return Decimal(int(text)).scaleb(-column.scale, context=_EXACT)
    if logical is LogicalType.STRING:
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError:
            return bytes(text)
    if logical is LogicalType.BOOLEAN:
        return text == b"1"
    if logical is LogicalType.DATE:
        return dt.date.fromisoformat(text.decode("ascii"))
    if logical is LogicalType.DATETIME:
        ticks = int(text)
        if column.scale > 6:
            raise DponeError("native_transfer.stage_integrity_failed", f"column {column.name}: precision above 6")
        return _EPOCH + dt.timedelta(microseconds=ticks * 10 ** (6 - column.scale))
    return uuid.UUID(text.decode("ascii"))


def _split_fields(frames: Sequence[bytes], width: int) -> list[list[bytes]]:
    """The fields of every frame, column-major (each field without its length prefix; presence byte included)."""
    columns: list[list[bytes]] = [[] for _ in range(width)]
    appenders = [column.append for column in columns]
    unpack = _U32.unpack_from
    for frame in frames:
        offset = 0
        end = len(frame)
        for append in appenders:
            if offset + 4 > end:
                raise DponeError("native_transfer.stage_integrity_failed", "truncated field")
            (size,) = unpack(frame, offset)
            offset += 4
            stop = offset + size
            if not size or stop > end or frame[offset] > 1:
                raise DponeError("native_transfer.stage_integrity_failed", "malformed field")
            append(frame[offset:stop])
            offset = stop
        if offset != end:
            raise DponeError("native_transfer.stage_integrity_failed", "trailing bytes in frame")
    return columns


def _decode_column(column: TypedColumn, raws: list[bytes]) -> list[object]:
    """Decode one column's fields, then prove each value re-encodes to exactly its stored field.

    Fast paths decode and re-encode whole columns with comprehensions; any other type goes value by value through
    :func:`_decode_value` and the digest's own encoder. Either way a decoder defect cannot reach the target.
    """
    null = _NULL_FIELD[4:]
    if not column.nullable and null in raws:
        raise DponeError(
            "native_transfer.stage_integrity_failed", f"column {column.name}: NULL in a non-nullable column"
        )
    logical = column.logical
    values: list[Any]
    encoded: list[bytes]
    if logical is LogicalType.INTEGER:
        values = [None if raw == null else int(raw[1:]) for raw in raws]
        encoded = [null if value is None else b"\x01" + str(value).encode("ascii") for value in values]
    elif logical is LogicalType.DECIMAL:
        scale = column.scale
        values = [None if raw == null else Decimal(int(raw[1:])).scaleb(-scale, context=_EXACT) for raw in raws]
        encoded = [
            null if value is None else b"\x01" + str(int(value.scaleb(scale, context=_EXACT))).encode("ascii")
            for value in values
        ]
    elif logical is LogicalType.STRING:
        values = [None if raw == null else _text_or_bytes(raw[1:]) for raw in raws]
        encoded = [
            null if value is None else _PRESENT + (value.encode("utf-8") if type(value) is str else value)
            for value in values
        ]
    elif logical is LogicalType.DATETIME and column.scale <= 6:
        factor = 10 ** (6 - column.scale)
        values = [None if raw == null else _EPOCH + dt.timedelta(microseconds=int(raw[1:]) * factor) for raw in raws]
        encoded = [
            null if value is None else b"\x01" + str((value - _EPOCH) // _MICRO // factor).encode("ascii")
            for value in values
        ]
    else:
        values = [_decode_value(column, raw) for raw in raws]
        encoded = [_encode(column, value) for value in values]
    if encoded != raws:
        raise DponeError("native_transfer.stage_integrity_failed", f"column {column.name}: a value does not re-encode")
    return values


def _text_or_bytes(text: bytes) -> object:
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        return bytes(text)


class DecodedChunk:
    """A verified stage object: header facts and the rows decoded to Python values (strings as text when UTF-8)."""

    def __init__(self, header: dict[str, Any], rows: list[tuple[object, ...]], total: int) -> None:
        self.header = header
        self.rows = rows
        self.total = total


def decode_chunk(data: bytes, columns: Sequence[NativeColumn], *, decode_rows: bool = True) -> DecodedChunk:
    """Verify a stage object against its header (row count, typed sum, column layout) and decode it.

    The typed sum is recomputed from the stored frames and checked against the header before anything is decoded;
    decoded values are then re-encoded and compared field by field, so a decoder defect can never hand the target a
    row whose digest differs from the sealed one.
    """
    header, body = _split(data)
    if header.get("columns_sha256") != columns_sha256(columns):
        raise DponeError("native_transfer.stage_integrity_failed", "chunk column layout differs from the plan")
    frames = list(_frames(body))
    sha = hashlib.sha256
    tag = _ROW_TAG
    total = sum([int.from_bytes(sha(tag + frame).digest(), "big") for frame in frames]) % MODULUS
    if len(frames) != header.get("rows") or typed_sum_hex(total) != header.get("typed_sum"):
        raise DponeError("native_transfer.stage_integrity_failed", "chunk rows or typed sum differ from its header")
    rows: list[tuple[object, ...]] = []
    if decode_rows and frames:
        typed = [column.typed for column in columns]
        fields = _split_fields(frames, len(typed))
        try:
            decoded = [_decode_column(column, raws) for column, raws in zip(typed, fields, strict=True)]
        except (ValueError, OverflowError, IndexError):
            raise DponeError("native_transfer.stage_integrity_failed", "a field does not decode") from None
        rows = list(zip(*decoded, strict=True))
    return DecodedChunk(header, rows, total)
