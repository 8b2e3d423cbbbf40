"""The simulated world behind the publication fakes: members, tables, Keeper, DDL queue, artifacts, clock, entropy.

Semantics kept faithful to ClickHouse where the protocol depends on them (a later contract suite runs the same port
tests against the real adapters on the embedded cluster):

* each member is an independent server: a table is an object with a UUID, an engine, an ordered schema and a list of
  rows; UUIDs are unique per server (a CREATE with a UUID in use is refused) and differ between members;
* CREATE never replaces (name taken -> refused); an INSERT appends its rows -- there is **no deduplication** (plain
  MergeTree keeps ``non_replicated_deduplication_window = 0``), so a repeated load duplicates rows;
* EXCHANGE swaps the two table objects (UUIDs and data) between the names; RENAME moves the object; DROP removes it;
* ON CLUSTER DDL creates one queue entry per dispatch (``query-NNNNNNNNNN``) listing every member of the cluster
  with status Inactive; each member's worker executes entries in order unless the member is *paused*; a host whose
  execution fails is ``Finished`` with a non-zero exception code; the initiator answers with per-host results, and
  with ``timed_out`` when some host has not finished (``distributed_ddl_output_mode=throw`` semantics);
* KeeperMap: strict insert fails on an existing key; each successful update increments ``_version`` by one; a CAS at
  the wrong version changes nothing;
* the content digest is the canonical typed multiset digest (``core.typed_digest``) over the table's rows;
* ``Replicated*MergeTree`` tables (internal mode) share one log per Keeper path, fetch asynchronously and deduplicate
  inserted blocks: see :mod:`tests.support.fakes.replication`.

* the fake cannot model a request still in flight after its sender died: when a fault point says "crash", the effect
  either happened before the death or not at all. The protocol's quiet period covers the real-world case.

Every port call is counted in ``world.calls`` (for the round-trip budget test), and every physical effect is logged
in ``world.effects`` (for the "no foreign object touched" invariant). The port classes are in ``tests.support.fakes.ports``.
"""

from __future__ import annotations

import hashlib
import uuid as uuidlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from airflow_provider_dpone.cluster.clickhouse.column_types import canonical_columns
from airflow_provider_dpone.cluster.ports import DdlIntent, DispatchSettings, HostDdlState
from airflow_provider_dpone.cluster.protocol.context import PublicationPorts
from airflow_provider_dpone.cluster.values.authority.generation import ServerName
from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_COLUMNS, AuthorityRow
from airflow_provider_dpone.cluster.values.identities import member_id
from airflow_provider_dpone.cluster.values.inventory import ColumnFact, TableFacts
from airflow_provider_dpone.cluster.values.receipts import (
    CURRENT_CONTENT_DIGEST,
    ArtifactReceipt,
    ContentDigestVersion,
)
from airflow_provider_dpone.core.alerts import AlertEvent
from airflow_provider_dpone.core.typed_digest import LogicalType, MultisetDigest, TypedColumn, native_multiset_digest
from tests.support.fakes import replication
from tests.support.fakes.faults import FaultInjector

if TYPE_CHECKING:
    from tests.support.fakes.ports import FakeSource
    from tests.support.fakes.replication import FakeReplica, ReplicatedLog

Row = tuple[object, ...]

UNKNOWN_TABLE = 60
UNSUPPORTED_METHOD = 1
TABLE_ALREADY_EXISTS = 57

_LOGICAL = {"UInt64": LogicalType.INTEGER, "Int64": LogicalType.INTEGER, "String": LogicalType.STRING}


def typed_columns(columns: Sequence[tuple[str, str]]) -> list[TypedColumn]:
    """Map the fake's ClickHouse types to logical types (``Nullable(T)`` allowed) for the content digest."""
    typed = []
    for name, type_ in columns:
        nullable = type_.startswith("Nullable(")
        inner = type_[len("Nullable(") : -1] if nullable else type_
        typed.append(TypedColumn(name=name, logical=_LOGICAL[inner], nullable=nullable))
    return typed


def content_digest(
    columns: Sequence[tuple[str, str]], rows: Sequence[Row], version: ContentDigestVersion = CURRENT_CONTENT_DIGEST
) -> str:
    """What the server computes for a table (the fake memoizes it: a pure function of schema and rows)."""
    return digest_of(*content_sums(columns, rows, version), version)


