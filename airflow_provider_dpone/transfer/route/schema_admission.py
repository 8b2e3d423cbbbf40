"""Schema and type admission: ordinary columns of exact, losslessly mappable types only.

Why so strict: the typed multiset digest must mean the same thing on the source and on the target, so every admitted
type has one exact canonical encoding and a lossless target mapping. Floats, nested/dynamic/aggregate/object types,
integers wider than 64 bits, decimals wider than 38 digits, sub-microsecond or non-UTC temporals are refused before
extraction. DEFAULT/MATERIALIZED/ALIAS/EPHEMERAL columns are refused because the projection must be the stored rows.
In raw mode a business column named ``_part`` or ``_part_offset`` would shadow the provenance virtual columns, so it
is refused; legacy admission is unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from airflow_provider_dpone.core.columns import MAX_COLUMNS, NativeColumn
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import validate_identifier
from airflow_provider_dpone.core.typed_digest import LogicalType
from airflow_provider_dpone.transfer.values.query import PROVENANCE_COLUMNS
from airflow_provider_dpone.transfer.values.raw_snapshot import SchemaColumnRecord
from airflow_provider_dpone.transfer.values.source_observation import ColumnObservation
from airflow_provider_dpone.transfer.values.target_types import (
    MAX_DATETIME_PRECISION,
    MAX_DECIMAL_PRECISION,
    MAX_FIXED_STRING,
)

UTC_ZONES: Final = frozenset({"UTC", "Etc/UTC", "UCT", "Etc/UCT", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu"})
_INT: Final[re.Pattern[str]] = re.compile(r"(U?)Int(8|16|32|64)")
_DECIMAL: Final[re.Pattern[str]] = re.compile(r"Decimal\((\d+),\s*(\d+)\)")
_DECIMAL_N: Final[re.Pattern[str]] = re.compile(r"Decimal(32|64|128)\((\d+)\)")
_DT64: Final[re.Pattern[str]] = re.compile(r"DateTime64\((\d+)(?:,\s*'([^']*)')?\)")
_DT: Final[re.Pattern[str]] = re.compile(r"DateTime(?:\('([^']*)'\))?")
_FIXED: Final[re.Pattern[str]] = re.compile(r"FixedString\((\d+)\)")
_DECIMAL_N_PRECISION: Final = {"32": 9, "64": 18, "128": 38}


def implicit_calendar_is_utc(server_timezone: str, session_timezone: str) -> bool:
    """A DateTime without an explicit zone is UTC only if both the server and the session calendars are UTC."""
    return server_timezone in UTC_ZONES and (session_timezone == "" or session_timezone in UTC_ZONES)


def _unsupported(name: str, why: str) -> DponeError:
    return DponeError("native_transfer.source_schema_unsupported", f"column {name}: {why}")


def _unwrap(type_text: str, wrapper: str) -> tuple[str, bool]:
    prefix = wrapper + "("
    if type_text.startswith(prefix) and type_text.endswith(")"):
        return type_text[len(prefix) : -1], True
    return type_text, False


def _temporal_zone_ok(name: str, zone: str | None, implicit_utc: bool) -> None:
    if zone is None or zone == "":
        if not implicit_utc:
            raise _unsupported(name, "DateTime without a zone needs UTC server and session calendars")
    elif zone not in UTC_ZONES:
        raise _unsupported(name, "temporal columns must be UTC")


def map_type(name: str, type_text: str, *, implicit_utc: bool) -> NativeColumn:
    """Map one ClickHouse type to its admitted typed column, or refuse it."""
    inner, low_cardinality = _unwrap(type_text, "LowCardinality")
    inner, nullable = _unwrap(inner, "Nullable")
    if low_cardinality and inner != "String":
        raise _unsupported(name, "LowCardinality is admitted for String only")
    common = {"name": name, "source_type": type_text, "nullable": nullable}
    if match := _INT.fullmatch(inner):
        signed = match.group(1) == ""
        return NativeColumn(
            **common, logical=LogicalType.INTEGER, integer_bits=int(match.group(2)), integer_signed=signed
        )
    if inner == "Bool":
        return NativeColumn(**common, logical=LogicalType.BOOLEAN)
    if match := _DECIMAL.fullmatch(inner):
        precision, scale = int(match.group(1)), int(match.group(2))
        if precision > MAX_DECIMAL_PRECISION:
            raise _unsupported(name, f"decimal precision above {MAX_DECIMAL_PRECISION}")
        return NativeColumn(**common, logical=LogicalType.DECIMAL, precision=precision, scale=scale)
    if match := _DECIMAL_N.fullmatch(inner):
        return NativeColumn(
            **common,
            logical=LogicalType.DECIMAL,
            precision=_DECIMAL_N_PRECISION[match.group(1)],
            scale=int(match.group(2)),
        )
    if inner == "String":
        return NativeColumn(**common, logical=LogicalType.STRING)
    if (match := _FIXED.fullmatch(inner)) and 1 <= int(match.group(1)) <= MAX_FIXED_STRING:
        return NativeColumn(**common, logical=LogicalType.STRING)
    if inner == "UUID":
        return NativeColumn(**common, logical=LogicalType.UUID)
    if inner in ("Date", "Date32"):
        return NativeColumn(**common, logical=LogicalType.DATE)
    if match := _DT64.fullmatch(inner):
        scale = int(match.group(1))
        if scale > MAX_DATETIME_PRECISION:
            raise _unsupported(name, f"DateTime64 precision above {MAX_DATETIME_PRECISION}")
        _temporal_zone_ok(name, match.group(2), implicit_utc)
        return NativeColumn(**common, logical=LogicalType.DATETIME, scale=scale)
    if match := _DT.fullmatch(inner):
        _temporal_zone_ok(name, match.group(1), implicit_utc)
        return NativeColumn(**common, logical=LogicalType.DATETIME, scale=0)
    raise _unsupported(name, "type is not admitted (floats, nested, dynamic, aggregate, wide integers, ...)")


def admit_columns(
    observed: Sequence[ColumnObservation], *, raw: bool, implicit_utc: bool
) -> tuple[tuple[NativeColumn, ...], tuple[SchemaColumnRecord, ...]]:
    """The ordered projection and its schema records; every column of the relation must be admitted."""
    if not observed:
        raise DponeError("native_transfer.source_metadata_unavailable", "relation has no visible columns")
    if len(observed) > MAX_COLUMNS:
        raise DponeError("native_transfer.source_schema_unsupported", f"more than {MAX_COLUMNS} columns")
    seen: set[str] = set()
    columns: list[NativeColumn] = []
    records: list[SchemaColumnRecord] = []
    for column in observed:
        try:
            validate_identifier(column.name, what="column")
        except DponeError:
            raise DponeError(
                "native_transfer.source_schema_unsupported", "a column name is not a plain identifier"
            ) from None
        if column.name in seen:
            raise _unsupported(column.name, "duplicate column name")
        seen.add(column.name)
        if raw and column.name in PROVENANCE_COLUMNS:
            raise _unsupported(column.name, "reserved provenance name in exact_raw_rows mode")
        if column.default_kind:
            raise _unsupported(column.name, f"{column.default_kind} column")
        columns.append(map_type(column.name, column.type, implicit_utc=implicit_utc))
        records.append(
            SchemaColumnRecord(
                name=column.name,
                type=column.type,
                default_kind="",
                in_partition_key=column.in_partition_key,
                in_sorting_key=column.in_sorting_key,
                in_primary_key=column.in_primary_key,
            )
        )
    return tuple(columns), tuple(records)
