"""In-memory implementations of every publication port, on one simulated world, with fault injection.

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
* the content digest is the canonical typed multiset digest (``contracts.typed_digest``) over the table's rows.

Every port call is counted in ``world.calls`` (for the round-trip budget test), and every physical effect is logged
in ``world.effects`` (for the "no foreign object touched" invariant).
"""

from __future__ import annotations

import hashlib
import json
import uuid as uuidlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from airflow_provider_dpone.contracts.authority_row import (
    AUTHORITY_COLUMNS,
    AUTHORITY_TABLE,
    AuthorityRow,
    VersionedAuthorityRow,
)
from airflow_provider_dpone.contracts.identities import member_id
from airflow_provider_dpone.contracts.inventory import (
    AdmittedInventory,
    AdmittedMember,
    ColumnFact,
    InventoryRow,
    MemberEndpoint,
    TableFacts,
)
from airflow_provider_dpone.contracts.receipts import ArtifactColumn, ArtifactReceipt
from airflow_provider_dpone.contracts.typed_digest import LogicalType, MultisetDigest, TypedColumn
from airflow_provider_dpone.ports.publication import (
    ArtifactInvalidError,
    AuthorityConflictError,
    DdlIntent,
    DispatchOutcome,
    HostDdlState,
    MutationRejectedError,
    QueueEntryStatus,
    QueueHostStatus,
    TableObservation,
    TableSpec,
)
from airflow_provider_dpone.protocol.context import PublicationPorts
from tests.fakes.faults import FaultInjector, FaultKind, SimulatedCrash

__all__ = [
    "FakeWorld",
    "FaultInjector",
    "FaultKind",
    "SimulatedCrash",
]

Row = tuple[object, ...]

UNKNOWN_TABLE = 60
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


def content_digest(columns: Sequence[tuple[str, str]], rows: Sequence[Row]) -> str:
    acc = MultisetDigest(typed_columns(columns))
    acc.add_rows(rows)
    return acc.hexdigest


@dataclass
class FakeTable:
    uuid: str
    engine: str
    columns: tuple[tuple[str, str], ...]
    rows: list[Row] = field(default_factory=list)


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

    @property
    def member_id(self) -> str:
        return member_id(self.shard_num, self.replica_num)


@dataclass
class QueueEntry:
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


def exact_authority_facts(path: str = "/dpone/authority") -> TableFacts:
    return TableFacts(
        engine="KeeperMap",
        engine_full=f"KeeperMap('{path}') PRIMARY KEY target_key",
        primary_key="target_key",
        columns=tuple(ColumnFact(name=name, type=type_) for name, type_ in AUTHORITY_COLUMNS),
    )


class FakeWorld:
    """A one-shard cluster of independent members, its Keeper, DDL queue and artifact store."""

    def __init__(self, *, members: int = 2, cluster: str = "analytics", database: str = "analytics_db", seed: int = 0):
        self.cluster = cluster
        self.database = database
        self.internal_replication = False
        self.members: list[FakeMember] = []
        for replica in range(1, members + 1):
            self.add_member(replica)
        self.keeper: dict[str, tuple[AuthorityRow, int]] = {}
        self.queue: list[QueueEntry] = []
        self.artifacts: dict[str, FakeArtifact] = {}
        self.faults = FaultInjector()
        self.clock = FakeClock()
        self.entropy = FakeEntropy(seed)
        self.calls: Counter[str] = Counter()
        self.effects: list[Effect] = []
        self.authority_facts: dict[str, TableFacts | None] = {}
        self._uuid_counter = 0

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

    def table(self, member: FakeMember, name: str) -> FakeTable | None:
        return member.tables.get((self.database, name))

    def ports(self) -> PublicationPorts:
        return PublicationPorts(
            authority=FakeAuthorityStore(self),
            catalog=FakeCatalog(self),
            sessions=FakeSessions(self),
            ddl=FakeClusterDDL(self),
            artifacts=FakeArtifactStore(self),
            clock=self.clock,
            entropy=self.entropy,
        )

    def source(self, columns: Sequence[tuple[str, str]], rows: Sequence[Row], *, replayable: bool = True) -> FakeSource:
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
        key = (db, intent.table)
        if key not in tables:
            return UNKNOWN_TABLE
        dropped = tables.pop(key)
        self.effects.append(Effect(mid, "ddl", "drop", intent.table, dropped.uuid))
        return 0


