"""What ClickHouse Keeper holds for replicated tables, kept in the cluster's durable SQLite state.

A *path* (a table's expanded ``zookeeper_path``) has replicas, a log and deduplication block ids, as in Keeper:

- a replica is one local table on one process, keyed by the table's UUID there (so ``EXCHANGE``/``RENAME``, which
  move UUIDs between names, never touch it); its ``log_pointer`` is the next log index it copies into its queue and
  ``applied`` the next one it executes, in order;
- the log holds one entry per inserted block, numbered from 0: the block's bytes are spooled once to a file under
  the cluster directory, and every other replica inserts the same bytes into its own table;
- a writer first *claims* its block (the deduplication check against the last ``replicated_deduplication_window``
  block ids happens here, atomically), inserts locally, then *commits* the entry; a claim left by a crashed
  writer is finished or released when that process starts again (``replicas.py``).

Dropping the last replica of a path removes the path: its log, claims and spool files.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from dpone_embedded.store import Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS replicas (
    path TEXT NOT NULL,
    replica_name TEXT NOT NULL,
    member TEXT NOT NULL,
    uuid TEXT NOT NULL,
    engine TEXT NOT NULL,
    path_template TEXT NOT NULL,
    replica_template TEXT NOT NULL,
    local_setting TEXT NOT NULL,
    dedup_window INTEGER NOT NULL,
    dedup_window_seconds INTEGER NOT NULL,
    log_pointer INTEGER NOT NULL DEFAULT 0,
    applied INTEGER NOT NULL DEFAULT 0,
    last_queue_update REAL NOT NULL,
    last_exception TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (path, replica_name)
);
CREATE UNIQUE INDEX IF NOT EXISTS replicas_of_member ON replicas (member, uuid);
CREATE TABLE IF NOT EXISTS replication_log (
    path TEXT NOT NULL,
    idx INTEGER NOT NULL,
    source_replica TEXT NOT NULL,
    source_uuid TEXT NOT NULL,
    create_time REAL NOT NULL,
    block TEXT NOT NULL,
    block_id TEXT NOT NULL,
    PRIMARY KEY (path, idx)
);
CREATE INDEX IF NOT EXISTS replication_blocks ON replication_log (path, block_id);
CREATE TABLE IF NOT EXISTS replication_claims (
    token TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    replica_name TEXT NOT NULL,
    member TEXT NOT NULL,
    uuid TEXT NOT NULL,
    pid INTEGER NOT NULL,
    create_time REAL NOT NULL,
    block TEXT NOT NULL,
    block_id TEXT NOT NULL
);
"""


class ReplicaExistsError(Exception):
    """``REPLICA_ALREADY_EXISTS``: the path already has a replica with this name."""

    def __init__(self, replica_path: str) -> None:
        super().__init__(replica_path)
        self.replica_path = replica_path


@dataclass(frozen=True)
class Replica:
    """One replica: where it is (process, table UUID), what it replicates, and how far it is in the log."""

    path: str
    replica_name: str
    member: str
    uuid: str
    engine: str
    path_template: str
    replica_template: str
    local_setting: str
    """The deduplication setting the emulation gave the local table (hidden again in ``system.tables``)."""
    dedup_window: int
    dedup_window_seconds: int
    log_pointer: int = 0
    applied: int = 0
    last_queue_update: float = field(default_factory=time.time)
    last_exception: str = ""

    @property
    def replica_path(self) -> str:
        return f"{self.path}/replicas/{self.replica_name}"


_REPLICA_COLUMNS = ", ".join(column.name for column in fields(Replica))
"""The ``replicas`` columns, in the order of :class:`Replica`'s fields."""


@dataclass(frozen=True)
class Block:
    """One inserted block as the log carries it: its id, its bytes on disk and how to insert them again.

    ``block_id`` is empty when the insert was not deduplicated; ``token`` is the local
    ``insert_deduplication_token`` every replica inserts it with, so applying an entry twice inserts it once.
    """

    block_id: str
    token: str
    spool: str
    fmt: str
    columns: str
    settings: dict[str, str]

    def encode(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)

    @classmethod
    def decode(cls, text: str) -> Block:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class Entry:
    """A log entry: the block, and the replica that wrote it (its name and table UUID: a replica dropped and
    created again under the same name is another replica, which must receive the old one's blocks)."""

    path: str
    idx: int
    source_replica: str
    source_uuid: str
    create_time: float
    block: Block

    def written_by(self, replica: Replica) -> bool:
        return (self.source_replica, self.source_uuid) == (replica.replica_name, replica.uuid)

    @property
    def part_name(self) -> str:
        """The part a ``GET_PART`` entry of this index would name (``system.replicas.oldest_part_to_get``)."""
        return f"all_{self.idx}_{self.idx}_0"


