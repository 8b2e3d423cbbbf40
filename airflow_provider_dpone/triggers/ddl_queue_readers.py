"""Read-only, async readers of one distributed DDL queue entry, for :class:`ClusterDDLQueueTrigger`.

A reader answers one question: which queue entries carry this correlation token (and, once known, have this entry
name), with each host's status? It never mutates and never reads anything else. The trigger names its reader
factory by import path, because the triggerer rebuilds a trigger from its serialized kwargs in another process.

The default reader (:func:`clickhouse_queue_reader`) is :meth:`DponeClickHouseHook.aqueue_entries
<airflow_provider_dpone.hooks.clickhouse.DponeClickHouseHook.aqueue_entries>` of the connection's coordinator: the
async client, from an async Airflow connection lookup, and the rows parsed by the one queue parser. Secrets stay in
memory; nothing is logged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from airflow_provider_dpone.cluster.clickhouse.sql_cluster_ddl import QueueEntry


class QueueReader(Protocol):
    async def read(self, cluster: str, correlation_token: str, entry: str | None) -> Sequence[QueueEntry]:
        """Every entry carrying the token (only ``entry`` once known): none yet, one, or (never expected) more, in
        name order. Raises on a failed read."""
        ...

    async def close(self) -> None: ...


QueueReaderFactory = Callable[[str], QueueReader]
"""Builds a reader from the ``dpone_clickhouse`` connection id."""


class ClickHouseQueueReader:
    """Polls ``system.distributed_ddl_queue`` through the hook of the connection (its async client, lazily built)."""

    def __init__(self, conn_id: str) -> None:
        from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

        self.conn_id = conn_id
        self.hook = DponeClickHouseHook(dpone_clickhouse_conn_id=conn_id)

    async def read(self, cluster: str, correlation_token: str, entry: str | None) -> Sequence[QueueEntry]:
        return await self.hook.aqueue_entries(cluster, correlation_token, entry)

    async def close(self) -> None:
        await self.hook.aclose()


def clickhouse_queue_reader(conn_id: str) -> QueueReader:
    return ClickHouseQueueReader(conn_id)
