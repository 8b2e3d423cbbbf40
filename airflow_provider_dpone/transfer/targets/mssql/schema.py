"""Compare an existing SQL Server table (``sys.columns``) with the planned column types.

Window replace inserts staged rows into an existing table; an implicit conversion there (a narrower DECIMAL, a
DATETIME2 of lower precision, VARCHAR for NVARCHAR) would publish values other than the verified ones. So the table
must have exactly the planned columns with exactly the planned types; a planned nullable column needs a nullable
target column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.values.target import TargetPlan

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


def check_target_columns(plan: TargetPlan, rows: Sequence[Sequence[Any]]) -> None:
    found = {
        str(row[0]): (describe_tsql_type(str(row[1]), int(row[2]), int(row[3]), int(row[4])), bool(row[5]))
        for row in rows
    }
    if set(found) != set(plan.column_names):
        raise DponeError("native_transfer.target_schema_mismatch", f"{len(found)} target columns, column set differs")
    for column in plan.columns:
        spelled, nullable = found[column.name]
        if spelled != column.column_type.tsql or (column.column_type.nullable and not nullable):
            raise DponeError("native_transfer.target_schema_mismatch", f"column {column.name}")
