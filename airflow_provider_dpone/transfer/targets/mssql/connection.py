"""Connections for the SQL Server target, from an Airflow connection through the Microsoft SQL Server provider.

``MsSqlHook.get_conn()`` returns a pymssql connection with autocommit off: pymssql opens a transaction at connect and
after every commit or rollback, which is exactly the one-transaction-per-call shape the target needs. The hook reads
host, port, credentials and driver options (``tds_version``, ``login_timeout``, ``timeout``, ``encryption``...) from
the connection's extras; secrets stay inside the hook and the driver.
"""

from __future__ import annotations

from airflow_provider_dpone.transfer.targets.mssql.driver import ConnectionFactory, DbConnection


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
