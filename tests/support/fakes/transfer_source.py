"""In-memory snapshot source for deterministic fault simulation of the native transfer route.

It models what the route relies on from ClickHouse: one part per insert, immutable parts, a query that acquires the
part set at its start (later merges/inserts do not change it), ``_part``/``_part_offset`` provenance, lightweight
delete masks, effective settings under a query-level overlay, and row policies. The same source-port contract suite
runs against it and against the real engine (tests/transfer/source/test_native_source_port.py), so it cannot drift.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.typed_digest import MODULUS, row_hash
from airflow_provider_dpone.transfer.ports import SourceBlock
from airflow_provider_dpone.transfer.values.arrow_chunk import row_hashes, rows_table
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.query import SnapshotQuery, verify_query
from airflow_provider_dpone.transfer.values.raw_snapshot_physical import PartCoverage, offset_hash
from airflow_provider_dpone.transfer.values.source_observation import (
    AccessObservation,
    ColumnObservation,
    MutationObservation,
    PartObservation,
    PhysicalObservation,
    RelationObservation,
    ReplicaObservation,
    RowPolicyObservation,
    SelectedRows,
    ServerObservation,
    SettingsObservation,
    TransportObservation,
)

BASE_SETTINGS: dict[str, str] = {
    "final": "0",
    "use_query_cache": "0",
    "apply_mutations_on_fly": "0",
    "apply_patch_parts": "1",
    "apply_deleted_mask": "1",
    "max_parallel_replicas": "1000",
    "skip_unavailable_shards": "0",
    "limit": "0",
    "offset": "0",
    "extremes": "0",
    "sort_overflow_mode": "throw",
    "read_overflow_mode": "throw",
    "result_overflow_mode": "throw",
    "timeout_overflow_mode": "throw",
    "max_execution_time": "0",
    "additional_table_filters": "{}",
    "additional_result_filter": "",
}


@dataclass
class FakePart:
    name: str
    partition_id: str
    rows: list[tuple[object, ...]]
    level: int = 0
    data_version: int = 0
    min_block: int = 0
    max_block: int = 0
    deleted: set[int] = field(default_factory=set)

    @property
    def checksum(self) -> str:
        digest = hashlib.md5(usedforsecurity=False)
        digest.update(repr((self.name, self.rows, sorted(self.deleted))).encode())
        return digest.hexdigest()


@dataclass
class FakeTable:
    """One relation: ``columns`` are ``(name, type)``; ``partition`` maps a row to its partition id."""

    columns: list[tuple[str, str]]
    engine: str = "ReplacingMergeTree"
    engine_args: str = ""
    partition_key: str = ""
    partition: Callable[[tuple[object, ...]], str] = lambda row: "all"
    sorting_key: str = ""
    database_engine: str = "Atomic"
    uuid: str = field(default_factory=lambda: str(uuid.uuid4()))
    defaults: dict[str, str] = field(default_factory=dict)
    parts: list[FakePart] = field(default_factory=list)
    policies: list[RowPolicyObservation] = field(default_factory=list)
    pending_mutations: int = 0
    replica: ReplicaObservation = field(default_factory=lambda: ReplicaObservation(present=False))
    block = 0

    @property
    def engine_full(self) -> str:
        args = f"({self.engine_args})" if self.engine_args or self.engine != "MergeTree" else ""
        partition = f" PARTITION BY {self.partition_key}" if self.partition_key else ""
        order = self.sorting_key or "tuple()"
        return f"{self.engine}{args}{partition} ORDER BY {order} SETTINGS index_granularity = 8192"

    @property
    def replacing(self) -> bool:
        return "Replacing" in self.engine

    def _replace(self, rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
        """ReplacingMergeTree's merge rule: per sorting key keep the highest version (the last one on a tie)."""
        names = [name for name, _ in self.columns]
        keys = [names.index(part.strip()) for part in self.sorting_key.split(",") if part.strip() in names]
        arguments = [argument.strip() for argument in self.engine_args.split(",") if argument.strip()]
        version = names.index(arguments[0]) if arguments else None
        kept: dict[tuple[object, ...], tuple[object, ...]] = {}
        for row in rows:
            key = tuple(row[i] for i in keys)
            current = kept.get(key)
            if current is None or version is None or row[version] >= current[version]:  # type: ignore[operator]
                kept[key] = row
        return list(kept.values())

    def insert(self, rows: Sequence[tuple[object, ...]]) -> None:
        """One insert = one new part per partition; a Replacing engine collapses the block (optimize_on_insert)."""
        by_partition: dict[str, list[tuple[object, ...]]] = {}
        for row in rows:
            by_partition.setdefault(self.partition(row), []).append(tuple(row))
        level = 1 if self.replacing else 0
        for partition_id, part_rows in sorted(by_partition.items()):
            self.block += 1
            name = f"{partition_id}_{self.block}_{self.block}_{level}"
            stored = self._replace(part_rows) if self.replacing else part_rows
            self.parts.append(
                FakePart(name, partition_id, stored, level=level, min_block=self.block, max_block=self.block)
            )

    def merge(self) -> None:
        """OPTIMIZE FINAL: merge each partition's parts into one, applying the Replacing rule."""
        merged: list[FakePart] = []
        for partition_id in sorted({part.partition_id for part in self.parts}):
            members = [part for part in self.parts if part.partition_id == partition_id]
            rows = [row for part in members for i, row in enumerate(part.rows) if i not in part.deleted]
            rows = self._replace(rows) if self.replacing else rows
            low, high = min(p.min_block for p in members), max(p.max_block for p in members)
            level = max(p.level for p in members) + 1
            merged.append(FakePart(f"{partition_id}_{low}_{high}_{level}", partition_id, rows, level, 0, low, high))
        self.parts = merged

    def delete_where(self, predicate: Callable[[tuple[object, ...]], bool]) -> None:
        """A lightweight delete: mask rows, new part versions (data_version bump)."""
        self.block += 1
        for part in self.parts:
            hits = {i for i, row in enumerate(part.rows) if predicate(row)}
            if hits - part.deleted:
                part.deleted |= hits
                part.data_version = self.block
                part.name = f"{part.partition_id}_{part.min_block}_{part.max_block}_{part.level}_{self.block}"


