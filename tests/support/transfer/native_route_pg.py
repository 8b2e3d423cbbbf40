"""The native transfer route end to end: ClickHouse (in-process engine) -> durable file:// stage -> real PostgreSQL.

Everything on the data path is real: the ClickHouse engine and clickhouse-connect, the route, the stage and journal
on ``ObjectStoragePath``, the bridge, the PostgreSQL adapter and server. Faults are injected only where a real
failure cannot be produced deterministically: process deaths at named route checkpoints (:class:`Crash`) and the
PostgreSQL COMMIT outcome (the target harness's connection proxy).
"""

from __future__ import annotations

import collections
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from airflow_provider_dpone.core.identifiers import quote_postgres
from airflow_provider_dpone.core.manifest.transfer import StringMapping
from airflow_provider_dpone.core.manifest.transfer_options import NativeTransferOptions
from airflow_provider_dpone.transfer.route.admission import SourceRequest
from airflow_provider_dpone.transfer.route.route import NativeTransferRoute, RouteResult
from airflow_provider_dpone.transfer.route.target_custody import TargetCustody, transfer_target_key
from airflow_provider_dpone.transfer.source.session import ClickHouseSnapshotConnector, inprocess_transport
from airflow_provider_dpone.transfer.storage import ObjectJournalStore, ObjectStageStore
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.row_digest import RowDigest
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow
from tests.support.fakes.transfer_source import ManualClock
from tests.support.fixtures.target_harness import PostgresHarness
from tests.support.transfer import native_chdb
from tests.support.transfer.native_route_chdb import RAW, RecordingClient, multiset

LEASE = dt.timedelta(minutes=10)
EVENTS = (
    "(id UInt64, ver UInt64, is_deleted UInt8, payload Nullable(String), ts DateTime64(3, 'UTC'), "
    "amount Nullable(Decimal(18, 4)))"
)
EVENT_BATCHES = (
    "(1, 1, 0, 'a', '2026-01-01 00:00:00.001', 1.5), (2, 1, 0, NULL, '2026-01-02 00:00:00', 0)",
    "(1, 2, 0, 'b', '2026-01-03 00:00:00', 2), (3, 1, 0, '', '2026-01-04 00:00:00', NULL)",
    "(1, 2, 0, 'b', '2026-01-03 00:00:00', 2), (4, 1, 0, '0', '2026-02-05 00:00:00', -0.0001)",
    "(2, 2, 1, NULL, '2026-02-06 00:00:00', 0)",
)


def events_table(admin: Any, db: str) -> RelationRef:
    """A ReplacingMergeTree with duplicate keys, identical duplicates, versions and a delete marker (4 inserts)."""
    admin.command(
        f"CREATE TABLE {db}.events {EVENTS} ENGINE = ReplacingMergeTree(ver, is_deleted) "
        "PARTITION BY toYYYYMM(ts) ORDER BY id"
    )
    for batch in EVENT_BATCHES:
        admin.command(f"INSERT INTO {db}.events VALUES {batch}")
    return RelationRef(database=db, table="events")


class Crash(BaseException):
    """A process death at a route checkpoint: no cleanup handler of the route runs."""


def crash_at(name: str, occurrence: int = 1, before: Callable[[], None] | None = None) -> Callable[[str], None]:
    seen = {"count": 0}

    def checkpoint(point: str) -> None:
        if point == name:
            seen["count"] += 1
            if seen["count"] == occurrence:
                if before is not None:
                    before()
                raise Crash(point)

    return checkpoint


