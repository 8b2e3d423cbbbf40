"""The durable stage object format ``dpone.native-typed-chunk.v1``: typed rows whose bytes are their own digest input.

Each row is stored as exactly the preimage that :func:`~airflow_provider_dpone.core.typed_digest.row_hash`
hashes (length-prefixed canonical value encodings in column order). So sealing a chunk encodes every value once, the
typed sum is computed over the very bytes that are persisted, and a reader re-verifies a stage object by hashing
frames, without trusting any decoder. Layout::

    MAGIC | u32 header length | canonical JSON header | rows x (u32 frame length | frame)

The header repeats the row count and typed sum so a stage object is self-checking; the journal's chunk receipt binds
the object's SHA-256 so it is also tamper-evident.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import struct
import uuid
from collections.abc import Callable, Iterator, Sequence
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal
from typing import Any, Final

from airflow_provider_dpone.core.canonical import canonical_json_bytes, parse_canonical_json
from airflow_provider_dpone.core.columns import NativeColumn, columns_sha256
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.typed_digest import _ROW_TAG, MODULUS, LogicalType, TypedColumn, _encode
from airflow_provider_dpone.transfer.values.chunk import STAGE_FORMAT, typed_sum_hex

MAGIC: Final[bytes] = b"DPONE-CHUNK\x01"
_U32: Final = struct.Struct(">I")
_EPOCH_NAIVE: Final = dt.datetime(1970, 1, 1)
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICRO: Final = dt.timedelta(microseconds=1)
_PRESENT: Final = b"\x01"
_NULL_FIELD: Final = _U32.pack(1) + b"\x00"
_INT_ONLY: Final = frozenset({int})
_BYTES_ONLY: Final = frozenset({bytes})
_DATETIME_ONLY: Final = frozenset({dt.datetime})
_DECIMAL_ONLY: Final = frozenset({Decimal})
_EXACT: Final = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
"""Decimal scaling must be exact: the default context would round DECIMAL(38, s) values to 28 digits."""

FieldEncoder = Callable[[object], bytes]


def _generic(column: TypedColumn) -> FieldEncoder:
    def encode(value: object) -> bytes:
        encoded = _encode(column, value)
        return _U32.pack(len(encoded)) + encoded

    return encode


def field_encoder(column: TypedColumn) -> FieldEncoder:
    """A length-prefixed encoder for one value of ``column``, byte-identical to the typed digest's encoding.

    Common exact types take a fast path; anything else (and every unexpected Python type) goes through the digest's
    own encoder, which is the single source of truth and refuses values outside the logical type.
    """
    generic = _generic(column)
    nullable = column.nullable
    logical = column.logical
    pack = _U32.pack

    if logical is LogicalType.INTEGER:

        def encode_int(value: object) -> bytes:
            if type(value) is int:
                text = b"\x01" + str(value).encode("ascii")
                return pack(len(text)) + text
            if value is None and nullable:
                return _NULL_FIELD
            return generic(value)

        return encode_int
    if logical is LogicalType.STRING:

        def encode_str(value: object) -> bytes:
            if type(value) is bytes:
                return pack(len(value) + 1) + _PRESENT + value
            if value is None and nullable:
                return _NULL_FIELD
            return generic(value)

        return encode_str
    if logical is LogicalType.DECIMAL:
        scale = column.scale

        def encode_decimal(value: object) -> bytes:
            if type(value) is Decimal:
                scaled = value.scaleb(scale, context=_EXACT)
                integral = int(scaled)
                if scaled == integral:
                    text = b"\x01" + str(integral).encode("ascii")
                    return pack(len(text)) + text
            if value is None and nullable:
                return _NULL_FIELD
            return generic(value)

        return encode_decimal
    if logical is LogicalType.DATETIME and column.scale <= 6:
        factor = 10 ** (6 - column.scale)

        def encode_datetime(value: object) -> bytes:
            if type(value) is dt.datetime and value.tzinfo is None:
                ticks, remainder = divmod((value - _EPOCH_NAIVE) // _MICRO, factor)
                if not remainder:
                    text = b"\x01" + str(ticks).encode("ascii")
                    return pack(len(text)) + text
            if value is None and nullable:
                return _NULL_FIELD
            return generic(value)

        return encode_datetime
    return generic


def column_encoder(column: TypedColumn) -> Callable[[Sequence[object]], list[bytes]]:
    """Encode a whole column slice: a branch-free comprehension when every value has the exact expected type,
    otherwise value by value through :func:`field_encoder` (same bytes either way)."""
    single = field_encoder(column)
    pack = _U32.pack
    logical = column.logical

    def fallback(values: Sequence[object]) -> list[bytes]:
        return list(map(single, values))

    if logical is LogicalType.INTEGER:

        def ints(values: Sequence[object]) -> list[bytes]:
            if set(map(type, values)) <= _INT_ONLY:
                texts = [str(value).encode("ascii") for value in values]
                return [pack(len(text) + 1) + _PRESENT + text for text in texts]
            return fallback(values)

        return ints
    if logical is LogicalType.STRING:

        def strings(values: Sequence[object]) -> list[bytes]:
            if set(map(type, values)) <= _BYTES_ONLY:
                return [pack(len(value) + 1) + _PRESENT + value for value in values]  # type: ignore[operator,arg-type]
            return fallback(values)

        return strings
    if logical is LogicalType.DECIMAL:
        scale = column.scale
        exponent = -scale

        def decimals(values: Sequence[object]) -> list[bytes]:
            present = [value for value in values if value is not None]
            if set(map(type, present)) <= _DECIMAL_ONLY and all(
                value.as_tuple().exponent == exponent  # type: ignore[attr-defined]
                for value in present
            ):
                # At exactly the column's scale, shifting the exponent to zero is exact: no rounding, no check.
                texts = [
                    None if value is None else str(int(value.scaleb(scale, context=_EXACT))).encode("ascii")  # type: ignore[attr-defined]
                    for value in values
                ]
                if column.nullable or len(present) == len(values):
                    return [_NULL_FIELD if text is None else pack(len(text) + 1) + _PRESENT + text for text in texts]
            return fallback(values)

        return decimals
    if logical is LogicalType.DATETIME and column.scale <= 6:
        factor = 10 ** (6 - column.scale)

        def datetimes(values: Sequence[object]) -> list[bytes]:
            if set(map(type, values)) <= _DATETIME_ONLY and all(value.tzinfo is None for value in values):  # type: ignore[attr-defined]
                micros = [(value - _EPOCH_NAIVE) // _MICRO for value in values]  # type: ignore[operator]
                if factor == 1 or all(not tick % factor for tick in micros):
                    texts = [str(tick // factor).encode("ascii") for tick in micros]
                    return [pack(len(text) + 1) + _PRESENT + text for text in texts]
            return fallback(values)

        return datetimes
    return fallback


class ChunkEncoder:
    """Accumulates rows of one chunk: persisted frames, row count and the typed sum over exactly those frames."""

    def __init__(self, columns: Sequence[NativeColumn]) -> None:
        self.columns = tuple(columns)
        self._encoders = [column_encoder(column.typed) for column in self.columns]
        self._body = bytearray()
        self.rows = 0
        self.total = 0

    @property
    def body_bytes(self) -> int:
        return len(self._body)

    def add_columns(self, block: Sequence[Sequence[object]], start: int, stop: int) -> None:
        """Append rows ``start:stop`` of a column-oriented block."""
        encoded = [encoder(column[start:stop]) for encoder, column in zip(self._encoders, block, strict=True)]
        frames = list(map(b"".join, zip(*encoded, strict=True)))
        pack = _U32.pack
        self._body += b"".join([pack(len(frame)) + frame for frame in frames])
        sha = hashlib.sha256
        tag = _ROW_TAG
        self.total = (
            self.total + sum([int.from_bytes(sha(tag + frame).digest(), "big") for frame in frames])
        ) % MODULUS
        self.rows += stop - start

    def seal(self, invocation_id: str, ordinal: int) -> bytes:
        """The complete stage object for this chunk."""
        header = canonical_json_bytes(
            {
                "format": STAGE_FORMAT,
                "columns_sha256": columns_sha256(self.columns),
                "invocation_id": invocation_id,
                "ordinal": ordinal,
                "rows": self.rows,
                "typed_sum": typed_sum_hex(self.total),
            }
        )
        return MAGIC + _U32.pack(len(header)) + header + bytes(self._body)


def _split(data: bytes) -> tuple[dict[str, Any], memoryview]:
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 4:
        raise DponeError("mssql_native.stage_integrity_failed", "not a typed chunk object")
    (size,) = _U32.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = parse_canonical_json(data[start : start + size])
    except DponeError:
        raise DponeError("mssql_native.stage_integrity_failed", "chunk header is not canonical") from None
    if not isinstance(header, dict) or header.get("format") != STAGE_FORMAT:
        raise DponeError("mssql_native.stage_integrity_failed", "unknown chunk format")
    return header, memoryview(data)[start + size :]


def _frames(body: memoryview) -> Iterator[bytes]:
    offset = 0
    end = len(body)
    while offset < end:
        if offset + 4 > end:
            raise DponeError("mssql_native.stage_integrity_failed", "truncated frame length")
        (size,) = _U32.unpack_from(body, offset)
        offset += 4
        if offset + size > end:
            raise DponeError("mssql_native.stage_integrity_failed", "truncated frame")
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
            raise DponeError("mssql_native.stage_integrity_failed", f"column {column.name}: precision above 6")
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
                raise DponeError("mssql_native.stage_integrity_failed", "truncated field")
            (size,) = unpack(frame, offset)
            offset += 4
            stop = offset + size
            if not size or stop > end or frame[offset] > 1:
                raise DponeError("mssql_native.stage_integrity_failed", "malformed field")
            append(frame[offset:stop])
            offset = stop
        if offset != end:
            raise DponeError("mssql_native.stage_integrity_failed", "trailing bytes in frame")
    return columns


def _decode_column(column: TypedColumn, raws: list[bytes]) -> list[object]:
    """Decode one column's fields, then prove each value re-encodes to exactly its stored field.

    Fast paths decode and re-encode whole columns with comprehensions; any other type goes value by value through
    :func:`_decode_value` and the digest's own encoder. Either way a decoder defect cannot reach the target.
    """
    null = _NULL_FIELD[4:]
    if not column.nullable and null in raws:
        raise DponeError("mssql_native.stage_integrity_failed", f"column {column.name}: NULL in a non-nullable column")
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
        raise DponeError("mssql_native.stage_integrity_failed", f"column {column.name}: a value does not re-encode")
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
        raise DponeError("mssql_native.stage_integrity_failed", "chunk column layout differs from the plan")
    frames = list(_frames(body))
    sha = hashlib.sha256
    tag = _ROW_TAG
    total = sum([int.from_bytes(sha(tag + frame).digest(), "big") for frame in frames]) % MODULUS
    if len(frames) != header.get("rows") or typed_sum_hex(total) != header.get("typed_sum"):
        raise DponeError("mssql_native.stage_integrity_failed", "chunk rows or typed sum differ from its header")
    rows: list[tuple[object, ...]] = []
    if decode_rows and frames:
        typed = [column.typed for column in columns]
        fields = _split_fields(frames, len(typed))
        try:
            decoded = [_decode_column(column, raws) for column, raws in zip(typed, fields, strict=True)]
        except (ValueError, OverflowError, IndexError):
            raise DponeError("mssql_native.stage_integrity_failed", "a field does not decode") from None
        rows = list(zip(*decoded, strict=True))
    return DecodedChunk(header, rows, total)
