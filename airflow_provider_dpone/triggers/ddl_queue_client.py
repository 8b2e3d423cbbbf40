"""The trigger's async coordinator client: async Airflow connection lookup plus the async clickhouse-connect client.

Reads only (the queue status); transport options come from the connection's extra exactly as the hook parses them:
HTTPS when asked (never downgraded), certificate verification, bounded timeouts. The password stays in memory.
"""

from __future__ import annotations

from typing import Any


async def async_coordinator_client(conn_id: str) -> Any:
    """An async clickhouse-connect client on the connection's coordinator endpoint."""
    import clickhouse_connect
    from airflow.sdk import BaseHook

    from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

    hook_async_client = getattr(DponeClickHouseHook(dpone_clickhouse_conn_id=conn_id), "async_coordinator_client", None)
    if hook_async_client is not None:
        return await hook_async_client()
    connection = await BaseHook.aget_connection(conn_id)
    options = DponeClickHouseHook.parse_options(connection.extra)
    return await clickhouse_connect.get_async_client(
        host=connection.host,
        port=connection.port,
        username=connection.login or "default",
        password=connection.password or "",
        secure=options.secure,
        verify=options.verify,
        ca_cert=options.ca_cert,
        connect_timeout=options.connect_timeout_seconds,
        send_receive_timeout=options.send_receive_timeout_seconds,
        query_retries=0,
        autogenerate_session_id=False,
    )
