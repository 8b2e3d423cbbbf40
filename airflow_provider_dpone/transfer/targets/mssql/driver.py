"""The slice of pymssql's DB-API the SQL Server target uses, and how its failures are classified.

The adapter is written against these protocols so the recording fake in the tests can stand in for pymssql exactly
where pymssql would be (no other seam). ``DRIVER_ERRORS`` is what the driver raises for a statement that failed:
pymssql's DB-API errors, and the ``_mssql`` exceptions its ``bulk_copy`` raises unwrapped.

Connections (:func:`mssql_connection_factory`): connections for the SQL Server target, from an Airflow connection through the Microsoft SQL Server provider.

``MsSqlHook.get_conn()`` returns a pymssql connection with autocommit off: pymssql opens a transaction at connect and
after every commit or rollback, which is exactly the one-transaction-per-call shape the target needs. The hook reads
host, port, credentials and driver options (``tds_version``, ``login_timeout``, ``timeout``, ``encryption``...) from
the connection's extras; secrets stay inside the hook and the driver.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, Final, Protocol

import pymssql
from pymssql import _mssql

from airflow_provider_dpone.core.errors import DponeError


class DbCursor(Protocol):
    @property
    def rowcount(self) -> int: ...
    def execute(self, operation: str, params: tuple[Any, ...] | None = None) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchmany(self, size: int = ...) -> Any: ...
    def close(self) -> Any: ...


class DbConnection(Protocol):
    def cursor(self) -> Any: ...
    def commit(self) -> Any: ...
    def rollback(self) -> Any: ...
    def close(self) -> Any: ...
    def bulk_copy(
        self,
        table_name: str,
        elements: Any,  # any iterable of rows: pymssql iterates it once (its stub says Sequence)
        column_ids: Any = None,
        batch_size: int = 1000,
        tablock: bool = False,
        check_constraints: bool = False,
        fire_triggers: bool = False,
    ) -> Any: ...


ConnectionFactory = Callable[[], DbConnection]

MIN_PYMSSQL: Final[tuple[int, int, int]] = (2, 4, 5)
"""pymssql before 2.4.5 sends NVARCHAR values through ``bulk_copy`` as they are in the connection charset: the server
reads them as UTF-16 and stores other characters, or refuses an odd byte count ("Unicode data is odd byte size";
pymssql issues #725, #917). The dependency excludes those versions; :func:`require_supported_driver` refuses them at
run time too, where an older pymssql is installed anyway."""


def _release(version: str) -> tuple[int, ...]:
    numbers = []
    for part in version.split(".")[:3]:
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


def require_supported_driver() -> None:
    """Refuse a pymssql older than :data:`MIN_PYMSSQL` (``native_transfer.target_driver_unsupported``)."""
    version = str(getattr(pymssql, "__version__", ""))
    if _release(version) < MIN_PYMSSQL:
        wanted = ".".join(str(n) for n in MIN_PYMSSQL)
        raise DponeError("native_transfer.target_driver_unsupported", f"pymssql {version or 'unknown'} < {wanted}")


DRIVER_ERRORS: tuple[type[BaseException], ...] = (pymssql.Error, _mssql.MSSQLException)


def negotiated_tds(conn: DbConnection) -> tuple[int, int] | None:
    """The TDS version the driver negotiated (pymssql's ``tds_version_tuple`` of its ``_mssql`` connection)."""
    version = getattr(getattr(conn, "_conn", None), "tds_version_tuple", None)
    return (int(version[0]), int(version[1])) if isinstance(version, tuple) and len(version) == 2 else None


def error_number(exc: BaseException) -> int | None:
    """The SQL Server error number of a driver exception (``_mssql`` exceptions carry ``number``; pymssql's DB-API
    errors carry it as their first argument), or None."""
    number = getattr(exc, "number", None)
    if number is None and exc.args:
        first = exc.args[0]
        if isinstance(first, tuple) and first:
            first = first[0]
        number = first
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def sanitized(exc: BaseException) -> str:
    """Exception class and SQL Server error number only: server messages may quote values."""
    number = error_number(exc)
    return type(exc).__name__ + (f" error {number}" if number is not None else "")


def mssql_connection_factory(mssql_conn_id: str, *, database: str | None = None) -> ConnectionFactory:
    """A factory of fresh pymssql connections for ``mssql_conn_id`` (one per port call, never reused).

    ``database`` overrides the connection's database (the hook calls it ``schema``).
    """

    def connect() -> DbConnection:
        from airflow.providers.microsoft.mssql.hooks.mssql import MsSqlHook

        hook = MsSqlHook(mssql_conn_id=mssql_conn_id, schema=database)
        conn: DbConnection = hook.get_conn()
        return conn

    return connect
