"""Each row's typed SHA-256, computed by ClickHouse as one column of the data SELECT.

Byte-identical to :func:`~airflow_provider_dpone.contracts.typed_digest.row_hash`: SHA-256 over the row tag and,
per column, a 4-byte big-endian length and the canonical encoding (``0x00`` for NULL, ``0x01`` + the canonical
text or bytes otherwise). The canonical text per admitted type:

* integers: ``toString`` (plain decimal); ``Bool``: ``1``/``0``;
* decimals: the unscaled integer (the value's storage reinterpreted as a signed integer of its width);
* strings: the bytes themselves (``FixedString`` with its padding, as the value is stored and staged);
* ``Date``/``Date32``: ``YYYY-MM-DD``; ``UUID``: lower-case hyphenated text;
* ``DateTime``: seconds since the epoch; ``DateTime64(p)``: its stored ticks at precision ``p``.

tests/golden/test_clickhouse_row_hash.py checks every type and its boundary values against the Python digest.
"""

from __future__ import annotations

from typing import Final

from airflow_provider_dpone.contracts.identifiers import quote_clickhouse
from airflow_provider_dpone.contracts.native_schema import NativeColumn
from airflow_provider_dpone.contracts.typed_digest import LogicalType

ROW_HASH_COLUMN: Final = "_dpone_row_sha256"
_TAG: Final = "'dpone.typed-row.v1\\0'"
_NULL_FIELD: Final = "unhex('0000000100')"


def _be32(expression: str) -> str:
    return f"reverse(reinterpretAsFixedString(toUInt32({expression})))"


def _present(text: str) -> str:
    return f"concat({_be32(f'length({text}) + 1')}, '\\x01', {text})"


def _decimal_width(precision: int) -> int:
    return 32 if precision <= 9 else 64 if precision <= 18 else 128 if precision <= 38 else 256


def _text(column: NativeColumn, value: str) -> str:
    """SQL for the canonical bytes of a present value."""
    logical = column.logical
    if logical is LogicalType.INTEGER or logical is LogicalType.UUID or logical is LogicalType.DATE:
        return f"toString({value})"
    if logical is LogicalType.BOOLEAN:
        return f"if({value}, '1', '0')"
    if logical is LogicalType.DECIMAL:
        return f"toString(reinterpretAsInt{_decimal_width(column.precision or 38)}({value}))"
    if logical is LogicalType.DATETIME:
        if column.source_type.removeprefix("Nullable(").startswith("DateTime64"):
            return f"toString(reinterpretAsInt64({value}))"
        return f"toString(toUnixTimestamp({value}))"
    if column.source_type.startswith("LowCardinality("):
        return f"CAST({value} AS String)"
    return value  # String, and FixedString with its padding (a cast to String would drop trailing NULs)


def _field(column: NativeColumn) -> str:
    name = quote_clickhouse(column.name)
    if not column.nullable:
        return _present(_text(column, name))
    return f"if(isNull({name}), {_NULL_FIELD}, {_present(_text(column, f'assumeNotNull({name})'))})"


def row_hash_sql(columns: tuple[NativeColumn, ...]) -> str:
    """The SELECT expression of each row's typed SHA-256 (a ``FixedString(32)``), aliased as ``ROW_HASH_COLUMN``."""
    fields = ", ".join(_field(column) for column in columns)
    return f"SHA256(concat({_TAG}, {fields})) AS {ROW_HASH_COLUMN}"
