"""Read-only, async readers of one distributed DDL queue entry, for :class:`ClusterDDLQueueTrigger`.

A reader answers one question: what is the per-host status of the queue entry that carries this correlation token
(and, once known, has this entry name)? It never mutates and never reads anything else. The trigger names its reader
factory by import path, because the triggerer rebuilds a trigger from its serialized kwargs in another process.

The default reader (:func:`clickhouse_queue_reader`) uses the async clickhouse-connect client on the connection's
coordinator, built from an async Airflow connection lookup. Secrets stay in memory; nothing is logged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

FINISHED = "Finished"


@dataclass(frozen=True)
class HostState:
    status: str
    exception_code: int | None = None

    @property
    def finished(self) -> bool:
        return self.status == FINISHED

    @property
    def failed(self) -> bool:
        return self.finished and bool(self.exception_code)


@dataclass(frozen=True)
class QueueSnapshot:
    """The hosts of the one entry carrying the token; ``entries`` > 1 means the token is ambiguous."""

    entry: str
    hosts: tuple[HostState, ...]
    entries: int = 1

    @property
    def finished(self) -> int:
        return sum(host.finished for host in self.hosts)

    @property
    def failed(self) -> int:
        return sum(host.failed for host in self.hosts)


class QueueReader(Protocol):
    async def read(self, cluster: str, correlation_token: str, entry: str | None) -> QueueSnapshot | None:
        """The entry's snapshot, or ``None`` while no entry carries the token. Raises on a failed read."""
        ...

    async def close(self) -> None: ...


QueueReaderFactory = Callable[[str], QueueReader]
"""Builds a reader from the ``dpone_clickhouse`` connection id."""


def snapshot_from_rows(rows: Sequence[Sequence[Any]], entry: str | None) -> QueueSnapshot | None:
    """Group ``(entry, host, port, status, exception_code)`` rows (the adapter's queue query); keep the bound entry
    when its name is known. Hosts are counted, never kept."""
    by_entry: dict[str, list[HostState]] = {}
    for name, _host, _port, status, code in rows:
        if entry is not None and name != entry:
            continue
        by_entry.setdefault(str(name), []).append(HostState(str(status), None if code is None else int(code)))
    if not by_entry:
        return None
    name = sorted(by_entry)[0]
    return QueueSnapshot(entry=name, hosts=tuple(by_entry[name]), entries=len(by_entry))


class ClickHouseQueueReader:
    """Polls ``system.distributed_ddl_queue`` through the async clickhouse-connect client (lazily connected)."""

    def __init__(self, conn_id: str) -> None:
        self.conn_id = conn_id
        self._client: Any = None

    async def _connect(self) -> Any:
        if self._client is None:
            from airflow_provider_dpone.triggers.ddl_queue_client import async_coordinator_client

            self._client = await async_coordinator_client(self.conn_id)
        return self._client

    async def read(self, cluster: str, correlation_token: str, entry: str | None) -> QueueSnapshot | None:
        from airflow_provider_dpone.cluster.clickhouse.sql_cluster_ddl import queue_entry

        client = await self._connect()
        result = await client.query(queue_entry(cluster, correlation_token))
        return snapshot_from_rows(result.result_rows, entry)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()


def clickhouse_queue_reader(conn_id: str) -> QueueReader:
    return ClickHouseQueueReader(conn_id)