@dataclass(frozen=True)
class Claim:
    path: str
    replica_name: str
    member: str
    uuid: str
    pid: int
    create_time: float
    block: Block


@dataclass(frozen=True)
class ReplicaState:
    """What ``system.replicas`` shows for one replica, read in one consistent snapshot."""

    replica: Replica
    log_max_index: int
    queue_size: int
    queue_oldest: Entry | None
    peers: dict[str, str]  # replica name -> process name


class ReplicationLog:
    """Replicas, logs, claims and spool files of every path of the cluster."""

    def __init__(self, store: Store, spool_root: Path) -> None:
        self._store = store
        self._spool_root = Path(spool_root)

    def initialize(self) -> None:
        with self._store.connect() as db:
            db.executescript(SCHEMA)

    def spool_file(self, path: str, token: str, fmt: str) -> Path:
        """Where a block of ``path`` is spooled (one directory per path, one file per block)."""
        directory = self._spool_root / hashlib.sha256(path.encode()).hexdigest()[:20]
        directory.mkdir(parents=True, exist_ok=True)
        return directory / f"{token}.{fmt.lower()}"

    # -- replicas -------------------------------------------------------------------------------------------------

    def register(self, replica: Replica) -> bool:
        """Add a replica (its pointers start at the first log entry, so it replays the existing log); ``False`` when
        this very table is registered already (a DDL entry executed again after a crash)."""
        with self._store.transaction() as db:
            row = db.execute(
                "SELECT member, uuid FROM replicas WHERE path = ? AND replica_name = ?",
                (replica.path, replica.replica_name),
            ).fetchone()
            if row is not None:
                if tuple(row) == (replica.member, replica.uuid):
                    return False
                raise ReplicaExistsError(replica.replica_path)
            values = [getattr(replica, column.name) for column in fields(Replica)]
            db.execute(f"INSERT INTO replicas ({_REPLICA_COLUMNS}) VALUES ({', '.join('?' * len(values))})", values)
        return True

    def set_dedup_window(self, member: str, uuid: str, window: int, seconds: int) -> None:
        with self._store.transaction() as db:
            db.execute(
                "UPDATE replicas SET dedup_window = ?, dedup_window_seconds = ? WHERE member = ? AND uuid = ?",
                (window, seconds, member, uuid),
            )

    def unregister(self, member: str, uuids: Iterable[str]) -> None:
        """Remove replicas; the last replica of a path takes the path (log, claims, spool files) with it."""
        spools: list[str] = []
        with self._store.transaction() as db:
            for uuid in uuids:
                row = db.execute("SELECT path FROM replicas WHERE member = ? AND uuid = ?", (member, uuid)).fetchone()
                if row is None:
                    continue
                db.execute("DELETE FROM replicas WHERE member = ? AND uuid = ?", (member, uuid))
                if db.execute("SELECT 1 FROM replicas WHERE path = ? LIMIT 1", (row[0],)).fetchone() is None:
                    for table in ("replication_log", "replication_claims"):
                        blocks = db.execute(f"SELECT block FROM {table} WHERE path = ?", (row[0],)).fetchall()
                        spools += [Block.decode(block).spool for (block,) in blocks]
                        db.execute(f"DELETE FROM {table} WHERE path = ?", (row[0],))
        for spool in spools:
            Path(spool).unlink(missing_ok=True)

    def has_replicas(self, member: str) -> bool:
        with self._store.connect() as db:
            return db.execute("SELECT 1 FROM replicas WHERE member = ? LIMIT 1", (member,)).fetchone() is not None

    def replicas(self, member: str) -> list[tuple[Replica, int]]:
        """This process's replicas with the next index of their path's log (``log_max_index + 1``, 0 if empty)."""
        with self._store.connect() as db:
            rows = db.execute(
                f"SELECT {_REPLICA_COLUMNS}, (SELECT coalesce(max(idx) + 1, 0) FROM replication_log l"
                " WHERE l.path = r.path) FROM replicas r WHERE member = ? ORDER BY path, replica_name",
                (member,),
            ).fetchall()
        return [(Replica(*row[:-1]), int(row[-1])) for row in rows]

    def replica(self, member: str, uuid: str) -> Replica | None:
        with self._store.connect() as db:
            row = db.execute(
                f"SELECT {_REPLICA_COLUMNS} FROM replicas WHERE member = ? AND uuid = ?", (member, uuid)
            ).fetchone()
        return Replica(*row) if row else None

    # -- the log --------------------------------------------------------------------------------------------------

    def claim(self, claim: Claim, window: int, window_seconds: int) -> bool:
        """Reserve a block for insertion; ``False`` when it is a duplicate of a recent or in-flight block."""
        with self._store.transaction() as db:
            if _duplicate(db, claim.path, claim.block.block_id, window, window_seconds):
                return False
            db.execute(
                "INSERT INTO replication_claims (token, path, replica_name, member, uuid, pid, create_time, block,"
                " block_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    claim.block.token,
                    claim.path,
                    claim.replica_name,
                    claim.member,
                    claim.uuid,
                    claim.pid,
                    claim.create_time,
                    claim.block.encode(),
                    claim.block.block_id,
                ),
            )
        return True

    def commit(self, token: str) -> int | None:
        """Turn a claim into the path's next log entry; its index (``None`` if the claim is gone)."""
        with self._store.transaction() as db:
            row = db.execute(
                "SELECT path, replica_name, uuid, block, block_id FROM replication_claims WHERE token = ?", (token,)
            ).fetchone()
            if row is None:
                return None
            path, replica_name, uuid, block, block_id = row
            (idx,) = db.execute(
                "SELECT coalesce(max(idx) + 1, 0) FROM replication_log WHERE path = ?", (path,)
            ).fetchone()
            db.execute(
                "INSERT INTO replication_log (path, idx, source_replica, source_uuid, create_time, block, block_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (path, idx, replica_name, uuid, time.time(), block, block_id),
            )
            db.execute("DELETE FROM replication_claims WHERE token = ?", (token,))
        return int(idx)

    def release(self, token: str) -> None:
        """Give a claim up (the local insert failed): the block was never written."""
        with self._store.transaction() as db:
            row = db.execute("SELECT block FROM replication_claims WHERE token = ?", (token,)).fetchone()
            db.execute("DELETE FROM replication_claims WHERE token = ?", (token,))
        if row is not None:
            Path(Block.decode(row[0]).spool).unlink(missing_ok=True)

    def orphan_claims(self, member: str) -> list[Claim]:
        """Claims this process left when it died (another pid): finished or released by the restarted process."""
        with self._store.connect() as db:
            rows = db.execute(
                "SELECT path, replica_name, member, uuid, pid, create_time, block FROM replication_claims"
                " WHERE member = ? AND pid != ? ORDER BY create_time",
                (member, os.getpid()),
            ).fetchall()
        return [Claim(row[0], row[1], row[2], row[3], int(row[4]), float(row[5]), Block.decode(row[6])) for row in rows]

    def pull(self, member: str, uuid: str | None = None) -> None:
        """Copy new log entries into the replicas' queues (``log_pointer`` moves to ``log_max_index + 1``)."""
        clause, args = ("", (member,)) if uuid is None else (" AND uuid = ?", (member, uuid))
        newest = "(SELECT coalesce(max(idx) + 1, 0) FROM replication_log l WHERE l.path = replicas.path)"
        with self._store.transaction() as db:
            db.execute(
                f"UPDATE replicas SET log_pointer = {newest}, last_queue_update = ?"
                f" WHERE member = ?{clause} AND log_pointer < {newest}",
                (time.time(), *args),
            )

    def entry(self, path: str, idx: int) -> Entry | None:
        with self._store.connect() as db:
            row = db.execute(
                f"SELECT {_ENTRY_COLUMNS} FROM replication_log WHERE path = ? AND idx = ?",
                (path, idx),
            ).fetchone()
        return _entry(row) if row else None

    def advance(self, replica: Replica, idx: int) -> None:
        """Entry ``idx`` is executed: the replica's next one is ``idx + 1``."""
        with self._store.transaction() as db:
            db.execute(
                "UPDATE replicas SET applied = ?, last_exception = '' WHERE member = ? AND uuid = ? AND applied = ?",
                (idx + 1, replica.member, replica.uuid, idx),
            )

    def failed(self, replica: Replica, text: str) -> None:
        with self._store.transaction() as db:
            db.execute(
                "UPDATE replicas SET last_exception = ? WHERE member = ? AND uuid = ?",
                (text, replica.member, replica.uuid),
            )

    def holders(self, entry: Entry) -> set[str]:
        """Processes whose replica of the path has the entry's block: its writer, and those that executed it."""
        with self._store.connect() as db:
            rows = db.execute(
                "SELECT member FROM replicas WHERE path = ? AND ((replica_name = ? AND uuid = ?) OR applied > ?)",
                (entry.path, entry.source_replica, entry.source_uuid, entry.idx),
            ).fetchall()
        return {member for (member,) in rows}

    def waiting(self, replica: Replica, below: int, sources: tuple[str, ...] = ()) -> int:
        """Entries of the replica's queue below index ``below`` not executed yet (from ``sources`` if given)."""
        query = (
            f"SELECT count(*) FROM replication_log WHERE path = ? AND idx >= ? AND idx < ? AND idx < ? AND {_FOREIGN}"
        )
        args: tuple[Any, ...] = (
            replica.path,
            replica.applied,
            below,
            replica.log_pointer,
            replica.replica_name,
            replica.uuid,
        )
        if sources:
            query += f" AND source_replica IN ({', '.join('?' * len(sources))})"
            args += sources
        with self._store.connect() as db:
            (count,) = db.execute(query, args).fetchone()
        return int(count)

    def state(self, member: str) -> list[ReplicaState]:
        """Every replica of this process with its log, queue and peers (one snapshot)."""
        states = []
        with self._store.connect() as db:
            db.execute("BEGIN")
            rows = db.execute(
                f"SELECT {_REPLICA_COLUMNS} FROM replicas WHERE member = ? ORDER BY path", (member,)
            ).fetchall()
            for row in rows:
                replica = Replica(*row)
                (max_index,) = db.execute(
                    "SELECT coalesce(max(idx), 0) FROM replication_log WHERE path = ?", (replica.path,)
                ).fetchone()
                queued = db.execute(
                    f"SELECT {_ENTRY_COLUMNS} FROM replication_log WHERE path = ? AND idx >= ? AND idx < ?"
                    f" AND {_FOREIGN} ORDER BY idx",
                    (replica.path, replica.applied, replica.log_pointer, replica.replica_name, replica.uuid),
                ).fetchall()
                peers = db.execute("SELECT replica_name, member FROM replicas WHERE path = ?", (replica.path,))
                oldest = _entry(queued[0]) if queued else None
                states.append(ReplicaState(replica, int(max_index), len(queued), oldest, dict(peers.fetchall())))
            db.execute("COMMIT")
        return states