@dataclass
class PgRoute:
    """One operation (``operation``) of the route into ``harness``'s schema; each ``run`` is one try."""

    root: Path
    relation: RelationRef
    harness: PostgresHarness
    table: str = "events_copy"
    operation: str = "fedcba9876543210fedcba9876543210"
    options: dict[str, Any] = field(default_factory=lambda: dict(RAW))
    window: UtcWindow | None = None
    row_digest: RowDigest | None = None  # None: the method the target plans first (the hook's choice)
    clock: ManualClock = field(default_factory=ManualClock)
    streams: list[str] = field(default_factory=list)
    deny_source: bool = False
    last_connections: int = 0
    source: ClickHouseSnapshotConnector | None = None
    """Another source than the in-process engine (e.g. an HTTP connector); its clients are recorded and denied too."""
    string_mapping: StringMapping = StringMapping.BINARY

    def _open(self, build: Callable[[], Any]) -> Any:
        if self.deny_source:
            raise AssertionError("the source was opened after EOF")
        return RecordingClient(build(), self.streams)

    def journal(self, operation: str | None = None) -> ObjectJournalStore:
        return ObjectJournalStore(f"file://{self.root}", operation or self.operation)

    def route(self, checkpoint: Callable[[str], None] | None = None, chunk_rows: int = 2) -> NativeTransferRoute:
        if self.source is not None:
            self.connector = self.source.decorated(self._open)
        else:
            path, _ = native_chdb.engine()
            self.connector = ClickHouseSnapshotConnector(
                lambda: self._open(native_chdb.client), inprocess_transport(path)
            )
        options = {**self.options, "execution": {"chunk_rows": chunk_rows}}
        target = self.harness.bind(self.table, self.string_mapping)
        custody = TargetCustody(
            ObjectJournalStore(
                f"file://{self.root}/targets", transfer_target_key("postgres", "pg", self.harness.schema, self.table)
            ),
            self.operation,
            self.clock,
            LEASE,
            self.journal,
        )
        return NativeTransferRoute(
            SourceRequest(
                operation_id=self.operation,
                route_fingerprint="e" * 64,
                relation=self.relation,
                window=self.window,
                options=NativeTransferOptions.model_validate(options),
                block_rows=3,
                row_digest=target.row_digests[0] if self.row_digest is None else self.row_digest,
            ),
            connector=self.connector,
            journal_store=self.journal(),
            stage=ObjectStageStore(f"file://{self.root}", self.operation),
            target_factory=lambda: target,
            clock=self.clock,
            lease_duration=LEASE,
            target_custody=custody,
            **({} if checkpoint is None else {"checkpoint": checkpoint}),
        )

    def run(self, checkpoint: Callable[[str], None] | None = None, chunk_rows: int = 2) -> RouteResult:
        route = self.route(checkpoint, chunk_rows)
        try:
            return route.run()
        finally:
            self.last_connections = self.connector.connections

    def expire_leases(self) -> None:
        self.clock.advance(LEASE * 2)

    def target_rows(self) -> collections.Counter[tuple[object, ...]]:
        with psycopg.connect(self.harness.dsn, autocommit=True) as conn:
            found = conn.execute(
                f"SELECT * FROM {quote_postgres(self.harness.schema)}.{quote_postgres(self.table)}"
            ).fetchall()
        return multiset(found)

    def tamper_staging(self) -> None:
        """Change the first staged row's first column by SQL, in every staging table of the harness's schema."""
        schema = quote_postgres(self.harness.schema)
        with psycopg.connect(self.harness.dsn, autocommit=True) as conn:
            names = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename LIKE '__dpone_stg%%'",
                (self.harness.schema,),
            ).fetchall()
            assert names, "no staging table to tamper with"
            for (name,) in names:
                staging = f"{schema}.{quote_postgres(name)}"
                first = conn.execute(f"SELECT * FROM {staging} LIMIT 0").description[2].name  # after chunk, row
                conn.execute(
                    f"UPDATE {staging} SET {quote_postgres(first)} = {quote_postgres(first)} + 1000 "
                    "WHERE __dpone_chunk = 0 AND __dpone_row = 0"
                )

    def rewrite_target_inserts(self, *, change: bool = True) -> None:
        """A row trigger on the target: before each INSERT, it adds 1000 to the row's ``ver`` (``change=False``: it
        sets ``ver`` to itself, changing nothing)."""
        target = f"{quote_postgres(self.harness.schema)}.{quote_postgres(self.table)}"
        function = f"{quote_postgres(self.harness.schema)}.bump_ver"
        new = "NEW.ver + 1000" if change else "NEW.ver"
        with psycopg.connect(self.harness.dsn, autocommit=True) as conn:
            conn.execute(
                f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN NEW.ver := {new}; RETURN NEW; END $$"
            )
            conn.execute(
                f"CREATE TRIGGER bump_ver BEFORE INSERT ON {target} FOR EACH ROW EXECUTE FUNCTION {function}()"
            )

    def receipts(self) -> int:
        with psycopg.connect(self.harness.dsn, autocommit=True) as conn:
            row = conn.execute(
                f"SELECT count(*) FROM {quote_postgres(self.harness.schema)}.__dpone_publication_receipts"
            ).fetchone()
        assert row is not None
        return int(row[0])

    def journal_kinds(self) -> list[str]:
        import json

        return [json.loads(raw)["kind"] for _, raw in self.journal().read_all()]
