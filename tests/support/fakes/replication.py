"""Replicated*MergeTree in the fake world: replicas sharing one Keeper log, asynchronous fetches, block dedup.

Semantics kept faithful to ClickHouse where the internal protocol depends on them:

* a ``Replicated*`` table created without engine arguments registers a replica under the default path
  ``/clickhouse/tables/{uuid}/{shard}`` with replica name ``{replica}``: created ON CLUSTER with one UUID, every
  replica of the shard joins one log; a replica name already registered under the path is refused (Code 253);
* an INSERT on one replica is split into blocks of ``world.insert_block_rows`` rows; each block's dedup id is
  ``<insert_deduplication_token>_<block index>``; a block whose id is in the log's window (the last
  ``world.dedup_window`` ids) is skipped, every other block becomes one log entry (a part) that lands on the inserting
  replica at once and reaches the other replicas only when they fetch;
* fetches happen under the simulator's control: ``FakeWorld.replicate(limit)`` (every replica fetches up to ``limit``
  entries), :func:`fetch` (one replica), or ``SYSTEM SYNC REPLICA`` (drains that replica); a replica whose member has ``fetch_paused`` never
  fetches (its sync times out), one with ``fetch_corrupt = n`` fetches its next ``n`` parts without their last row
  (a divergent replica; ``-1``: every part);
* DROP removes the replica from the log; the last replica's drop removes the path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_provider_dpone.cluster.ports import ReplicaStatus
from airflow_provider_dpone.cluster.values.clickhouse_engines import EngineClass, classify_engine
from tests.support.fakes import parts

if TYPE_CHECKING:
    from tests.support.fakes.world import FakeMember, FakeTable, FakeWorld, Row

REPLICA_ALREADY_EXISTS = 253


def is_replicated(engine: str) -> bool:
    return classify_engine(engine) is EngineClass.REPLICATED_MERGE_TREE


@dataclass
class ReplicatedLog:
    """The shared Keeper state of one replicated table: the parts log, the dedup window, the registered replicas."""

    path: str
    parts: list[tuple[Row, ...]] = field(default_factory=list)
    block_ids: list[str] = field(default_factory=list)
    replicas: dict[str, FakeReplica] = field(default_factory=dict)


@dataclass
class FakeReplica:
    """One member's replica of a replicated table: which log entries it already holds."""

    log: ReplicatedLog
    member: FakeMember
    name: str
    fetched: set[int] = field(default_factory=set)

    @property
    def pending(self) -> list[int]:
        return [index for index in range(len(self.log.parts)) if index not in self.fetched]

    @property
    def pointer(self) -> int:
        """``log_pointer``: the next log index this replica would read."""
        pointer = 0
        while pointer in self.fetched:
            pointer += 1
        return pointer


def register(world: FakeWorld, member: FakeMember, table: FakeTable) -> int:
    """Attach a freshly created replicated table to its log (default path); 0 or ClickHouse's error code."""
    path = f"/clickhouse/tables/{table.uuid}/{member.shard_num}"
    log = world.replicated_logs.setdefault(path, ReplicatedLog(path))
    if member.member_id in log.replicas:
        return REPLICA_ALREADY_EXISTS
    replica = FakeReplica(log, member, f"r{member.replica_num}")
    log.replicas[member.member_id] = replica
    table.replica = replica
    return 0


def seed(world: FakeWorld, tables: Sequence[FakeTable], rows: Sequence[Row]) -> None:
    """Pre-existing replicated content: one part every replica already holds (world setup, not an INSERT)."""
    for table in tables:
        assert table.replica is not None
        if not table.replica.log.parts and rows:
            table.replica.log.parts.append(tuple(rows))
        table.replica.fetched = set(range(len(table.replica.log.parts)))
        table.rows = list(rows)


def leave(world: FakeWorld, table: FakeTable) -> None:
    """A dropped replica leaves its log; the last one removes the Keeper path."""
    replica = table.replica
    if replica is None:
        return
    replica.log.replicas.pop(replica.member.member_id, None)
    if not replica.log.replicas:
        world.replicated_logs.pop(replica.log.path, None)


def blocks(world: FakeWorld, rows: Sequence[Row]) -> list[tuple[Row, ...]]:
    size = world.insert_block_rows
    return [tuple(rows[start : start + size]) for start in range(0, len(rows), size)]


def insert(world: FakeWorld, table: FakeTable, rows: Sequence[Row], token: str, *, upto: int | None = None) -> None:
    """An INSERT on this replica: blocks (the first ``upto`` only, for an interrupted insert), deduplicated by id."""
    replica = table.replica
    if replica is None:
        for start in range(0, len(rows), world.part_rows):  # plain MergeTree: non_replicated_deduplication_window = 0
            parts.append(table, rows[start : start + world.part_rows])
        return
    log = replica.log
    for index, block in enumerate(blocks(world, rows)[:upto]):
        block_id = f"{token}_{index}"
        if block_id in log.block_ids:
            continue
        log.block_ids = [*log.block_ids, block_id][-world.dedup_window :]
        log.parts.append(block)
        replica.fetched.add(len(log.parts) - 1)
        parts.append(table, block)


def fetch(table: FakeTable, limit: int | None = None) -> bool:
    """Let one replica fetch up to ``limit`` pending entries; True when it is caught up afterwards."""
    replica = table.replica
    assert replica is not None
    if replica.member.fetch_paused:
        return not replica.pending
    member = replica.member
    for index in replica.pending[:limit]:
        part = replica.log.parts[index]
        if member.fetch_corrupt and part:
            part = part[:-1]
            member.fetch_corrupt -= member.fetch_corrupt > 0
        parts.append(table, part)
        replica.fetched.add(index)
    return not replica.pending


def status(table: FakeTable, member: FakeMember) -> ReplicaStatus | None:
    replica = table.replica
    if replica is None:
        return None
    pending = len(replica.pending)
    return ReplicaStatus(
        zookeeper_path=replica.log.path,
        replica_name=replica.name,
        is_readonly=member.replica_readonly,
        queue_size=pending,
        inserts_in_queue=pending,
        log_max_index=max(len(replica.log.parts) - 1, 0),
        log_pointer=replica.pointer,
        total_replicas=len(replica.log.replicas),
        active_replicas=sum(not r.member.replica_readonly for r in replica.log.replicas.values()),
    )
