"""Port implementations over :class:`tests.support.fakes.publication.FakeWorld` (semantics documented there).

Every call is counted in ``world.calls``; every mutation and every DDL queue read passes through the world's fault
injector, and every physical effect is logged in ``world.effects``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_dpone.cluster.clickhouse.column_types import canonical_columns
from airflow_provider_dpone.cluster.ports import (
    DdlIntent,
    DispatchOutcome,
    DispatchSettings,
    HostDdlState,
    QueueEntry,
    QueueHost,
    ReplicaStatus,
    ServerIdentity,
    TableObservation,
    TableRead,
    TableSpec,
)
from airflow_provider_dpone.cluster.values.authority.row import (
    AUTHORITY_TABLE,
    AuthorityRow,
    ReadBack,
    VersionedAuthorityRow,
    judge_read_back,
)
from airflow_provider_dpone.cluster.values.inventory import (
    AdmittedInventory,
    AdmittedMember,
    ColumnFact,
    InventoryRow,
    MemberEndpoint,
    MemberFacts,
    TableFacts,
)
from airflow_provider_dpone.cluster.values.part_digests import MAX_PART_DIGESTS
from airflow_provider_dpone.cluster.values.receipts import (
    CURRENT_CONTENT_DIGEST,
    ArtifactColumn,
    ArtifactReceipt,
)
from airflow_provider_dpone.core.errors import (
    ArtifactInvalidError,
    AuthorityConflictError,
    ExchangeUnsupportedError,
    MutationRejectedError,
    OutcomeUnknownError,
    ReadBackOlderError,
    UnavailableError,
)
from tests.support.fakes import parts
from tests.support.fakes.replication import blocks, fetch, insert, status
from tests.support.fakes.world import (
    Effect,
    FakeArtifact,
    FakeMember,
    FakeQueueEntry,
    FakeTable,
    Row,
    content_digest,
    exact_authority_facts,
)

if TYPE_CHECKING:
    from tests.support.fakes.world import FakeWorld


class FakeAuthorityStore:
    """The KeeperMap authority table as ``cluster/clickhouse/authority_store.py`` sees it: a strict insert, and a CAS
    followed by one read-back judged by the adapter's own rule (``judge_read_back``). Reads, the read-back included,
    may be served by a lagging Keeper server (:meth:`FakeWorld.lag_keeper`)."""

    def __init__(self, world: FakeWorld) -> None:
        self.world = world

    def read(self, target_key: str) -> VersionedAuthorityRow | None:
        self.world.calls["authority.read"] += 1
        return self._observe(target_key)

    def _observe(self, target_key: str) -> VersionedAuthorityRow | None:
        stored = self.world.keeper_read(target_key)
        return None if stored is None else VersionedAuthorityRow(row=stored[0], version=stored[1])

    def create(self, row: AuthorityRow) -> None:
        self.world.calls["authority.create"] += 1

        def effect() -> None:
            if row.target_key in self.world.keeper:
                raise AuthorityConflictError("strict insert: key exists")
            self.world.keeper_write(row.target_key, (row, 0))

        self.world.faults.mutation("authority.create", effect)

    def compare_and_set(self, row: AuthorityRow, expected_version: int) -> None:
        self.world.calls["authority.cas"] += 1

        def effect() -> None:  # ALTER ... UPDATE ... WHERE _version = N: matching nothing is no effect, no error
            stored = self.world.keeper.get(row.target_key)
            if stored is not None and stored[1] == expected_version:
                self.world.keeper_write(row.target_key, (row, stored[1] + 1))

        self.world.faults.mutation("authority.cas", effect)
        self.world.calls["authority.read_back"] += 1
        verdict = judge_read_back(self._observe(row.target_key), row, expected_version)
        if verdict is ReadBack.CONFLICT:
            raise AuthorityConflictError("another write holds the next version")
        if verdict is ReadBack.OLDER:
            raise ReadBackOlderError(f"the read after the update shows a version older than {expected_version + 1}")
        if verdict is ReadBack.UNKNOWN:
            raise OutcomeUnknownError("authority version moved on; the outcome of this write is not provable")


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
                ddl_entry_format_version=self.world.ddl_entry_format_version,
            )
            for member in self.world.members
        ]
        return tuple(sorted(rows, key=lambda row: (row.shard_num, row.replica_num)))

    def admission_facts(self, member: AdmittedMember, cluster: str, database: str, table: str) -> MemberFacts:
        self.world.calls["catalog.admission_facts"] += 1
        server = self.world.member(self.world.answered_by.get(member.member_id, member.member_id))
        engine = self.world.member(member.member_id).databases.get(database)
        local = ((server.shard_num, server.replica_num),) if cluster == self.world.cluster else ()
        table_facts = None if engine is None else self._table_facts(member, table)
        return MemberFacts(database_engine=engine, table=table_facts, local_positions=local)

    def _table_facts(self, member: AdmittedMember, table: str) -> TableFacts | None:
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

    def observe_table(self, read: TableRead) -> TableObservation:
        database, table, with_content = read.database, read.table, read.with_content
        with_parts, digest_version, known_parts = read.with_parts, read.digest_version, read.known_parts
        self.world.calls["member.observe"] += 1
        found = self.member.tables.get((database, table))
        if found is None:
            return TableObservation.absent()
        observed = TableObservation(
            exists=True,
            uuid=found.uuid,
            engine=found.engine,
            columns=found.columns,
            row_count=len(found.rows),
            parts_digest=parts.parts_digest(found) if with_content or with_parts else None,
        )
        if not with_content:
            return observed
        digest, facts, parts_read = parts.content(found, digest_version, known_parts)
        return observed.model_copy(
            update={
                "content_digest": digest,
                "part_digests": facts if len(facts) <= MAX_PART_DIGESTS else None,
                "parts_read": parts_read,
            }
        )

    def table_uuids(self, database: str, tables: tuple[str, ...]) -> tuple[str | None, ...]:
        self.world.calls["member.observe"] += 1
        found = (self.member.tables.get((database, table)) for table in tables)
        return tuple(None if table is None else table.uuid for table in found)

    def create_table(self, database: str, table: str, uuid: str, spec: TableSpec) -> None:
        self.world.calls["member.create"] += 1

        def effect() -> None:
            # ClickHouse reports types in its own spelling (``Decimal(18, 4)``), whatever spacing was declared
            columns = canonical_columns(spec.schema_pairs)
            if self.world.create_on(self.member, database, table, uuid, spec.engine, columns):
                raise MutationRejectedError("database unknown, or table, UUID or replica exists")
            self.world.effects.append(Effect(self.member.member_id, "member", "create", table, uuid))

        self.world.faults.mutation("member.create", effect)

    def exchange_tables(self, database: str, left: str, right: str) -> None:
        self.world.calls["member.exchange"] += 1

        def effect() -> None:
            tables = self.member.tables
            if (database, left) not in tables or (database, right) not in tables:
                raise MutationRejectedError("Code: 60. UNKNOWN_TABLE")
            if self.member.no_rename_exchange:
                raise ExchangeUnsupportedError("Code: 1. System call renameat2() is not supported")
            tables[(database, left)], tables[(database, right)] = tables[(database, right)], tables[(database, left)]
            for name in (left, right):
                self.world.effects.append(
                    Effect(self.member.member_id, "member", "exchange", name, tables[(database, name)].uuid)
                )

        self.world.faults.mutation("member.exchange", effect)

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
            insert(self.world, target(), artifact.rows, dedup_token)
            self.world.effects.append(Effect(self.member.member_id, "member", "load", table, uuid))

        def partial() -> None:
            found = target()
            if found.replica is None:
                parts.append(found, artifact.rows[: len(artifact.rows) // 2])
            else:  # an interrupted replicated INSERT: the first half of its blocks were committed
                insert(self.world, found, artifact.rows, dedup_token, upto=len(blocks(self.world, artifact.rows)) // 2)
            self.world.effects.append(Effect(self.member.member_id, "member", "load", table, uuid))

        self.world.faults.mutation("member.load", effect, partial)

    def drop_table(self, database: str, table: str, uuid: str) -> None:
        self.world.calls["member.drop"] += 1

        def effect() -> None:
            found = self.member.tables.get((database, table))
            if found is None or found.uuid != uuid:
                raise MutationRejectedError("table does not hold the expected UUID")
            self.world.drop_on(self.member, database, table)
            self.world.effects.append(Effect(self.member.member_id, "member", "drop", table, uuid))

        self.world.faults.mutation("member.drop", effect)

    def replica_status(self, database: str, table: str) -> ReplicaStatus | None:
        self.world.calls["member.replica_status"] += 1

        def effect() -> ReplicaStatus | None:
            found = self.member.tables.get((database, table))
            return None if found is None else status(found, self.member)

        return self.world.faults.read("member.replica_status", effect)

    def sync_replica(self, database: str, table: str, *, timeout_seconds: float) -> bool:
        """Drains this replica's pending fetches; a replica that cannot fetch waits out the bound and answers False
        (the fake clock advances by the bound). An absent or non-replicated table is an error, as in ClickHouse."""
        self.world.calls["member.sync_replica"] += 1

        def effect() -> bool:
            found = self.member.tables.get((database, table))
            if found is None or found.replica is None:
                raise UnavailableError("SYSTEM SYNC REPLICA: no such replicated table")
            caught_up = fetch(found)
            if not caught_up:
                self.world.clock.advance(int(timeout_seconds * 1000))
            return caught_up

        return self.world.faults.read("member.sync_replica", effect)


class FakeClusterDDL:
    def __init__(self, world: FakeWorld) -> None:
        self.world = world

    def dispatch(self, inventory: AdmittedInventory, intent: DdlIntent, settings: DispatchSettings) -> DispatchOutcome:
        self.world.calls["ddl.dispatch"] += 1
        world = self.world
        world.dispatched.append(settings)
        correlation_token, query_digest = settings.correlation_token, settings.query_digest

        def enqueue() -> FakeQueueEntry:
            entry = FakeQueueEntry(
                name=f"query-{len(world.queue):010d}",
                token=correlation_token,
                query_digest=query_digest,
                intent=intent,
                hosts={member.member_id: (HostDdlState.INACTIVE, None) for member in world.members},
            )
            world.queue.append(entry)
            for member in world.members:
                world._run_worker(member)
            return entry

        def effect() -> DispatchOutcome:
            pinned = settings.session_id
            if pinned is not None and world.coordinator_sessions.get(pinned) != world.coordinator_server:
                raise MutationRejectedError("Code 372: session not found on the server reached (refused unrun)")
            if world.coordinator_stalled:
                world.held.append((world.coordinator_server, enqueue))
                raise OutcomeUnknownError("the coordinator did not answer within the send/receive timeout")
            entry = enqueue()
            finished = tuple(mid for mid, (state, code) in entry.hosts.items() if state is HostDdlState.FINISHED)
            failed = tuple(mid for mid, (_, code) in entry.hosts.items() if code)
            if failed:
                # distributed_ddl_output_mode=throw: the initiator raises a host's error; other hosts may have applied
                raise OutcomeUnknownError("a host reported an error (throw mode)")
            return DispatchOutcome(
                entry=entry.name, finished=finished, failed=failed, timed_out=len(finished) < len(entry.hosts)
            )

        return world.faults.mutation("ddl.dispatch", effect)

    def queue_status(self, inventory: AdmittedInventory, correlation_token: str) -> QueueEntry | None:
        self.world.calls["ddl.queue_status"] += 1

        def effect() -> QueueEntry | None:
            for entry in self.world.queue:
                if entry.token == correlation_token:
                    hosts = tuple(
                        QueueHost(member_id=mid, state=state, exception_code=code)
                        for mid, (state, code) in sorted(entry.hosts.items())
                    )
                    return QueueEntry(entry=entry.name, correlation_token=entry.token, hosts=hosts)
            return None

        return self.world.faults.read("ddl.queue_status", effect)

    def server_identity(self, session_id: str | None = None) -> ServerIdentity:
        self.world.calls["ddl.server_identity"] += 1
        world = self.world

        def effect() -> ServerIdentity:
            if session_id is not None:
                world.coordinator_sessions[session_id] = world.coordinator_server
            return ServerIdentity(name=world.coordinator_server, started_at_ms=world.coordinator_started_at_ms)

        return world.faults.read("ddl.server_identity", effect)


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
            content_digest_version=CURRENT_CONTENT_DIGEST,
        )
        self.world.artifacts[receipt.sha256] = FakeArtifact(receipt, data, self.rows)
        return receipt
