"""Running the native transfer route against the real engine (chdb) with a recording connector and a fake target."""

from __future__ import annotations

import collections
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.core.alerts import AlertEvent
from airflow_provider_dpone.core.manifest.transfer_options import NativeTransferOptions
from airflow_provider_dpone.transfer.route.admission import SourceRequest
from airflow_provider_dpone.transfer.route.route import NativeTransferRoute, RouteResult
from airflow_provider_dpone.transfer.source.session import ClickHouseSnapshotConnector, inprocess_transport
from airflow_provider_dpone.transfer.storage import ObjectJournalStore, ObjectStageStore
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow
from tests.support.fakes.transfer_source import ManualClock
from tests.support.fakes.transfer_target import InMemoryTransferTarget
from tests.support.transfer import native_chdb

OPERATION = "fedcba9876543210fedcba9876543210"
RAW = {"source_snapshot": {"mode": "exact_raw_rows", "replica_scope": "single_server"}}


class RecordingClient:
    """Delegates to a real client and records every data-stream query text (to count the data SELECTs)."""

    def __init__(self, client: Client, streams: list[str]) -> None:
        self._client = client
        self._streams = streams

    def query_arrow_stream(self, query: str, *args: Any, **kwargs: Any) -> Any:
        self._streams.append(query)
        return self._client.query_arrow_stream(query, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@dataclass
class ChdbRoute:
    root: Path
    relation: RelationRef
    options: dict[str, Any] = field(default_factory=lambda: dict(RAW))
    window: UtcWindow | None = None
    target: InMemoryTransferTarget = field(default_factory=InMemoryTransferTarget)
    clock: ManualClock = field(default_factory=ManualClock)
    streams: list[str] = field(default_factory=list)
    clients: list[Client] = field(default_factory=list)
    deny: bool = False
    alerts: list[AlertEvent] = field(default_factory=list)

    def _client(self) -> Any:
        if self.deny:
            raise AssertionError("the source was opened after EOF")
        client = native_chdb.client()
        self.clients.append(client)
        return RecordingClient(client, self.streams)

    def connector(self) -> ClickHouseSnapshotConnector:
        path, _ = native_chdb.engine()
        return ClickHouseSnapshotConnector(self._client, inprocess_transport(path))

    def run(self, checkpoint: Callable[[str], None] | None = None, chunk_rows: int = 1000) -> tuple[RouteResult, int]:
        options = {**self.options, "execution": {"chunk_rows": chunk_rows}}
        connector = self.connector()
        route = NativeTransferRoute(
            SourceRequest(
                operation_id=OPERATION,
                route_fingerprint="e" * 64,
                relation=self.relation,
                window=self.window,
                options=NativeTransferOptions.model_validate(options),
                block_rows=4096,
            ),
            connector=connector,
            journal_store=ObjectJournalStore(f"file://{self.root}", OPERATION),
            stage=ObjectStageStore(f"file://{self.root}", OPERATION),
            target_factory=lambda: self.target,
            clock=self.clock,
            alerts=self.alerts.append,
            **({} if checkpoint is None else {"checkpoint": checkpoint}),
        )
        return route.run(), connector.connections


def normalize(value: object) -> object:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, dt.datetime):
        return (value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC)).isoformat()
    return value


def multiset(rows: Any) -> collections.Counter[tuple[object, ...]]:
    return collections.Counter(tuple(normalize(v) for v in row) for row in rows)


def read_rows(client: Client, sql: str) -> collections.Counter[tuple[object, ...]]:
    return multiset(client.query(sql, query_formats={"String": "bytes"}).result_rows)