def content_sums(
    columns: Sequence[tuple[str, str]], rows: Sequence[Row], version: ContentDigestVersion
) -> tuple[int, int]:
    """Row count and multiset sum of ``rows`` (the typed row hashes): additive over any split of the rows, as on the
    server."""
    return _typed_sums(tuple(columns), tuple(rows))


def digest_of(count: int, total: int, version: ContentDigestVersion) -> str:
    """The canonical digest of a count and sum: the typed multiset digest itself, as on the real server."""
    return native_multiset_digest(count, total)


@lru_cache(maxsize=4096)
def _typed_sums(columns: tuple[tuple[str, str], ...], rows: tuple[Row, ...]) -> tuple[int, int]:
    acc = MultisetDigest(typed_columns(columns))
    acc.add_rows(rows)
    return acc.rows, acc.total


@dataclass
class FakeTable:
    uuid: str
    engine: str
    columns: tuple[tuple[str, str], ...]
    rows: list[Row] = field(default_factory=list)
    replica: FakeReplica | None = None
    merges: int = 0
    """Background merges so far: they rewrite parts (so the parts digest) but never the rows."""
    parts: list[tuple[str, int]] = field(default_factory=list)
    """Active parts as last seen (name, rows), covering ``rows`` in order: ``tests.support.fakes.parts``."""
    parts_merges: int = 0
    blocks: int = 0
    added_columns: int = 0
    """Trailing columns added by ``ALTER TABLE ... ADD COLUMN`` (``tests.support.fakes.parts.add_column``): no part holds
    their files, so they are not in any part's checksum."""


@dataclass
class FakeMember:
    shard_num: int
    replica_num: int
    host: str
    port: int = 8123
    databases: dict[str, str] = field(default_factory=dict)
    tables: dict[tuple[str, str], FakeTable] = field(default_factory=dict)
    used_uuids: set[str] = field(default_factory=set)
    paused: bool = False
    ddl_fails: bool = False
    executed: int = 0  # how many queue entries this member's worker has processed
    fetch_paused: bool = False  # its replicas fetch nothing (SYNC REPLICA times out)
    fetch_corrupt: int = 0  # its replicas fetch the next n parts without their last row (-1: every part)
    replica_readonly: bool = False  # its replicas lost Keeper (system.replicas.is_readonly)
    no_rename_exchange: bool = False
    """Its metadata directory's filesystem has no ``renameat2(RENAME_EXCHANGE)``: every EXCHANGE there (its own or
    its DDL worker's) fails with Code 1 ``UNSUPPORTED_METHOD`` and changes nothing (``renameExchange``,
    src/Common/renameat2.cpp); a RENAME still works (``renameNoReplace`` falls back to a plain rename)."""

    @property
    def member_id(self) -> str:
        return member_id(self.shard_num, self.replica_num)


@dataclass
class FakeQueueEntry:
    name: str
    token: str
    query_digest: str
    intent: DdlIntent
    hosts: dict[str, tuple[HostDdlState, int | None]]


@dataclass(frozen=True)
class Effect:
    """One physical effect on a member: ``op`` by ``via`` ("member" session or "ddl" worker) on a name and UUID."""

    member_id: str
    via: str
    op: str
    name: str
    uuid: str


@dataclass
class FakeArtifact:
    receipt: ArtifactReceipt
    data: bytes
    rows: tuple[Row, ...]


class FakeClock:
    def __init__(self, start_ms: int = 1_790_000_000_000) -> None:
        self.ms = start_ms

    def now_ms(self) -> int:
        return self.ms

    def monotonic_ms(self) -> int:
        return self.ms

    def sleep_ms(self, ms: int) -> None:
        self.advance(max(ms, 0))

    def advance(self, ms: int) -> None:
        self.ms += ms