class FakeAuthorityStore:
    def __init__(self, world: FakeWorld) -> None:
        self.world = world

    def read(self, target_key: str) -> VersionedAuthorityRow | None:
        self.world.calls["authority.read"] += 1
        stored = self.world.keeper.get(target_key)
        return None if stored is None else VersionedAuthorityRow(row=stored[0], version=stored[1])

    def create(self, row: AuthorityRow) -> None:
        self.world.calls["authority.create"] += 1

        def effect() -> None:
            if row.target_key in self.world.keeper:
                raise AuthorityConflictError("strict insert: key exists")
            self.world.keeper[row.target_key] = (row, 0)

        self.world.faults.mutation("authority.create", effect)

    def compare_and_set(self, row: AuthorityRow, expected_version: int) -> None:
        self.world.calls["authority.cas"] += 1

        def effect() -> None:
            stored = self.world.keeper.get(row.target_key)
            if stored is None or stored[1] != expected_version:
                raise AuthorityConflictError("version check failed")
            self.world.keeper[row.target_key] = (row, stored[1] + 1)

        self.world.faults.mutation("authority.cas", effect)


class FakeCatalog:
    def __init__(self, world: FakeWorld) -> None:
        self.world = world

    def inventory(self, cluster: str) -> tuple[InventoryRow, ...]:
        self.world.calls["catalog.inventory"] += 1
        if cluster != self.world.cluster:
            return ()
        rows = [
            InventoryRow(
                cluster=cluster,
                shard_num=member.shard_num,
                replica_num=member.replica_num,
                internal_replication=self.world.internal_replication,
                endpoint=MemberEndpoint(host=member.host, port=member.port),
            )
            for member in self.world.members
        ]
        return tuple(sorted(rows, key=lambda row: (row.shard_num, row.replica_num)))

    def database_engine(self, member: AdmittedMember, database: str) -> str | None:
        self.world.calls["catalog.database_engine"] += 1
        return self.world.member(member.member_id).databases.get(database)

    def table_facts(self, member: AdmittedMember, database: str, table: str) -> TableFacts | None:
        self.world.calls["catalog.table_facts"] += 1
        if table == AUTHORITY_TABLE:
            return self.world.authority_facts.get(member.member_id, exact_authority_facts())
        found = self.world.table(self.world.member(member.member_id), table)
        if found is None:
            return None
        return TableFacts(
            engine=found.engine,
            engine_full=found.engine,
            primary_key="",
            columns=tuple(ColumnFact(name=name, type=type_) for name, type_ in found.columns),
        )


class FakeSessions:
    def __init__(self, world: FakeWorld) -> None:
        self.world = world

    def session(self, member: AdmittedMember) -> FakeMemberSession:
        self.world.calls["sessions.open"] += 1
        return FakeMemberSession(self.world, self.world.member(member.member_id))


