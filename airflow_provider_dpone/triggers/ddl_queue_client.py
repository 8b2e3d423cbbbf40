"""The trigger's async coordinator client: the hook's async connection lookup plus the async clickhouse-connect client.

Reads only (the queue status). Transport options come from the connection exactly as the hook resolves them for every
other client: HTTPS when asked (never downgraded), certificate verification, bounded timeouts, no redirects. The
password stays in memory.
"""

from __future__ import annotations

from typing import Any


async def async_coordinator_client(conn_id: str) -> Any:
    """An async clickhouse-connect client on the coordinator of the ``dpone_clickhouse`` connection ``conn_id``."""
    from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

    return await DponeClickHouseHook(dpone_clickhouse_conn_id=conn_id).async_coordinator_client()