class FakeEntropy:
    """Deterministic 'randomness': a counter hashed with a seed. Every issued UUID is remembered."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.n = 0
        self.issued_uuids: list[str] = []

    def _next(self, kind: str) -> str:
        self.n += 1
        return hashlib.sha256(f"{kind}:{self.seed}:{self.n}".encode()).hexdigest()

    def token(self) -> str:
        return self._next("token")[:32]

    def uuid(self) -> str:
        value = str(uuidlib.UUID(self._next("uuid")[:32], version=4))
        self.issued_uuids.append(value)
        return value


@lru_cache(maxsize=64)
def exact_authority_facts(path: str = "/dpone/authority") -> TableFacts:
    return TableFacts(
        engine="KeeperMap",
        engine_full=f"KeeperMap('{path}') PRIMARY KEY target_key",
        primary_key="target_key",
        columns=tuple(ColumnFact(name=name, type=type_) for name, type_ in AUTHORITY_COLUMNS),
    )


class FakeWorld:
    """A one-shard cluster of independent members, its Keeper, DDL queue and artifact store."""

    def __init__(
        self,
        *,
        members: int = 2,
        cluster: str = "analytics",
        database: str = "analytics_db",
        seed: int = 0,
        internal_replication: bool = False,
    ):
        self.cluster = cluster
        self.database = database
        self.internal_replication = internal_replication
        self.ddl_entry_format_version = 5
        """The coordinator's ``distributed_ddl_entry_format_version`` for the connection's user (ClickHouse's default)."""
        self.replicated_logs: dict[str, ReplicatedLog] = {}
        self.insert_block_rows = 2
        self.part_rows = 1 << 20
        """Rows per part a plain MergeTree INSERT writes (a stand-in: a load squashes by bytes, about 256 MiB)."""
        self.dedup_window = 100
        self.members: list[FakeMember] = []
        for replica in range(1, members + 1):
            self.add_member(replica)
        self.keeper: dict[str, tuple[AuthorityRow, int]] = {}
        self.keeper_before: dict[str, tuple[AuthorityRow, int] | None] = {}
        """What each key held before its latest write (what a Keeper server one write behind still serves)."""
        self.keeper_lagging_reads = 0
        """How many of the next authority reads a lagging Keeper server answers (:meth:`lag_keeper`)."""
        self.queue: list[FakeQueueEntry] = []
        self.artifacts: dict[str, FakeArtifact] = {}
        self.faults = FaultInjector()
        self.clock = FakeClock()
        self.entropy = FakeEntropy(seed)
        self.calls: Counter[str] = Counter()
        self.effects: list[Effect] = []
        self.dispatched: list[DispatchSettings] = []
        self.authority_facts: dict[str, TableFacts | None] = {}
        self.alerts: list[AlertEvent] = []
        """Every alert the protocol emitted through this world's ports."""
        self.answered_by: dict[str, str] = {}
        """A misrouted member endpoint: member id -> the member id of the server that answers there."""
        self._uuid_counter = 0
        from tests.support.fakes.acceptance import FakeAcceptanceReader

        self.acceptance = FakeAcceptanceReader(self)
        self.coordinator_server = ServerName(server_uuid="5e1f0000-0000-4000-8000-000000000001", host_digest="c" * 64)
        """The server the coordinator endpoint reaches now (a balancer may switch it: :meth:`balance_to`)."""
        self.server_started_at_ms: dict[ServerName, int] = {}
        """Each coordinator server's last start (one day ago unless restarted)."""
        self._booted_at_ms = self.clock.now_ms() - 86_400_000
        self.coordinator_sessions: dict[str, ServerName] = {}
        """Session id -> the server holding it (a restart loses that server's sessions)."""
        self.coordinator_stalled = False
        self.held: list[tuple[ServerName, Callable[[], object]]] = []
        """Dispatches a stalled coordinator received and holds: :meth:`resume_coordinator` runs them (late),
        :meth:`restart_coordinator` loses them."""

    # --- Keeper ---------------------------------------------------------------------------------------------------

    def lag_keeper(self, reads: int) -> None:
        """The next ``reads`` authority reads (a CAS's own read-back included) are answered by a Keeper server that
        has not applied the latest write of the key: they return what the key held before it (the previous version,
        or no row). ZooKeeper and ClickHouse Keeper order writes linearizably but answer a read from the server the
        session is connected to, which may lag; KeeperMap sends no ``sync`` before a read (``StorageKeeperMap::
        getClient`` syncs only when it opens a session; ``getBySerializedKeys`` is a plain ``tryGet``)."""
        self.keeper_lagging_reads = reads

    def keeper_write(self, key: str, value: tuple[AuthorityRow, int]) -> None:
        """Apply one authority write, remembering what the key held before it."""
        self.keeper_before[key] = self.keeper.get(key)
        self.keeper[key] = value

    def keeper_read(self, key: str) -> tuple[AuthorityRow, int] | None:
        """One authority read as a Keeper server answers it: a lagging one serves the state before the last write."""
        if self.keeper_lagging_reads > 0:
            self.keeper_lagging_reads -= 1
            if key in self.keeper_before:
                return self.keeper_before[key]
        return self.keeper.get(key)

    # --- the coordinator ------------------------------------------------------------------------------------------

    def stall_coordinator(self) -> None:
        """The coordinator keeps receiving ON CLUSTER requests but queues none of them (their clients time out)."""
        self.coordinator_stalled = True

    def resume_coordinator(self) -> None:
        """The stalled coordinator wakes up and queues every request it held, in order."""
        self.coordinator_stalled = False
        held, self.held = self.held, []
        for _server, queue_it in held:
            queue_it()

    def restart_coordinator(self) -> None:
        """The coordinator server reached now restarts: requests it held die with it, and its sessions; its Keeper
        (the authority) lives on."""
        self.coordinator_stalled = False
        self.held = [(server, held) for server, held in self.held if server != self.coordinator_server]
        self.server_started_at_ms[self.coordinator_server] = self.clock.now_ms()
        self.coordinator_sessions = {
            session: server
            for session, server in self.coordinator_sessions.items()
            if server != self.coordinator_server
        }

    def recreate_coordinator(self, server_uuid: str) -> None:
        """The coordinator server reached now lost its data directory and starts again on the same host: it dies as in
        :meth:`restart_coordinator`, and comes back with a new ``serverUUID()`` (ClickHouse keeps it in the data
        path's ``uuid`` file and writes a new one when the file is missing: ``ServerUUID::load``,
        src/Core/ServerUUID.cpp); its ``hostName()`` is unchanged."""
        self.restart_coordinator()
        recreated = ServerName(server_uuid=server_uuid, host_digest=self.coordinator_server.host_digest)
        self.server_started_at_ms[recreated] = self.clock.now_ms()
        self.coordinator_server = recreated

    @property
    def coordinator_started_at_ms(self) -> int:
        """When the server the coordinator endpoint reaches now last started."""
        return self.server_started_at_ms.get(self.coordinator_server, self._booted_at_ms)

    def balance_to(self, server: ServerName) -> None:
        """A load balancer in front of the coordinator now routes every request to ``server``."""
        self.coordinator_server = server

    # --- world setup ----------------------------------------------------------------------------------------------

    def add_member(self, replica_num: int, shard_num: int = 1) -> FakeMember:
        member = FakeMember(shard_num=shard_num, replica_num=replica_num, host=f"ch-{shard_num}-{replica_num}.internal")
        member.databases[self.database] = "Atomic"
        member.executed = len(getattr(self, "queue", ()))  # a new server does not replay old DDL entries
        self.members.append(member)
        return member

    def member(self, member_id_: str) -> FakeMember:
        for member in self.members:
            if member.member_id == member_id_:
                return member
        raise KeyError(member_id_)

    def fresh_uuid(self, label: str) -> str:
        """A UUID for tables that exist before the operation (never from the operation's entropy)."""
        self._uuid_counter += 1
        digest = hashlib.sha256(f"preexisting:{label}:{self._uuid_counter}".encode()).hexdigest()
        return str(uuidlib.UUID(digest[:32], version=4))

    def put_table(
        self,
        member: FakeMember,
        name: str,
        columns: Sequence[tuple[str, str]],
        rows: Sequence[Row],
        engine: str = "MergeTree",
    ) -> FakeTable:
        table = FakeTable(uuid=self.fresh_uuid(name), engine=engine, columns=tuple(columns), rows=list(rows))
        member.tables[(self.database, name)] = table
        member.used_uuids.add(table.uuid)
        return table

    def put_replicated_table(
        self, name: str, columns: Sequence[tuple[str, str]], rows: Sequence[Row], engine: str = "ReplicatedMergeTree"
    ) -> list[FakeTable]:
        """A pre-existing replicated table on every member (as if created ON CLUSTER: one UUID, one log)."""
        uuid = self.fresh_uuid(name)
        tables = []
        for member in self.members:
            assert self.create_on(member, self.database, name, uuid, engine, tuple(columns)) == 0
            tables.append(member.tables[(self.database, name)])
        replication.seed(self, tables, rows)
        return tables

    def create_on(
        self, member: FakeMember, database: str, name: str, uuid: str, engine: str, columns: tuple[tuple[str, str], ...]
    ) -> int:
        """``CREATE TABLE database.name UUID uuid`` on one member; 0 or ClickHouse's exception code."""
        if database not in member.databases:
            return 81  # UNKNOWN_DATABASE
        if (database, name) in member.tables or uuid in member.used_uuids:
            return TABLE_ALREADY_EXISTS
        table = FakeTable(uuid=uuid, engine=engine, columns=columns)
        if replication.is_replicated(engine):
            code = replication.register(self, member, table)
            if code:
                return code
        member.tables[(database, name)] = table
        member.used_uuids.add(uuid)
        return 0

    def drop_on(self, member: FakeMember, database: str, name: str) -> FakeTable:
        """``DROP TABLE ... SYNC``: the table, its UUID mapping and (replicated) its replica are gone at once."""
        table = member.tables.pop((database, name))
        member.used_uuids.discard(table.uuid)
        replication.leave(self, table)
        return table

    def replicate(self, limit: int | None = None) -> None:
        """Every replica of every replicated table fetches up to ``limit`` pending entries (all when ``None``)."""
        for member in self.members:
            for table in member.tables.values():
                if table.replica is not None:
                    replication.fetch(table, limit)

    def table(self, member: FakeMember, name: str) -> FakeTable | None:
        return member.tables.get((self.database, name))

    def ports(self) -> PublicationPorts:
        from tests.support.fakes.ports import (
            FakeArtifactStore,
            FakeAuthorityStore,
            FakeCatalog,
            FakeClusterDDL,
            FakeSessions,
        )

        return PublicationPorts(
            alerts=self.alerts.append,
            authority=FakeAuthorityStore(self),
            catalog=FakeCatalog(self),
            sessions=FakeSessions(self),
            ddl=FakeClusterDDL(self),
            artifacts=FakeArtifactStore(self),
            clock=self.clock,
            entropy=self.entropy,
            acceptance=self.acceptance,
        )

    def source(self, columns: Sequence[tuple[str, str]], rows: Sequence[Row], *, replayable: bool = True) -> FakeSource:
        from tests.support.fakes.ports import FakeSource

        return FakeSource(self, tuple(columns), tuple(rows), replayable)

    # --- DDL workers ----------------------------------------------------------------------------------------------

    def resume(self, member: FakeMember) -> None:
        """Un-pause a member: its worker processes every pending queue entry in order."""
        member.paused = False
        self._run_worker(member)

    def _run_worker(self, member: FakeMember) -> None:
        while not member.paused and member.executed < len(self.queue):
            entry = self.queue[member.executed]
            member.executed += 1
            if member.member_id in entry.hosts:
                entry.hosts[member.member_id] = (HostDdlState.FINISHED, self._execute(member, entry.intent))

    def _execute(self, member: FakeMember, intent: DdlIntent) -> int:
        """Apply one DDL on one member; return ClickHouse's exception code (0 = success)."""
        if member.ddl_fails:
            return 999
        db = intent.database
        tables = member.tables
        mid = member.member_id
        if intent.kind == "exchange":
            left, right = (db, intent.left), (db, intent.right)
            if left not in tables or right not in tables:
                return UNKNOWN_TABLE
            if member.no_rename_exchange:
                return UNSUPPORTED_METHOD
            tables[left], tables[right] = tables[right], tables[left]
            self.effects.append(Effect(mid, "ddl", "exchange", intent.left, tables[left].uuid))
            self.effects.append(Effect(mid, "ddl", "exchange", intent.right, tables[right].uuid))
            return 0
        if intent.kind == "rename":
            source, target = (db, intent.source), (db, intent.target)
            if source not in tables:
                return UNKNOWN_TABLE
            if target in tables:
                return TABLE_ALREADY_EXISTS
            tables[target] = tables.pop(source)
            self.effects.append(Effect(mid, "ddl", "rename", intent.source, tables[target].uuid))
            return 0
        if intent.kind == "create":
            columns = canonical_columns(intent.spec.schema_pairs)
            code = self.create_on(member, db, intent.table, intent.uuid, intent.spec.engine, columns)
            if not code:
                self.effects.append(Effect(mid, "ddl", "create", intent.table, intent.uuid))
            return code
        key = (db, intent.table)
        if key not in tables:
            return UNKNOWN_TABLE
        dropped = self.drop_on(member, db, intent.table)
        self.effects.append(Effect(mid, "ddl", "drop", intent.table, dropped.uuid))
        return 0