class FakeMemberSession:
    def __init__(self, world: FakeWorld, member: FakeMember) -> None:
        self.world = world
        self.member = member

    def observe_table(self, database: str, table: str, *, with_content: bool) -> TableObservation:
        self.world.calls["member.observe"] += 1
        found = self.member.tables.get((database, table))
        if found is None:
            return TableObservation.absent()
        return TableObservation(
            exists=True,
            uuid=found.uuid,
            engine=found.engine,
            columns=found.columns,
            row_count=len(found.rows),
            content_digest=content_digest(found.columns, found.rows) if with_content else None,
        )

    def create_table(self, database: str, table: str, uuid: str, spec: TableSpec) -> None:
        self.world.calls["member.create"] += 1

        def effect() -> None:
            if database not in self.member.databases:
                raise MutationRejectedError("unknown database")
            if (database, table) in self.member.tables or uuid in self.member.used_uuids:
                raise MutationRejectedError("table or UUID exists")
            self.member.tables[(database, table)] = FakeTable(uuid=uuid, engine=spec.engine, columns=spec.schema_pairs)
            self.member.used_uuids.add(uuid)
            self.world.effects.append(Effect(self.member.member_id, "member", "create", table, uuid))

        self.world.faults.mutation("member.create", effect)

    def load(
        self, database: str, table: str, uuid: str, artifact: FakeHandle, *, query_id: str, dedup_token: str
    ) -> None:
        self.world.calls["member.load"] += 1

        def target() -> FakeTable:
            found = self.member.tables.get((database, table))
            if found is None or found.uuid != uuid:
                raise MutationRejectedError("table does not hold the expected UUID")
            return found

        def effect() -> None:
            found = target()
            found.rows.extend(artifact.rows)
            self.world.effects.append(Effect(self.member.member_id, "member", "load", table, uuid))

        def partial() -> None:
            found = target()
            found.rows.extend(artifact.rows[: len(artifact.rows) // 2])
            self.world.effects.append(Effect(self.member.member_id, "member", "load", table, uuid))

        self.world.faults.mutation("member.load", effect, partial)

    def drop_table(self, database: str, table: str, uuid: str) -> None:
        self.world.calls["member.drop"] += 1

        def effect() -> None:
            found = self.member.tables.get((database, table))
            if found is None or found.uuid != uuid:
                raise MutationRejectedError("table does not hold the expected UUID")
            del self.member.tables[(database, table)]
            self.world.effects.append(Effect(self.member.member_id, "member", "drop", table, uuid))

        self.world.faults.mutation("member.drop", effect)


class FakeClusterDDL:
    def __init__(self, world: FakeWorld) -> None:
        self.world = world

    def dispatch(
        self, inventory: AdmittedInventory, intent: DdlIntent, *, correlation_token: str, query_digest: str
    ) -> DispatchOutcome:
        self.world.calls["ddl.dispatch"] += 1
        world = self.world

        def effect() -> DispatchOutcome:
            entry = QueueEntry(
                name=f"query-{len(world.queue):010d}",
                token=correlation_token,
                query_digest=query_digest,
                intent=intent,
                hosts={member.member_id: (HostDdlState.INACTIVE, None) for member in world.members},
            )
            world.queue.append(entry)
            for member in world.members:
                world._run_worker(member)
            finished = tuple(mid for mid, (state, code) in entry.hosts.items() if state is HostDdlState.FINISHED)
            failed = tuple(mid for mid, (_, code) in entry.hosts.items() if code)
            return DispatchOutcome(
                entry=entry.name, finished=finished, failed=failed, timed_out=len(finished) < len(entry.hosts)
            )

        return world.faults.mutation("ddl.dispatch", effect)

    def queue_status(self, inventory: AdmittedInventory, correlation_token: str) -> QueueEntryStatus | None:
        self.world.calls["ddl.queue_status"] += 1

        def effect() -> QueueEntryStatus | None:
            for entry in self.world.queue:
                if entry.token == correlation_token:
                    hosts = tuple(
                        QueueHostStatus(member_id=mid, state=state, exception_code=code)
                        for mid, (state, code) in sorted(entry.hosts.items())
                    )
                    return QueueEntryStatus(entry=entry.name, correlation_token=entry.token, hosts=hosts)
            return None

        return self.world.faults.read("ddl.queue_status", effect)


@dataclass
class FakeHandle:
    receipt: ArtifactReceipt
    rows: tuple[Row, ...]

    def chunks(self) -> Iterator[bytes]:
        yield json.dumps([list(row) for row in self.rows]).encode()


class FakeArtifactStore:
    def __init__(self, world: FakeWorld) -> None:
        self.world = world

    def open(self, receipt: ArtifactReceipt) -> FakeHandle:
        self.world.calls["artifacts.open"] += 1
        stored = self.world.artifacts.get(receipt.sha256)
        if stored is None or hashlib.sha256(stored.data).hexdigest() != receipt.sha256 or stored.receipt != receipt:
            raise ArtifactInvalidError("missing or tampered")
        return FakeHandle(receipt, stored.rows)


class FakeSource:
    """Extraction into the content-addressed store; counts how often the source was read."""

    def __init__(self, world: FakeWorld, columns: tuple[tuple[str, str], ...], rows: tuple[Row, ...], replayable: bool):
        self.world = world
        self.columns = columns
        self.rows = rows
        self.replayable = replayable
        self.seals = 0

    def seal(self) -> ArtifactReceipt:
        self.seals += 1
        data = json.dumps({"columns": self.columns, "rows": [list(row) for row in self.rows]}).encode()
        receipt = ArtifactReceipt(
            sha256=hashlib.sha256(data).hexdigest(),
            byte_size=len(data),
            row_count=len(self.rows),
            columns=tuple(ArtifactColumn(name=name, type=type_) for name, type_ in self.columns),
            content_digest=content_digest(self.columns, self.rows),
            replayable=self.replayable,
        )
        self.world.artifacts[receipt.sha256] = FakeArtifact(receipt, data, self.rows)
        return receipt