@dataclass
class FakeServerState:
    user: str = "default"
    roles: tuple[str, ...] = ()
    policies_inspectable: bool = True
    settings: dict[str, str] = field(default_factory=lambda: dict(BASE_SETTINGS))
    constrained: set[str] = field(default_factory=set)
    timezone: str = "UTC"
    session_timezone: str = ""
    revision: int = 54515
    host_identity: str = "fake"
    server_uuid: str = "00000000-0000-0000-0000-000000000000"
    macros: tuple[tuple[str, str], ...] = (("replica", "r1"), ("shard", "1"))
    transport: TransportObservation = field(
        default_factory=lambda: TransportObservation(
            scheme="inprocess",
            tls_verified=False,
            requires_tls=False,
            bounded_timeouts=True,
            pinned=True,
            endpoint_authority="fake",
        )
    )


class FakeSnapshotSource:
    """The connector: counts ``connect`` calls; ``deny`` makes any connection attempt fail loudly."""

    def __init__(self, tables: dict[tuple[str, str], FakeTable], server: FakeServerState | None = None) -> None:
        self.tables = tables
        self.server = server or FakeServerState()
        self.connections = 0
        self.deny = False
        self.on_block: Callable[[int], None] | None = None

    def connect(self) -> FakeSession:
        self.connections += 1
        if self.deny:
            raise AssertionError("the source was opened after EOF")
        return FakeSession(self)


def _window_index(table: FakeTable, query: SnapshotQuery) -> int | None:
    if query.window is None:
        return None
    return [name for name, _ in table.columns].index(query.window.column)


