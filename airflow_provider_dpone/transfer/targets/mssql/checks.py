"""Run-time checks of what the SQL Server target assumes, answered by the server before the first chunk moves.

The target's guarantees rest on server behaviour that no golden file or stand-in can prove: a transaction around every
transaction-owned application lock, exact row counts (``NOCOUNT`` off, no triggers), ``XACT_ABORT`` dooming a failed
transaction, a TDS version that carries ``DATE``/``DATETIME2`` (7.3 or later), and ``INSERT BULK`` joining the chunk's
transaction. Each is observed here and refused with its own code instead of surfacing later as a misleading failure.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Final

import pyarrow as pa

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.values.target import TargetPlan
from airflow_provider_dpone.transfer.values.target_types import ColumnType, StorageKind

XACT_ABORT: Final[int] = 16384  # @@OPTIONS bits (SET options, "user options" server configuration)
NOCOUNT: Final[int] = 512
MIN_TDS: Final[tuple[int, int]] = (7, 3)
PROBE_ORDINAL: Final[int] = -1  # never a chunk ordinal: chunks count from 0


def require_transaction(open_transactions: Any, what: str) -> None:
    """Autocommit on (a connection extra or a pooler) leaves no transaction to own the lock or the chunk."""
    if int(open_transactions) < 1:
        raise DponeError("native_transfer.target_transaction_required", f"{what}: @@TRANCOUNT is 0")


def tds_level(protocol_version: int) -> tuple[int, int]:
    """``sys.dm_exec_connections.protocol_version`` (0x730B0003 is TDS 7.3, 0x74000004 is 7.4) as (major, minor)."""
    high = (int(protocol_version) >> 24) & 0xFF
    return (high >> 4, high & 0x0F) if high >= 0x70 else (high, 0)


def check_session(facts: Sequence[Any] | None, driver_tds: tuple[int, int] | None) -> None:
    """The answer of ``tsql.SESSION_FACTS``; ``driver_tds`` is the version the driver negotiated, used when the login
    may not read the server's own view of the connection."""
    if facts is None:
        raise DponeError("native_transfer.target_session_unsupported", "session facts returned no row")
    options, open_transactions, protocol = int(facts[0]), facts[1], facts[2]
    require_transaction(open_transactions, "session")
    if options & NOCOUNT or not options & XACT_ABORT:
        detail = f"NOCOUNT {'ON' if options & NOCOUNT else 'OFF'}, XACT_ABORT {'ON' if options & XACT_ABORT else 'OFF'}"
        raise DponeError("native_transfer.target_session_unsupported", detail)
    version = tds_level(protocol) if protocol is not None else driver_tds
    if version is None or version < MIN_TDS:
        shown = "unknown" if version is None else f"{version[0]}.{version[1]}"
        raise DponeError("native_transfer.target_tds_version_unsupported", f"negotiated TDS {shown}")


def check_no_triggers(row: Sequence[Any] | None) -> None:
    count = 0 if row is None else int(row[0])
    if count:
        raise DponeError(
            "native_transfer.target_triggers_present", f"{count} trigger(s) on the target or staging table"
        )


def _probe_array(column: ColumnType) -> pa.Array:
    storage = column.storage
    if storage is StorageKind.UUID:
        return pa.array([bytes(16)], pa.uuid())
    if storage is StorageKind.DATETIME:
        return pa.array([dt.datetime(2000, 1, 1, tzinfo=dt.UTC)], pa.timestamp("us", tz="UTC"))
    values: dict[StorageKind, object] = {
        StorageKind.INTEGER: 0,
        StorageKind.UINT64: 0,
        StorageKind.DECIMAL: Decimal(0),
        StorageKind.BINARY: b"\x00" * (column.fixed_length or 1),  # never empty: empty values do not use BCP
        StorageKind.TEXT: b"probe",
        StorageKind.BOOLEAN: False,
        StorageKind.DATE: dt.date(2000, 1, 1),
    }
    return pa.array([values[storage]])


def probe_table(plan: TargetPlan) -> pa.Table:
    """One valid non-empty row of the plan's columns: the bulk-transaction probe loads it, rolls back and looks."""
    return pa.Table.from_arrays([_probe_array(c.column_type) for c in plan.columns], names=list(plan.column_names))
