"""Run-time checks of what the SQL Server target assumes, answered by the server before the first chunk moves.

The target's guarantees rest on server behaviour that no golden file or stand-in can prove: a transaction around every
transaction-owned application lock, exact row counts (``NOCOUNT`` off, no triggers), ``XACT_ABORT`` dooming a failed
transaction, the ANSI session options the load and the digest depend on (:data:`SESSION_OPTIONS`), a TDS version that carries ``DATE``/``DATETIME2`` (7.3 or later), and ``INSERT BULK`` joining the chunk's
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

# @@OPTIONS bits, as "@@OPTIONS (Transact-SQL)" and the "user options" server configuration option number them.
ANSI_WARNINGS: Final[int] = 8
ANSI_PADDING: Final[int] = 16
ANSI_NULLS: Final[int] = 32
ARITHABORT: Final[int] = 64
QUOTED_IDENTIFIER: Final[int] = 256
NOCOUNT: Final[int] = 512
CONCAT_NULL_YIELDS_NULL: Final[int] = 4096
XACT_ABORT: Final[int] = 16384
SESSION_OPTIONS: Final[tuple[tuple[str, int, bool], ...]] = (
    ("XACT_ABORT", XACT_ABORT, True),  # any runtime error dooms the whole transaction
    ("NOCOUNT", NOCOUNT, False),  # row counts are relied on
    ("ANSI_PADDING", ANSI_PADDING, True),  # a BINARY(n) NULL column created in the session keeps trailing zeros
    ("ANSI_WARNINGS", ANSI_WARNINGS, True),  # an overflow or truncation fails instead of storing NULL or a cut value
    ("ANSI_NULLS", ANSI_NULLS, True),  # "= NULL" never matches: the window and chunk predicates mean what they say
    ("CONCAT_NULL_YIELDS_NULL", CONCAT_NULL_YIELDS_NULL, True),  # the digest's "+" of a NULL field is never ''
    ("QUOTED_IDENTIFIER", QUOTED_IDENTIFIER, True),  # the bracketed names and N'' literals parse as written
    ("ARITHABORT", ARITHABORT, True),  # an arithmetic error ends the statement (with ANSI_WARNINGS ON it is implied)
)
"""Each option the load and the digest depend on: its name as ``SET`` spells it, its bit, and the required state.
:func:`~airflow_provider_dpone.transfer.targets.mssql.tsql.session_settings` sets each one on every connection, and
:func:`check_session` reads them back: DB-Library logins start with ANSI_PADDING, ANSI_WARNINGS, ANSI_NULLS,
CONCAT_NULL_YIELDS_NULL, QUOTED_IDENTIFIER and ARITHABORT OFF unless the driver's connection properties set them, and
a logon trigger, a pooler or the server's "user options" may change them after."""
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


def check_options(options: Any) -> None:
    """``@@OPTIONS`` as the session reads it after its settings: every option of :data:`SESSION_OPTIONS` in its
    required state, or ``native_transfer.target_session_unsupported`` naming each one that differs."""
    if options is None:
        raise DponeError("native_transfer.target_session_unsupported", "@@OPTIONS returned no value")
    value = int(options)
    differ = [
        f"{name} {'ON' if value & bit else 'OFF'}"
        for name, bit, required in SESSION_OPTIONS
        if bool(value & bit) is not required
    ]
    if differ:
        raise DponeError("native_transfer.target_session_unsupported", ", ".join(differ))


def check_session(facts: Sequence[Any] | None, driver_tds: tuple[int, int] | None) -> None:
    """The answer of ``tsql.SESSION_FACTS``; ``driver_tds`` is the version the driver negotiated, used when the login
    may not read the server's own view of the connection."""
    if facts is None:
        raise DponeError("native_transfer.target_session_unsupported", "session facts returned no row")
    options, open_transactions, protocol = int(facts[0]), facts[1], facts[2]
    require_transaction(open_transactions, "session")
    check_options(options)
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
