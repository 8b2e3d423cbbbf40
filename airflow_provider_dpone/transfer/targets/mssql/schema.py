"""Compare an existing SQL Server table (``sys.columns``) with the planned column types.

Window replace inserts staged rows into an existing table; an implicit conversion there (a narrower DECIMAL, a
DATETIME2 of lower precision, VARCHAR for NVARCHAR) would publish values other than the verified ones. So the table
must have exactly the planned columns with exactly the planned types; a planned nullable column needs a nullable
target column.

A binary column created while ``ANSI_PADDING`` was OFF (``sys.columns.is_ansi_padded = 0``) drops the trailing zero
bytes of every value it stores ("SET ANSI_PADDING": a ``varbinary(n)``, and a ``binary(n) NULL``, which "follows the
same rules as varbinary"; ``binary(n) NOT NULL`` is padded either way and ``(max)`` types always behave as ON), so
the window replace would publish other values than the verified ones: such a column is refused before anything is
staged (``native_transfer.target_column_unpadded``). The route's own tables are created by sessions that set
``ANSI_PADDING ON`` (``tsql.session_settings``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.values.target import CHUNK_COLUMN, ROW_COLUMN, TargetPlan

_PLAIN = {"tinyint", "smallint", "int", "bigint", "bit", "date", "uniqueidentifier"}


def describe_tsql_type(type_name: str, max_length: int, precision: int, scale: int) -> str:
    """Spell a column type from ``sys.columns`` the way the type mapping spells it (``DECIMAL(20,0)``...)."""
    name = type_name.lower()
    if name in _PLAIN:
        return name.upper()
    if name in {"decimal", "numeric"}:
        return f"DECIMAL({precision},{scale})"
    if name == "datetime2":
        return f"DATETIME2({scale})"
    if name in {"varbinary", "nvarchar"}:
        return f"{name.upper()}(MAX)" if max_length == -1 else f"{name.upper()}({max_length})"
    if name == "binary":
        return f"BINARY({max_length})"
    return name.upper()


def drops_trailing_zeros(spelled: str, nullable: bool, ansi_padded: bool) -> bool:
    """Whether a column spelled ``spelled`` stores a binary value without its trailing zero bytes."""
    if ansi_padded or spelled.endswith("(MAX)"):
        return False
    return spelled.startswith("VARBINARY(") or (spelled.startswith("BINARY(") and nullable)


def check_target_columns(plan: TargetPlan, rows: Sequence[Sequence[Any]]) -> None:
    """``rows``: ``tsql.TABLE_COLUMNS`` (name, type name, max_length, precision, scale, is_nullable,
    is_ansi_padded)."""
    found = {
        str(row[0]): (
            describe_tsql_type(str(row[1]), int(row[2]), int(row[3]), int(row[4])),
            bool(row[5]),
            bool(row[6]),
        )
        for row in rows
    }
    if set(found) != set(plan.column_names):
        raise DponeError("native_transfer.target_schema_mismatch", f"{len(found)} target columns, column set differs")
    for column in plan.columns:
        spelled, nullable, ansi_padded = found[column.name]
        if spelled != column.column_type.tsql or (column.column_type.nullable and not nullable):
            raise DponeError("native_transfer.target_schema_mismatch", f"column {column.name}")
        if drops_trailing_zeros(spelled, nullable, ansi_padded):
            raise DponeError("native_transfer.target_column_unpadded", f"column {column.name} ({spelled})")


def check_staging_columns(plan: TargetPlan, rows: Sequence[Sequence[Any]]) -> None:
    """``rows``: ``tsql.TABLE_COLUMNS`` of staging, read under the publishing transaction's lock. Its columns, in
    order, must be the ones ``tsql.create_staging`` made from the plan (the ordinal and position, then every planned
    column in its type and nullability), which the chunks were loaded and verified into; else
    ``native_transfer.target_staging_schema_changed``. A digest recomputed over a retyped column can equal the
    source's (``INT`` and ``BIGINT`` spell one integer alike)."""
    found = [
        (str(row[0]), describe_tsql_type(str(row[1]), int(row[2]), int(row[3]), int(row[4])), bool(row[5]))
        for row in rows
    ]
    expected = [(CHUNK_COLUMN, "INT", False), (ROW_COLUMN, "INT", False)] + [
        (c.name, c.column_type.tsql, c.column_type.nullable) for c in plan.columns
    ]
    if found != expected:
        differing = [want[0] for got, want in zip(found, expected, strict=False) if got != want]
        detail = f"{len(found)} staging columns for {len(expected)}" + (
            f"; first differing: column {differing[0]}" if differing else ""
        )
        raise DponeError("native_transfer.target_staging_schema_changed", detail)
