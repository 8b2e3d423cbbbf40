"""ClickHouse column types -> target column types (SQL Server, PostgreSQL), and the values each accepts.

Only mappings that are lossless *and* exactly verifiable are admitted: a value read back from the target must encode to
the same typed-digest bytes as the value the source read (``core/typed_digest.py``). Everything else is refused
with ``native_transfer.target_type_unsupported`` before any row moves.

Decisions (see docs/targets.md for the table):

* ClickHouse ``String`` is an arbitrary byte string, not text. The default mapping is therefore binary
  (``VARBINARY(MAX)`` / ``bytea``): every byte sequence round-trips. ``string_mapping: text`` is an explicit opt-in
  (``NVARCHAR(MAX)`` / ``text``) that refuses, per value, anything that is not strict UTF-8 (and NUL for PostgreSQL,
  whose ``text`` cannot hold it) instead of replacing characters: a lossy text column would pass a count check but
  publish different data.
* ``UInt64`` exceeds ``BIGINT``: it maps to ``DECIMAL(20,0)`` / ``numeric(20,0)`` and reads back as an integer.
* ``Int8`` maps to ``SMALLINT`` because ``TINYINT`` is unsigned in SQL Server; ``UInt8`` maps to ``TINYINT``.
* ``DateTime('UTC')`` / ``DateTime64(p, 'UTC')`` with ``p <= 6`` map to ``DATETIME2(p)`` (UTC by convention) and
  ``timestamptz(p)``. ``p > 6`` is refused: the value path carries microseconds. A DateTime without an explicit UTC
  zone is refused: its calendar depends on a server setting.
* Floats are refused: their equality is not exact across systems, so no digest can verify them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Final

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer import StringMapping
from airflow_provider_dpone.core.typed_digest import LogicalType, TypedColumn

MAX_DECIMAL_PRECISION: Final[int] = 38
MAX_DATETIME_PRECISION: Final[int] = 6
MAX_FIXED_STRING: Final[int] = 8000


class StorageKind(StrEnum):
    """The physical family of a target column: it selects the value adapter of each backend."""

    INTEGER = "integer"
    UINT64 = "uint64"
    DECIMAL = "decimal"
    BINARY = "binary"
    TEXT = "text"
    BOOLEAN = "boolean"
    DATE = "date"
    DATETIME = "datetime"
    UUID = "uuid"


@dataclass(frozen=True)
class ColumnType:
    """One admitted column type: its logical digest type and its spelling in each target dialect."""

    source_type: str
    storage: StorageKind
    logical: LogicalType
    nullable: bool
    tsql: str
    postgres: str
    scale: int = 0
    precision: int = 0
    int_min: int | None = None
    int_max: int | None = None
    fixed_length: int | None = None

    def typed(self, name: str) -> TypedColumn:
        return TypedColumn(name=name, logical=self.logical, nullable=self.nullable, scale=self.scale)


_INTEGERS: Final[dict[str, tuple[int, int, str, str]]] = {
    "Int8": (-(2**7), 2**7 - 1, "SMALLINT", "smallint"),
    "UInt8": (0, 2**8 - 1, "TINYINT", "smallint"),
    "Int16": (-(2**15), 2**15 - 1, "SMALLINT", "smallint"),
    "UInt16": (0, 2**16 - 1, "INT", "integer"),
    "Int32": (-(2**31), 2**31 - 1, "INT", "integer"),
    "UInt32": (0, 2**32 - 1, "BIGINT", "bigint"),
    "Int64": (-(2**63), 2**63 - 1, "BIGINT", "bigint"),
}
_DECIMAL_ALIASES: Final[dict[str, int]] = {"Decimal32": 9, "Decimal64": 18, "Decimal128": 38, "Decimal256": 76}
_WRAPPER: Final[re.Pattern[str]] = re.compile(r"(Nullable|LowCardinality)\((.*)\)")
_CALL: Final[re.Pattern[str]] = re.compile(r"([A-Za-z][A-Za-z0-9]*)(?:\((.*)\))?")
_UTC: Final[frozenset[str]] = frozenset({"'UTC'"})


def _refuse(source_type: str, reason: str) -> DponeError:
    # The type text is catalog metadata, not row data; it is bounded before it reaches a message.
    return DponeError("native_transfer.target_type_unsupported", f"{source_type[:80]}: {reason}")


def _args(text: str | None) -> list[str]:
    return [part.strip() for part in text.split(",")] if text else []


def _int_arg(source_type: str, text: str) -> int:
    if not text.isdigit():
        raise _refuse(source_type, "non-integer type argument")
    return int(text)


@lru_cache(maxsize=512)
def parse_column_type(source_type: str, string_mapping: StringMapping = StringMapping.BINARY) -> ColumnType:
    """Map one ClickHouse type (as ``system.columns.type`` spells it) to its target column type, or refuse it."""
    text = source_type.strip()
    nullable = False
    while match := _WRAPPER.fullmatch(text):
        if match.group(1) == "Nullable":
            if nullable:
                raise _refuse(source_type, "nested Nullable")
            nullable = True
        text = match.group(2).strip()
    call = _CALL.fullmatch(text)
    if call is None:
        raise _refuse(source_type, "not a scalar type")
    name, args = call.group(1), _args(call.group(2))
    base = _base_type(source_type, name, args, string_mapping)
    return ColumnType(
        source_type=source_type,
        storage=base.storage,
        logical=base.logical,
        nullable=nullable,
        tsql=base.tsql,
        postgres=base.postgres,
        scale=base.scale,
        precision=base.precision,
        int_min=base.int_min,
        int_max=base.int_max,
        fixed_length=base.fixed_length,
    )


def _base_type(source_type: str, name: str, args: list[str], string_mapping: StringMapping) -> ColumnType:
    def make(
        storage: StorageKind,
        logical: LogicalType,
        tsql: str,
        postgres: str,
        *,
        scale: int = 0,
        precision: int = 0,
        int_min: int | None = None,
        int_max: int | None = None,
        fixed_length: int | None = None,
    ) -> ColumnType:
        return ColumnType(
            source_type, storage, logical, False, tsql, postgres, scale, precision, int_min, int_max, fixed_length
        )

    if name in _INTEGERS and not args:
        low, high, tsql, postgres = _INTEGERS[name]
        return make(StorageKind.INTEGER, LogicalType.INTEGER, tsql, postgres, int_min=low, int_max=high)
    if name == "UInt64" and not args:
        return make(
            StorageKind.UINT64, LogicalType.INTEGER, "DECIMAL(20,0)", "numeric(20,0)", int_min=0, int_max=2**64 - 1
        )
    if name in {"Int128", "UInt128", "Int256", "UInt256"}:
        raise _refuse(source_type, "wider than DECIMAL(38,0)")
    if name in {"Float32", "Float64", "BFloat16"}:
        raise _refuse(source_type, "floats cannot be verified exactly")
    if name == "Decimal" or name in _DECIMAL_ALIASES:
        precision, scale = _decimal_arguments(source_type, name, args)
        spelled = f"{precision},{scale}"
        return make(
            StorageKind.DECIMAL,
            LogicalType.DECIMAL,
            f"DECIMAL({spelled})",
            f"numeric({spelled})",
            scale=scale,
            precision=precision,
        )
    if name == "String" and not args:
        if string_mapping is StringMapping.TEXT:
            return make(StorageKind.TEXT, LogicalType.STRING, "NVARCHAR(MAX)", "text")
        return make(StorageKind.BINARY, LogicalType.STRING, "VARBINARY(MAX)", "bytea")
    if name == "FixedString" and len(args) == 1:
        length = _int_arg(source_type, args[0])
        if not 1 <= length <= MAX_FIXED_STRING:
            raise _refuse(source_type, f"FixedString length outside 1..{MAX_FIXED_STRING}")
        if string_mapping is StringMapping.TEXT:
            raise _refuse(source_type, "FixedString is padded bytes: map it as binary")
        return make(StorageKind.BINARY, LogicalType.STRING, f"BINARY({length})", "bytea", fixed_length=length)
    if name in {"Bool", "Boolean"} and not args:
        return make(StorageKind.BOOLEAN, LogicalType.BOOLEAN, "BIT", "boolean")
    if name in {"Date", "Date32"} and not args:
        return make(StorageKind.DATE, LogicalType.DATE, "DATE", "date")
    if name in {"DateTime", "DateTime64"}:
        precision = _datetime_precision(source_type, name, args)
        return make(
            StorageKind.DATETIME,
            LogicalType.DATETIME,
            f"DATETIME2({precision})",
            f"timestamp({precision}) with time zone",
            scale=precision,
        )
    if name == "UUID" and not args:
        return make(StorageKind.UUID, LogicalType.UUID, "UNIQUEIDENTIFIER", "uuid")
    raise _refuse(source_type, "no exact target mapping")


def _decimal_arguments(source_type: str, name: str, args: list[str]) -> tuple[int, int]:
    if name == "Decimal":
        if len(args) != 2:
            raise _refuse(source_type, "Decimal needs precision and scale")
        precision, scale = _int_arg(source_type, args[0]), _int_arg(source_type, args[1])
    else:
        if len(args) != 1:
            raise _refuse(source_type, f"{name} needs a scale")
        precision, scale = _DECIMAL_ALIASES[name], _int_arg(source_type, args[0])
    if not 1 <= precision <= MAX_DECIMAL_PRECISION:
        raise _refuse(source_type, f"precision {precision} outside 1..{MAX_DECIMAL_PRECISION}")
    if scale > precision:
        raise _refuse(source_type, "scale greater than precision")
    return precision, scale


def _datetime_precision(source_type: str, name: str, args: list[str]) -> int:
    if name == "DateTime":
        if args != ["'UTC'"]:
            raise _refuse(source_type, "DateTime needs an explicit 'UTC' time zone")
        return 0
    if len(args) != 2 or args[1] not in _UTC:
        raise _refuse(source_type, "DateTime64 needs a precision and an explicit 'UTC' time zone")
    precision = _int_arg(source_type, args[0])
    if precision > MAX_DATETIME_PRECISION:
        raise _refuse(source_type, f"precision {precision} finer than microseconds")
    return precision
