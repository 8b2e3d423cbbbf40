"""Each row's typed SHA-256, computed by ClickHouse: a column of the transfer's data SELECT, and the summand of the
publication's content digest (version 2, ``sql_digest``).

Byte-identical to :func:`~airflow_provider_dpone.core.typed_digest.row_hash`: SHA-256 over the row tag and,
per column, a 4-byte big-endian length and the canonical encoding (``0x00`` for NULL, ``0x01`` + the canonical
text or bytes otherwise). The canonical text is chosen by the column's ClickHouse type:

* integers of every width: ``toString`` (plain decimal); ``Bool``: ``1``/``0``;
* decimals: the unscaled integer (the value's storage reinterpreted as a signed integer of its width);
* strings: the bytes themselves (``FixedString`` with its padding, as the value is stored and staged);
* ``Date``/``Date32``: ``YYYY-MM-DD``; ``UUID``: lower-case hyphenated text;
* ``DateTime``: seconds since the epoch; ``DateTime64(p)``: its stored ticks at precision ``p``;
* publication only (the transfer does not admit them): ``Float32``/``Float64``: the IEEE-754 bit pattern as an
  unsigned decimal (exact: ``-0.0``, ``0.0`` and every NaN payload stay distinct); ``IPv4``/``IPv6``: ``toString``.

The bytes go to ``SHA256`` through one flat ``concat`` (three arguments per field; a NULL field is the empty text
after its prefix and a ``0x00`` byte): no per-field ``concat`` and no branch over whole fields. The bytes equal those
of the earlier per-field form, so stored digests and stage objects stay valid (costs: ``docs/perf-row-hash.md``).

tests/core/clickhouse/test_clickhouse_row_hash.py checks every transfer type and its boundary values against the Python
digest, and the publication profile against the first form; tests/cluster/clickhouse/test_publication_digest.py checks the
publication profile, engine against engine.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from airflow_provider_dpone.core.column_profile import COLUMN_TYPE_UNSUPPORTED
from airflow_provider_dpone.core.columns import NativeColumn
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import quote_clickhouse

ROW_HASH_COLUMN: Final = "_dpone_row_sha256"
_TAG: Final = "'dpone.typed-row.v1\\0'"

_INTEGER: Final = re.compile(r"U?Int(?:8|16|32|64|128|256)")
_DECIMAL: Final = re.compile(r"Decimal\((\d+)(?:, ?\d+)?\)")
_DECIMAL_N: Final = re.compile(r"Decimal(32|64|128|256)\(\d+\)")
_FIXED: Final = re.compile(r"FixedString\(\d+\)")
_AS_TEXT: Final = frozenset({"Date", "Date32", "UUID", "IPv4", "IPv6"})
_FLOAT_BITS: Final = {"Float32": 32, "Float64": 64}


def _be32(expression: str) -> str:
    return f"reverse(reinterpretAsFixedString(toUInt32({expression})))"


def _decimal_width(precision: int) -> int:
    return 32 if precision <= 9 else 64 if precision <= 18 else 128 if precision <= 38 else 256


def _unwrap(type_text: str, constructor: str) -> tuple[str, bool]:
    text = type_text.strip()
    if text.startswith(f"{constructor}(") and text.endswith(")"):
        return text[len(constructor) + 1 : -1].strip(), True
    return text, False


def _text(base: str, value: str, *, low_cardinality: bool) -> str:
    """SQL for the canonical bytes of a present value of type ``base`` (no ``Nullable``/``LowCardinality``)."""
    if low_cardinality:
        return f"CAST({value} AS String)"
    if _INTEGER.fullmatch(base) or base in _AS_TEXT:
        return f"toString({value})"
    if base == "Bool":
        return f"if({value}, '1', '0')"
    if match := _DECIMAL.fullmatch(base):
        return f"toString(reinterpretAsInt{_decimal_width(int(match.group(1)))}({value}))"
    if match := _DECIMAL_N.fullmatch(base):
        return f"toString(reinterpretAsInt{match.group(1)}({value}))"
    if base.startswith("DateTime64("):
        return f"toString(reinterpretAsInt64({value}))"
    if base == "DateTime" or base.startswith("DateTime("):
        return f"toString(toUnixTimestamp({value}))"
    if base in _FLOAT_BITS:
        return f"toString(reinterpretAsUInt{_FLOAT_BITS[base]}({value}))"
    if base == "String" or _FIXED.fullmatch(base):
        return value  # FixedString with its padding (a cast to String would drop trailing NULs)
    raise DponeError(COLUMN_TYPE_UNSUPPORTED, "the typed row hash has no canonical encoding for a column type")


def _field(name: str, type_text: str) -> list[str]:
    """The field's ``concat`` arguments: the length prefix, the presence byte and the canonical bytes.

    A NULL yields ``''`` as its bytes, hence the prefix ``1`` and the byte ``char(0)``: exactly the NULL field, with
    no branch over whole fields and no nested ``concat``.
    """
    inner, low_cardinality = _unwrap(type_text, "LowCardinality")
    base, nullable = _unwrap(inner, "Nullable")
    quoted = quote_clickhouse(name)
    if not nullable:
        text, presence = _text(base, quoted, low_cardinality=low_cardinality), "'\\x01'"
    else:
        present = _text(base, f"assumeNotNull({quoted})", low_cardinality=low_cardinality)
        text, presence = f"if(isNull({quoted}), '', {present})", f"char(isNotNull({quoted}))"
    return [_be32(f"length({text}) + 1"), presence, text]


def row_hash_expression(columns: Sequence[tuple[str, str]]) -> str:
    """Each row's typed SHA-256 (a ``FixedString(32)``) over ``(name, ClickHouse type)`` columns in this order.

    One flat ``concat`` of every field's pieces; a repeated ``text`` is one common subexpression, evaluated once.
    """
    fields = ", ".join(piece for name, type_text in columns for piece in _field(name, type_text))
    return f"SHA256(concat({_TAG}, {fields}))"


def row_hash_sum_expression(columns: Sequence[tuple[str, str]]) -> str:
    """The sum modulo 2**256 of the rows' typed SHA-256s (each read as a big-endian integer), as decimal text: the
    multiset digest's summand, aggregated by the server (``toString``: no client integer width can truncate it)."""
    return f"toString(sum(reinterpretAsUInt256(reverse({row_hash_expression(columns)}))))"


def row_hash_sql(columns: tuple[NativeColumn, ...]) -> str:
    """The SELECT expression of each row's typed SHA-256 (a ``FixedString(32)``), aliased as ``ROW_HASH_COLUMN``."""
    return f"{row_hash_expression([(column.name, column.source_type) for column in columns])} AS {ROW_HASH_COLUMN}"
