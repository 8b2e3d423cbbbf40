"""Typed, order-independent, duplicate-sensitive multiset digest of rows.

Why a sum of per-row hashes: the digest must not depend on chunk boundaries, row order or which side computed it (the
source stream or a read-back of the target), but must change when a row is lost, added or duplicated. A SUM of
SHA-256 row hashes modulo 2**256 is such a multiset hash (an XOR would cancel duplicate rows).

Why typed encoding: the same logical value arrives as different Python objects on each side (``bytes`` from
ClickHouse, ``str`` from PostgreSQL; ``Decimal('1.50')`` vs ``Decimal('1.5')``; aware vs naive UTC datetimes). Each
value is encoded by its column's logical type into one canonical byte form, so equal values hash equally and NULL,
empty string and zero stay distinct. Floats are not supported: their equality is not exact across systems.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Iterable, Sequence
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal
from enum import StrEnum
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from airflow_provider_dpone.core.canonical import tagged_digest
from airflow_provider_dpone.core.errors import DponeError

MODULUS: Final[int] = 2**256
_ROW_TAG: Final[bytes] = b"dpone.typed-row.v1\x00"
_EPOCH: Final[dt.datetime] = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# Scaling must be exact: the default context rounds to 28 digits, which would give DECIMAL(38,s) neighbours one hash.
_EXACT: Final[Context] = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


class LogicalType(StrEnum):
    """Logical column types with an exact canonical encoding."""

    INTEGER = "integer"
    DECIMAL = "decimal"
    STRING = "string"
    BOOLEAN = "boolean"
    DATE = "date"
    DATETIME = "datetime"
    UUID = "uuid"


class TypedColumn(BaseModel):
    """One column's logical type: ``scale`` is the decimal scale or the fractional-second digits of a datetime."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    logical: LogicalType
    nullable: bool = False
    scale: int = Field(default=0, ge=0, le=76)


def _encode(column: TypedColumn, value: object) -> bytes:
    if value is None:
        if not column.nullable:
            raise DponeError("DPONE_TYPED_VALUE_INVALID", f"column {column.name}: NULL in a non-nullable column")
        return b"\x00"
    return b"\x01" + _encode_present(column, value)


def _encode_present(column: TypedColumn, value: object) -> bytes:
    logical = column.logical
    if logical is LogicalType.STRING:
        if isinstance(value, str):
            return value.encode("utf-8")
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
    elif logical is LogicalType.INTEGER:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value).encode("ascii")
    elif logical is LogicalType.DECIMAL:
        if isinstance(value, Decimal | int) and not isinstance(value, bool):
            scaled = Decimal(value).scaleb(column.scale, context=_EXACT)
            if scaled == scaled.to_integral_value():
                return str(int(scaled)).encode("ascii")
    elif logical is LogicalType.BOOLEAN:
        if isinstance(value, bool):
            return b"1" if value else b"0"
    elif logical is LogicalType.DATE:
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return value.isoformat().encode("ascii")
    elif logical is LogicalType.DATETIME:
        if isinstance(value, dt.datetime):
            aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
            delta = aware - _EPOCH
            micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
            if column.scale >= 6:
                ticks = micros * 10 ** (column.scale - 6)
            else:
                ticks, remainder = divmod(micros, 10 ** (6 - column.scale))
                if remainder:
                    raise DponeError("DPONE_TYPED_VALUE_INVALID", f"column {column.name}: finer than its precision")
            return str(ticks).encode("ascii")
    elif logical is LogicalType.UUID:
        if isinstance(value, uuid.UUID):
            return str(value).encode("ascii")
        if isinstance(value, str):
            return str(uuid.UUID(value)).encode("ascii")
        if isinstance(value, bytes) and len(value) == 16:
            return str(uuid.UUID(bytes=value)).encode("ascii")
    raise DponeError(
        "DPONE_TYPED_VALUE_INVALID", f"column {column.name}: {type(value).__name__} is not a {logical.value} value"
    )


def row_hash(columns: Sequence[TypedColumn], row: Sequence[object]) -> int:
    """The row's SHA-256 as an integer, over length-prefixed canonical encodings in column order."""
    if len(row) != len(columns):
        raise DponeError("DPONE_TYPED_VALUE_INVALID", f"row has {len(row)} values for {len(columns)} columns")
    hasher = hashlib.sha256(_ROW_TAG)
    for column, value in zip(columns, row, strict=True):
        encoded = _encode(column, value)
        hasher.update(len(encoded).to_bytes(4, "big"))
        hasher.update(encoded)
    return int.from_bytes(hasher.digest(), "big")


class MultisetDigest:
    """Accumulates rows (in any order, in any chunking) into a count and a sum of row hashes modulo 2**256."""

    def __init__(self, columns: Sequence[TypedColumn]) -> None:
        self.columns = tuple(columns)
        self.rows = 0
        self.total = 0

    def add_rows(self, rows: Iterable[Sequence[object]]) -> None:
        for row in rows:
            self.total = (self.total + row_hash(self.columns, row)) % MODULUS
            self.rows += 1

    def merge(self, rows: int, total: int) -> None:
        """Fold another partial digest (for example a verified chunk receipt) into this one."""
        self.rows += rows
        self.total = (self.total + total) % MODULUS

    @property
    def hexdigest(self) -> str:
        return native_multiset_digest(self.rows, self.total)


HASH_LIMBS: Final[int] = 8


def fold_limb_sums(limb_sums: Sequence[int]) -> int:
    """The modular sum of row hashes from per-limb sums (limb 0 = the hash's most significant 32 bits).

    A database sums each 32-bit limb of the row hashes in an exact integer type; folding here gives the same total
    as :class:`MultisetDigest`, so a target can verify a chunk without sending its rows back.
    """
    total = 0
    for index, value in enumerate(limb_sums):
        total += int(value) << (32 * (HASH_LIMBS - 1 - index))
    return total % MODULUS


def native_multiset_digest(total_rows: int, total_sum: int) -> str:
    """The stable workload digest: binds the row count and the modular sum of row hashes."""
    return tagged_digest("dpone.native-multiset.v1", total_rows, f"{total_sum % MODULUS:064x}")