_ENTRY_COLUMNS = "path, idx, source_replica, source_uuid, create_time, block"
_FOREIGN = "NOT (source_replica = ? AND source_uuid = ?)"
"""Entries another replica wrote (what a replica's queue holds)."""


def _entry(row: Any) -> Entry:
    return Entry(str(row[0]), int(row[1]), str(row[2]), str(row[3]), float(row[4]), Block.decode(row[5]))


def _duplicate(db: sqlite3.Connection, path: str, block_id: str, window: int, window_seconds: int) -> bool:
    """Whether ``block_id`` is in flight, or among the path's last ``window`` block ids (whose time is within
    ``window_seconds`` of the newest one, as ClickHouse's cleanup keeps them)."""
    if not block_id or window <= 0:
        return False
    if db.execute(
        "SELECT 1 FROM replication_claims WHERE path = ? AND block_id = ? LIMIT 1", (path, block_id)
    ).fetchone():
        return True
    newest = db.execute(
        "SELECT max(create_time) FROM replication_log WHERE path = ? AND block_id != ''", (path,)
    ).fetchone()[0]
    if newest is None:
        return False
    found = db.execute(
        "SELECT 1 FROM (SELECT block_id, create_time FROM replication_log WHERE path = ? AND block_id != ''"
        " ORDER BY idx DESC LIMIT ?) WHERE block_id = ? AND create_time >= ? LIMIT 1",
        (path, window, block_id, newest - window_seconds),
    ).fetchone()
    return found is not None
