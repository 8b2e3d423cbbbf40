"""Durable shared state of one embedded cluster: the distributed-DDL queue, armed faults, worker heartbeats.

The replication log lives in the same file (its tables and rules are in ``replication.py``).

Every process of the cluster (coordinator, members, the test process, the CLI) opens the same SQLite file in the
cluster directory. SQLite gives the queue what ClickHouse Keeper gives a real DDL queue here: one sequence of entries,
atomic status transitions seen by every process, and durability across any process being killed and restarted.
Every committed write that changed a row rings the cluster's :class:`~dpone_embedded.bell.Bell` (a heartbeat
excepted: nothing waits for one), so the workers sleep until there is something to do instead of polling.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpone_embedded.bell import Bell

INACTIVE = "Inactive"
ACTIVE = "Active"
FINISHED = "Finished"

MAX_ENTRIES = 1000
"""Entries kept in the queue (ClickHouse's ``max_tasks_in_queue`` default); older ones are pruned."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    cluster TEXT NOT NULL,
    query TEXT NOT NULL,
    local_query TEXT NOT NULL,
    database TEXT,
    settings TEXT NOT NULL,
    initiator_host TEXT NOT NULL,
    initiator_port INTEGER NOT NULL,
    create_time REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS host_status (
    seq INTEGER NOT NULL,
    host TEXT NOT NULL,
    port INTEGER NOT NULL,
    position INTEGER NOT NULL,
    status TEXT NOT NULL,
    exception_code INTEGER,
    exception_text TEXT,
    start_time REAL,
    finish_time REAL,
    PRIMARY KEY (seq, host, port)
);
CREATE INDEX IF NOT EXISTS host_status_pending ON host_status (host, port, status, seq);
CREATE TABLE IF NOT EXISTS faults (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    target TEXT NOT NULL,
    kind TEXT NOT NULL,
    pattern TEXT NOT NULL DEFAULT '',
    code INTEGER,
    seconds REAL,
    remaining INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS servers (
    target TEXT PRIMARY KEY,
    started_at REAL NOT NULL,
    server_uuid TEXT
);
CREATE TABLE IF NOT EXISTS heartbeats (
    target TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    port INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    paused INTEGER NOT NULL,
    seen REAL NOT NULL
);
"""


def entry_name(seq: int) -> str:
    """``query-NNNNNNNNNN``: ClickHouse numbers queue nodes from zero with ten digits."""
    return f"query-{seq - 1:010d}"


def entry_seq(name: str) -> int:
    return int(name.removeprefix("query-")) + 1


@dataclass(frozen=True)
class Entry:
    seq: int
    cluster: str
    query: str
    local_query: str
    database: str | None
    settings: dict[str, str]
    initiator_host: str
    initiator_port: int
    create_time: float

    @property
    def name(self) -> str:
        return entry_name(self.seq)


@dataclass(frozen=True)
class HostStatus:
    host: str
    port: int
    status: str
    exception_code: int | None
    exception_text: str | None
    start_time: float | None
    finish_time: float | None


@dataclass(frozen=True)
class Fault:
    id: int
    target: str
    kind: str
    pattern: str
    code: int | None
    seconds: float | None
    remaining: int

    def matches(self, statement: str) -> bool:
        return not self.pattern or re.search(self.pattern, statement, re.IGNORECASE | re.DOTALL) is not None


class Store:
    """Access to the cluster's SQLite state; cheap to create, safe to use from any thread or process.

    With ``reuse_connections`` (a cluster process, which outlives no state file) each thread keeps one connection
    open for its calls, not nested in one another, instead of opening one per call (opening parses the schema: ~0.3
    ms of CPU, the whole cost of a read). A call that fails drops its thread's connection.
    """

    def __init__(self, path: Path, *, reuse_connections: bool = False) -> None:
        self.path = Path(path)
        self.bell = Bell(self.path.with_name(self.path.name + "-bell"))
        self._threads = threading.local() if reuse_connections else None

    def initialize(self) -> None:
        with self.connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA busy_timeout=30000")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL: durable across process crashes, no fsync per commit
        except BaseException:
            db.close()
            raise
        return db

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        threads = self._threads
        if threads is None or getattr(threads, "busy", False):
            db = self._open()
            try:
                yield db
            finally:
                db.close()
            return
        db = getattr(threads, "db", None) or self._open()
        threads.db, threads.busy = None, True
        try:
            yield db
        except BaseException:
            db.close()
            raise
        finally:
            threads.busy = False
        if db.in_transaction:  # never carry an open transaction into the next call
            db.close()
        else:
            threads.db = db

    @contextmanager
    def transaction(self, *, ring: bool = True) -> Iterator[sqlite3.Connection]:
        with self.connect() as db:
            db.execute("BEGIN IMMEDIATE")
            before = db.total_changes
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            changed = db.total_changes != before
        if ring and changed:
            self.bell.ring()

    # -- distributed DDL queue ------------------------------------------------------------------------------------

    def enqueue(
        self,
        *,
        cluster: str,
        query: str,
        local_query: str,
        database: str | None,
        settings: dict[str, str],
        initiator: tuple[str, int],
        hosts: list[tuple[str, int]],
    ) -> Entry:
        now = time.time()
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO entries (cluster, query, local_query, database, settings, initiator_host, initiator_port,"
                " create_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (cluster, query, local_query, database, json.dumps(settings), initiator[0], initiator[1], now),
            )
            seq = int(cursor.lastrowid or 0)
            db.executemany(
                "INSERT INTO host_status (seq, host, port, position, status) VALUES (?, ?, ?, ?, ?)",
                [(seq, host, port, position, INACTIVE) for position, (host, port) in enumerate(hosts)],
            )
            db.execute("DELETE FROM host_status WHERE seq <= (SELECT max(seq) FROM entries) - ?", (MAX_ENTRIES,))
            db.execute("DELETE FROM entries WHERE seq <= (SELECT max(seq) FROM entries) - ?", (MAX_ENTRIES,))
        return Entry(seq, cluster, query, local_query, database, dict(settings), initiator[0], initiator[1], now)

    def entry(self, seq: int) -> Entry | None:
        with self.connect() as db:
            row = db.execute("SELECT * FROM entries WHERE seq = ?", (seq,)).fetchone()
        return _entry(row) if row else None

    def next_pending(self, host: str, port: int) -> Entry | None:
        """The oldest entry this host has not finished (DDL workers execute their queue in order)."""
        with self.connect() as db:
            row = db.execute(
                "SELECT e.* FROM host_status h JOIN entries e ON e.seq = h.seq"
                " WHERE h.host = ? AND h.port = ? AND h.status != ? ORDER BY h.seq LIMIT 1",
                (host, port, FINISHED),
            ).fetchone()
        return _entry(row) if row else None

    def mark_active(self, seq: int, host: str, port: int) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE host_status SET status = ?, start_time = ? WHERE seq = ? AND host = ? AND port = ?",
                (ACTIVE, time.time(), seq, host, port),
            )

    def mark_finished(self, seq: int, host: str, port: int, code: int, text: str) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE host_status SET status = ?, exception_code = ?, exception_text = ?, finish_time = ?"
                " WHERE seq = ? AND host = ? AND port = ?",
                (FINISHED, code, text, time.time(), seq, host, port),
            )

    def host_statuses(self, seq: int) -> list[HostStatus]:
        with self.connect() as db:
            rows = db.execute(
                "SELECT host, port, status, exception_code, exception_text, start_time, finish_time"
                " FROM host_status WHERE seq = ? ORDER BY position",
                (seq,),
            ).fetchall()
        return [HostStatus(*row) for row in rows]

    def queue_rows(self) -> list[tuple[Entry, HostStatus]]:
        """Every (entry, host) pair, in entry then host order: the rows of ``system.distributed_ddl_queue``."""
        with self.connect() as db:
            rows = db.execute(
                "SELECT e.*, h.host, h.port, h.status, h.exception_code, h.exception_text, h.start_time,"
                " h.finish_time FROM entries e JOIN host_status h ON h.seq = e.seq ORDER BY e.seq, h.position"
            ).fetchall()
        return [(_entry(row[:9]), HostStatus(*row[9:])) for row in rows]

    # -- faults ---------------------------------------------------------------------------------------------------

    def arm(
        self,
        target: str,
        kind: str,
        *,
        pattern: str = "",
        code: int | None = None,
        seconds: float | None = None,
        count: int = 1,
    ) -> int:
        re.compile(pattern)  # a bad pattern fails here, in the caller, not later in a server thread
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO faults (target, kind, pattern, code, seconds, remaining) VALUES (?, ?, ?, ?, ?, ?)",
                (target, kind, pattern, code, seconds, count),
            )
            return int(cursor.lastrowid or 0)

    def disarm(self, target: str | None = None, kind: str | None = None) -> None:
        clauses, args = [], []
        if target is not None:
            clauses.append("target = ?")
            args.append(target)
        if kind is not None:
            clauses.append("kind = ?")
            args.append(kind)
        where = " WHERE " + " AND ".join(clauses) if clauses else ""
        with self.transaction() as db:
            db.execute("DELETE FROM faults" + where, args)

    def faults(self, target: str | None = None) -> list[Fault]:
        with self.connect() as db:
            if target is None:
                rows = db.execute("SELECT * FROM faults ORDER BY id").fetchall()
            else:
                rows = db.execute("SELECT * FROM faults WHERE target = ? ORDER BY id", (target,)).fetchall()
        return [Fault(*row) for row in rows]

    def has_fault(self, target: str, kind: str) -> bool:
        with self.connect() as db:
            row = db.execute("SELECT 1 FROM faults WHERE target = ? AND kind = ? LIMIT 1", (target, kind)).fetchone()
        return row is not None

    def take(self, target: str, kinds: tuple[str, ...], statement: str) -> Fault | None:
        """Consume one use of the oldest armed fault of ``kinds`` on ``target`` that matches ``statement``."""
        marks = ", ".join("?" for _ in kinds)
        with self.connect() as db:  # the common case -- nothing armed -- takes no write lock
            armed = db.execute(
                f"SELECT 1 FROM faults WHERE target = ? AND kind IN ({marks}) LIMIT 1", (target, *kinds)
            ).fetchone()
        if armed is None:
            return None
        with self.transaction() as db:
            rows = db.execute(
                f"SELECT * FROM faults WHERE target = ? AND kind IN ({marks}) ORDER BY id", (target, *kinds)
            ).fetchall()
            for row in rows:
                fault = Fault(*row)
                if not fault.matches(statement):
                    continue
                if fault.remaining == 1:
                    db.execute("DELETE FROM faults WHERE id = ?", (fault.id,))
                elif fault.remaining > 1:
                    db.execute("UPDATE faults SET remaining = remaining - 1 WHERE id = ?", (fault.id,))
                return fault
        return None

    # -- server start times (what ``uptime()`` reports) --------------------------------------------------------

    def server_started(self, target: str) -> float:
        """``target``'s server (re)starts now: record and return the time."""
        now = time.time()
        with self.transaction() as db:
            db.execute(
                "INSERT INTO servers (target, started_at) VALUES (?, ?)"
                " ON CONFLICT(target) DO UPDATE SET started_at = excluded.started_at",
                (target, now),
            )
        return now

    def recreate_server(self, target: str, server_uuid: str) -> None:
        """``target``'s server lost its data directory: from now on it answers ``serverUUID()`` with ``server_uuid``."""
        with self.transaction() as db:
            db.execute("UPDATE servers SET server_uuid = ? WHERE target = ?", (server_uuid, target))

    def server_uuid(self, target: str) -> str | None:
        """The ``serverUUID()`` a recreated server answers (``None``: the engine's own)."""
        with self.connect() as db:
            row = db.execute("SELECT server_uuid FROM servers WHERE target = ?", (target,)).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def started_at(self, target: str) -> float | None:
        with self.connect() as db:
            row = db.execute("SELECT started_at FROM servers WHERE target = ?", (target,)).fetchone()
        return None if row is None else float(row[0])

    # -- liveness -------------------------------------------------------------------------------------------------

    def heartbeat(self, target: str, host_id: tuple[str, int], pid: int, paused: bool) -> None:
        """A DDL worker is alive (and whether it is paused); the initiator's ``*_only_active`` modes read this."""
        with self.transaction(ring=False) as db:
            db.execute(
                "INSERT INTO heartbeats (target, host, port, pid, paused, seen) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT(target) DO UPDATE SET host = excluded.host, port = excluded.port, pid = excluded.pid,"
                " paused = excluded.paused, seen = excluded.seen",
                (target, host_id[0], host_id[1], pid, int(paused), time.time()),
            )

    def live_targets(self, stale_after: float) -> set[str]:
        """Processes whose worker has been seen within ``stale_after`` seconds (paused or not): running hosts."""
        with self.connect() as db:
            rows = db.execute("SELECT target FROM heartbeats WHERE seen >= ?", (time.time() - stale_after,)).fetchall()
        return {target for (target,) in rows}

    def offline_hosts(self, stale_after: float) -> set[tuple[str, int]]:
        """Hosts whose DDL worker is paused or has not been seen for ``stale_after`` seconds (down hosts)."""
        now = time.time()
        with self.connect() as db:
            rows = db.execute("SELECT host, port, paused, seen FROM heartbeats").fetchall()
        return {(host, port) for host, port, paused, seen in rows if paused or now - seen > stale_after}


def _entry(row: Any) -> Entry:
    seq, cluster, query, local_query, database, settings, host, port, created = row
    return Entry(seq, cluster, query, local_query, database, json.loads(settings), host, port, created)