def _naive(value: object) -> dt.datetime:
    assert isinstance(value, dt.datetime)
    return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value


class FakeSession:
    def __init__(self, source: FakeSnapshotSource) -> None:
        self._source = source
        self.closed = False

    def _table(self, relation: RelationRef) -> FakeTable | None:
        return self._source.tables.get((relation.database, relation.table))

    def transport(self) -> TransportObservation:
        return self._source.server.transport

    def server(self) -> ServerObservation:
        server = self._source.server
        return ServerObservation(
            version="26.9.2.1",
            revision=server.revision,
            timezone=server.timezone,
            session_timezone=server.session_timezone,
            server_uuid=server.server_uuid,
            host_identity=server.host_identity,
            macros=server.macros,
        )

    def relation(self, relation: RelationRef) -> RelationObservation:
        table = self._table(relation)
        if table is None:
            return RelationObservation(exists=False)
        partition_columns = {name for name, _ in table.columns if f"({name})" in table.partition_key}
        sorting = {part.strip() for part in table.sorting_key.split(",")}
        columns = tuple(
            ColumnObservation(
                name=name,
                type=type_,
                default_kind=table.defaults.get(name, ""),
                default_expression="0" if name in table.defaults else "",
                in_partition_key=name in partition_columns,
                in_sorting_key=name in sorting,
                in_primary_key=name in sorting,
            )
            for name, type_ in table.columns
        )
        return RelationObservation(
            exists=True,
            database_engine=table.database_engine,
            engine=table.engine,
            engine_full=table.engine_full,
            uuid=table.uuid,
            partition_key=table.partition_key,
            sorting_key=table.sorting_key,
            primary_key=table.sorting_key,
            columns=columns,
        )

    def access(self, relation: RelationRef) -> AccessObservation:
        server = self._source.server
        table = self._table(relation)
        return AccessObservation(
            user=server.user,
            current_roles=server.roles,
            enabled_roles=server.roles,
            policies_inspectable=server.policies_inspectable,
            row_policies=tuple(table.policies) if table and server.policies_inspectable else (),
        )

    def settings(self, overlay: Mapping[str, str], names: Sequence[str]) -> SettingsObservation:
        server = self._source.server
        effective = dict(server.settings)
        for name, value in overlay.items():
            if name not in effective:
                raise DponeError(
                    "native_transfer.source_read_profile_unsupported", "server refused the frozen settings"
                )
            if name not in server.constrained:
                effective[name] = value
        return SettingsObservation(values={name: effective[name] for name in names if name in effective})

    def replica(self, relation: RelationRef) -> ReplicaObservation:
        table = self._table(relation)
        return table.replica if table else ReplicaObservation(present=False)

    def mutations(self, relation: RelationRef) -> MutationObservation:
        table = self._table(relation)
        return MutationObservation(pending_classic_mutations=table.pending_mutations if table else 0)

    def physical(self, relation: RelationRef, partition_ids: Sequence[str] | None, cap: int) -> PhysicalObservation:
        table = self._table(relation)
        assert table is not None
        parts = sorted(
            (p for p in table.parts if partition_ids is None or p.partition_id in partition_ids), key=lambda p: p.name
        )
        observed = tuple(
            PartObservation(
                name=p.name,
                partition_id=p.partition_id,
                rows=len(p.rows),
                level=p.level,
                data_version=p.data_version,
                min_block=p.min_block,
                max_block=p.max_block,
                checksum=p.checksum,
                has_lightweight_delete=bool(p.deleted),
            )
            for p in parts[:cap]
        )
        return PhysicalObservation(parts=observed, truncated=len(parts) > cap)

    @staticmethod
    def _selected(
        table: FakeTable, query: SnapshotQuery, acquired: list[tuple[str, list[tuple[object, ...]], set[int]]]
    ) -> Iterator[tuple[tuple[object, ...], str, int]]:
        """The rows the SELECT selects from the acquired parts, with their part and offset (what the server reads)."""
        window_index = _window_index(table, query)
        window = query.window
        for name, rows, deleted in acquired:
            for offset, row in enumerate(rows):
                if offset in deleted:
                    continue
                if window is not None and window_index is not None:
                    value = _naive(row[window_index])
                    start, end = _naive(window.start), _naive(window.end)
                    if not start <= value < end:
                        continue
                yield row, name, offset

    @staticmethod
    def _acquire(table: FakeTable) -> list[tuple[str, list[tuple[object, ...]], set[int]]]:
        return [(part.name, list(part.rows), set(part.deleted)) for part in sorted(table.parts, key=lambda p: p.name)]

    @contextmanager
    def stream(self, query: SnapshotQuery) -> Iterator[Iterator[SourceBlock]]:
        verify_query(query)
        table = self._table(query.relation)
        assert table is not None
        acquired = self._acquire(table)
        names = [name for name, _ in table.columns]
        indexes = [names.index(column.name) for column in query.projection]

        def blocks() -> Iterator[SourceBlock]:
            buffer: list[tuple[tuple[object, ...], str, int]] = []
            emitted = 0
            for entry in self._selected(table, query, acquired):
                buffer.append(entry)
                if len(buffer) == query.block_rows:
                    yield self._block(buffer, indexes, query)
                    emitted += 1
                    if self._source.on_block is not None:
                        self._source.on_block(emitted)
                    buffer = []
            if buffer:
                yield self._block(buffer, indexes, query)

        yield blocks()

    def selected_rows(self, query: SnapshotQuery) -> SelectedRows:
        """The server's aggregate over the table as it is now (never over what a stream handed out)."""
        verify_query(query)
        table = self._table(query.relation)
        assert table is not None
        selected = list(self._selected(table, query, self._acquire(table)))
        names = [name for name, _ in table.columns]
        projection = [names.index(column.name) for column in query.projection]
        typed = [column.typed for column in query.projection]
        typed_sum = sum(row_hash(typed, [row[i] for i in projection]) for row, _part, _offset in selected) % MODULUS
        if not query.provenance:
            return SelectedRows(rows=len(selected), typed_sum=typed_sum)
        by_part: dict[str, list[int]] = {}
        for _row, part, offset in selected:
            by_part.setdefault(part, []).append(offset)
        parts = tuple(
            PartCoverage(
                part=part,
                rows=len(offsets),
                min_offset=min(offsets),
                max_offset=max(offsets),
                offsets_hash_sum=sum(offset_hash(o) for o in offsets) & ((1 << 64) - 1),
            )
            for part, offsets in sorted(by_part.items())
        )
        return SelectedRows(rows=len(selected), parts=parts, typed_sum=typed_sum)

    @staticmethod
    def _block(
        buffer: list[tuple[tuple[object, ...], str, int]], indexes: list[int], query: SnapshotQuery
    ) -> SourceBlock:
        """The block as the real source hands it over: Arrow columns and each row's typed hash."""
        rows = [tuple(entry[0][i] for i in indexes) for entry in buffer]
        columns, hashes = rows_table(rows, query.projection), row_hashes(rows, query.projection)
        if not query.provenance:
            return SourceBlock(columns=columns, row_hashes=hashes, rows=len(buffer))
        return SourceBlock(
            columns=columns,
            row_hashes=hashes,
            rows=len(buffer),
            parts=[e[1] for e in buffer],
            offsets=[e[2] for e in buffer],
        )

    def close(self) -> None:
        self.closed = True


class ManualClock:
    """A clock tests advance explicitly (lease expiry without sleeping)."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        self.current = start or dt.datetime(2026, 9, 30, 12, 0, tzinfo=dt.UTC)

    def now(self) -> dt.datetime:
        return self.current

    def advance(self, delta: dt.timedelta) -> None:
        self.current += delta
