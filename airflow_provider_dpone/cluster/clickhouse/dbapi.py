"""A DB-API 2 connection over one of the provider's hardened clients, for Airflow's common-sql operators.

``SQLExecuteQueryOperator`` and the other common-sql operators run ad-hoc SQL through ``DbApiHook.get_conn()``. This
connection hands them clickhouse-connect's own DB-API cursor over a one-shot client of the coordinator (no driver
retry, no redirect: a statement the user wrote may be a mutation, so it is sent at most once). ClickHouse has no
client-side transactions: ``commit`` and ``rollback`` do nothing, and ``close`` closes the client.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_dpone.core.clickhouse.clients import close_client


class DbApiConnection:
    """PEP 249 connection: ``cursor``, ``commit``, ``rollback``, ``close`` over one clickhouse-connect client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def cursor(self) -> Any:
        from clickhouse_connect.dbapi.cursor import Cursor

        return Cursor(self.client)

    def commit(self) -> None:
        """Nothing to commit: every statement took effect when the server answered it."""

    def rollback(self) -> None:
        """Nothing to roll back (ClickHouse has no client-side transactions)."""

    def close(self) -> None:
        close_client(self.client)

    def __enter__(self) -> DbApiConnection:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
