"""Ports of the cluster route: publication (both replication modes) and the quality-replay acceptance reader.

The ports speak in *intents* and *observations*, never SQL: "create this table with this exact UUID", "exchange these
two tables on the cluster", "what does this member hold under this name". The ClickHouse adapters (``cluster/clickhouse/``)
render the SQL; the in-memory fakes (``tests/support/fakes/``) implement the same contracts for the fault simulation, and both
pass the contract suites (``pytest -m contract``).

Failure contract shared by every mutating method (each is one-shot: no retry, no reconnect replay, no async insert),
with the outcomes of :mod:`airflow_provider_dpone.core.errors`:

* returns normally        -> the effect happened (acknowledged);
* ``MutationRejectedError`` / ``AuthorityConflictError`` -> the server refused; no effect;
* ``OutcomeUnknownError`` -> the request may or may not have taken effect (lost response, timeout, broken
  connection). The caller resolves it by *observation*, never by repeating the mutation.

Read methods raise ``UnavailableError`` when they cannot answer; a read has no effect to be unsure about. The
acceptance reader also raises :class:`ReadIncompleteError`: the read was asked but did not end in one complete answer
within the budget (timeout, cancellation, a crashed worker, a partial, malformed or late answer, a missing alias).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from airflow_provider_dpone.cluster.values.authority.generation import ServerName
from airflow_provider_dpone.cluster.values.authority.row import AuthorityRow, VersionedAuthorityRow
from airflow_provider_dpone.cluster.values.inventory import AdmittedInventory, AdmittedMember, InventoryRow, MemberFacts
from airflow_provider_dpone.cluster.values.part_digests import MAX_PART_DIGESTS, PartDigest
from airflow_provider_dpone.cluster.values.quality_read import Observation, TargetReadPlan
from airflow_provider_dpone.cluster.values.receipts import CURRENT_CONTENT_DIGEST, ArtifactReceipt, ContentDigestVersion
from airflow_provider_dpone.core.canonical import Hex64, MemberId, NonNegative, UuidText

_CLOSED = ConfigDict(frozen=True, extra="forbid")


# --- values -------------------------------------------------------------------------------------------------------


class ColumnSpec(BaseModel):
    model_config = _CLOSED

    name: StrictStr
    type: StrictStr


class TableSpec(BaseModel):
    """The physical definition a candidate is created with (validated names; the adapter renders and quotes).

    ``engine`` is a bare engine name (``MergeTree``, ``ReplacingMergeTree``, ...) exactly as ``system.tables.engine``
    reports it, so a created candidate can be recognized by observation.
    """

    model_config = _CLOSED

    columns: tuple[ColumnSpec, ...] = Field(min_length=1)
    engine: StrictStr = "MergeTree"
    order_by: tuple[StrictStr, ...] = ()
    partition_by: StrictStr | None = None
    """The manifest's partition key (a column or an allowed date function of one), rendered by the adapter."""

    @property
    def schema_pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple((column.name, column.type) for column in self.columns)


class DeclaredTable(BaseModel):
    """What the manifest declares of the target table: engine, sorting key and partition key, as every task of an
    operation knows them. The typed columns are not here: only staging knows them (the source's until an artifact is
    bound, the bound artifact's afterwards), and there they complete the candidate's :class:`TableSpec`."""

    model_config = _CLOSED

    engine: StrictStr = "MergeTree"
    order_by: tuple[StrictStr, ...] = ()
    partition_by: StrictStr | None = None


@dataclass(frozen=True)
class TableRead:
    """What one observation of a member's table asks for: ``database.table``; its content digest only when
    ``with_content``, computed with the function of ``digest_version`` (the one the record's artifact receipt names);
    its parts digest when ``with_content`` or ``with_parts``. ``known_parts`` are facts recorded earlier with the same
    digest version: an active part among them (same name and checksum) is not read again."""

    database: str
    table: str
    with_content: bool
    with_parts: bool = False
    digest_version: ContentDigestVersion = CURRENT_CONTENT_DIGEST
    known_parts: tuple[PartDigest, ...] = ()


class TableObservation(BaseModel):
    """What one member holds under one name: physical UUID, engine, ordered schema, and (if asked) content.

    ``content_digest`` is the canonical typed multiset digest computed by the server over all rows (the same function,
    by ``digest_version``, that produced the artifact receipt's ``content_digest``); rows never travel to the worker. ``parts_digest``
    fingerprints the table's active parts (names and the server's checksums of their files), read *before* the
    content in the same statement: while it is unchanged, no row was added, removed or rewritten since.

    With content, ``part_digests`` are the facts of every active part the digest was summed from (at most
    :data:`~airflow_provider_dpone.cluster.values.part_digests.MAX_PART_DIGESTS`; ``None`` above the bound or for an
    engine without parts) and ``parts_read`` how many parts' rows were read for it (the others were known).
    """

    model_config = _CLOSED

    exists: StrictBool
    uuid: UuidText | None = None
    engine: StrictStr | None = None
    columns: tuple[tuple[str, str], ...] = ()
    row_count: NonNegative | None = None
    content_digest: Hex64 | None = None
    parts_digest: Hex64 | None = None
    part_digests: tuple[PartDigest, ...] | None = Field(default=None, max_length=MAX_PART_DIGESTS)
    parts_read: NonNegative | None = None

    @classmethod
    def absent(cls) -> TableObservation:
        return cls(exists=False)


class ExchangeTables(BaseModel):
    """``EXCHANGE TABLES left AND right ON CLUSTER``: both names keep existing, their UUIDs swap on every member."""

    model_config = _CLOSED

    kind: Literal["exchange"] = "exchange"
    cluster: StrictStr
    database: StrictStr
    left: StrictStr
    right: StrictStr


class RenameTable(BaseModel):
    """``RENAME TABLE source TO target ON CLUSTER``: the UUID moves to the new name on every member."""

    model_config = _CLOSED

    kind: Literal["rename"] = "rename"
    cluster: StrictStr
    database: StrictStr
    source: StrictStr
    target: StrictStr


class DropTable(BaseModel):
    """``DROP TABLE name ON CLUSTER ... SYNC``: the protocol proves beforehand which UUID each member holds there."""

    model_config = _CLOSED

    kind: Literal["drop"] = "drop"
    cluster: StrictStr
    database: StrictStr
    table: StrictStr


class CreateReplicatedTable(BaseModel):
    """``CREATE TABLE db.table UUID 'uuid' ON CLUSTER c (...) ENGINE = <spec.engine> ORDER BY ...`` (internal mode).

    ``spec.engine`` is a ``Replicated*MergeTree`` name and is rendered without arguments, so the server's default
    replica path (``/clickhouse/tables/{uuid}/{shard}``) and replica name (``{replica}``) apply: with the one persisted
    UUID on every host, every replica of the shard shares one Keeper path, as ClickHouse does for ``ON CLUSTER`` in an
    Atomic database. Never ``IF NOT EXISTS``: a taken name fails on that host and shows in the queue entry.
    """

    model_config = _CLOSED

    kind: Literal["create"] = "create"
    cluster: StrictStr
    database: StrictStr
    table: StrictStr
    uuid: UuidText
    spec: TableSpec


DdlIntent = ExchangeTables | RenameTable | DropTable | CreateReplicatedTable


class DispatchSettings(BaseModel):
    """The settings every ON CLUSTER dispatch carries; fixed values are typed so an adapter cannot weaken them.

    ``log_comment`` is canonical JSON binding the correlation token, epoch and operation prefix, so the queue entry and
    ``system.query_log`` rows of this dispatch are attributable without any host, SQL value or credential.
    """

    model_config = _CLOSED

    correlation_token: StrictStr = Field(pattern=r"^[0-9a-f]{32}$")
    query_digest: Hex64
    log_comment: StrictStr
    session_id: StrictStr | None = Field(default=None, pattern=r"^dpone-[0-9a-f]{32}$")
    """The session a :meth:`ClusterDDL.server_identity` read opened: the dispatch requires it (``session_check``),
    so it runs on the server the permit names or is refused before it runs. The protocol always sets it (every
    permit is pinned); ``None`` is a sessionless dispatch, used only by the port's own contract tests."""
    distributed_ddl_output_mode: Literal["throw"] = "throw"
    skip_unavailable_shards: Literal[0] = 0


class ServerIdentity(BaseModel):
    """The server that answered a read: its name and a lower bound of its last start (ms, its own clock)."""

    model_config = _CLOSED

    name: ServerName
    started_at_ms: StrictInt


class DispatchOutcome(BaseModel):
    """What the initiator answered (``distributed_ddl_output_mode=throw``). A hint only: decisions come from the queue
    entry and from physical observation of every member."""

    model_config = _CLOSED

    entry: StrictStr | None = None
    finished: tuple[MemberId, ...] = ()
    failed: tuple[MemberId, ...] = ()
    timed_out: StrictBool = False


class HostDdlState(StrEnum):
    """Per-host status of a distributed DDL queue entry (``system.distributed_ddl_queue.status``)."""

    INACTIVE = "Inactive"
    ACTIVE = "Active"
    FINISHED = "Finished"
    REMOVING = "Removing"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class QueueHost:
    """One host's row of a distributed DDL queue entry (``system.distributed_ddl_queue``). Its endpoint stays in
    memory (never in ``repr``); ``member_id`` is empty until :meth:`QueueEntry.bound` maps the endpoint to a member."""

    state: HostDdlState
    exception_code: int | None = None
    host: str = field(default="", repr=False)
    port: int = field(default=0, repr=False)
    member_id: str = ""

    @property
    def finished(self) -> bool:
        return self.state is HostDdlState.FINISHED

    @property
    def failed(self) -> bool:
        return self.finished and bool(self.exception_code)

    @property
    def succeeded(self) -> bool:
        return self.finished and not self.exception_code


@dataclass(frozen=True)
class QueueEntry:
    """One queue entry, with one row per host. As the protocol reads it (:meth:`bound`), it carries the correlation
    token it was found by and its hosts mapped to member ids, in member order."""

    entry: str
    hosts: tuple[QueueHost, ...]
    correlation_token: str = ""

    @property
    def finished(self) -> int:
        return sum(host.finished for host in self.hosts)

    @property
    def failed(self) -> int:
        return sum(host.failed for host in self.hosts)

    def bound(self, correlation_token: str, members: Mapping[tuple[str, int], str]) -> QueueEntry:
        """The entry with hosts mapped to member ids by ``members`` (lower-case host name and port), in member order;
        a host outside ``members`` is left out, which the protocol reads as missing evidence."""
        hosts = [
            QueueHost(state=host.state, exception_code=host.exception_code, member_id=member)
            for host in self.hosts
            if (member := members.get((host.host.lower(), host.port))) is not None
        ]
        hosts.sort(key=lambda host: host.member_id)
        return QueueEntry(entry=self.entry, hosts=tuple(hosts), correlation_token=correlation_token)


class ReplicaStatus(BaseModel):
    """One replica's ``system.replicas`` row for one table: what bounded convergence waits on.

    ``log_pointer`` is the next shared-log entry this replica will read and ``log_max_index`` the newest entry's index
    (both 0 while the log is still empty), so these counters alone cannot tell "caught up" from "nothing logged yet":
    convergence is decided by ``SYSTEM SYNC REPLICA`` and the content digests. ``is_readonly`` means the replica lost
    Keeper and cannot fetch.
    """

    model_config = _CLOSED

    zookeeper_path: StrictStr
    replica_name: StrictStr
    is_readonly: StrictBool
    queue_size: NonNegative
    inserts_in_queue: NonNegative
    log_max_index: NonNegative
    log_pointer: NonNegative
    total_replicas: NonNegative
    active_replicas: NonNegative


# --- ports --------------------------------------------------------------------------------------------------------


class AuthorityStore(Protocol):
    """The KeeperMap authority table (strict mode). Writes are one-shot; versions are KeeperMap ``_version``."""

    def read(self, target_key: str) -> VersionedAuthorityRow | None:
        """The row and its version, or ``None``. Raises :class:`UnavailableError`."""
        ...

    def create(self, row: AuthorityRow) -> None:
        """Strict insert: returns only when the key was created holding ``row`` at version 0. Raises
        :class:`AuthorityConflictError` if the key exists."""
        ...

    def compare_and_set(self, row: AuthorityRow, expected_version: int) -> None:
        """Replace the row iff its version is ``expected_version``: returns only after a read-back showed exactly
        ``row`` at ``expected_version + 1`` (the caller makes no read of its own). :class:`ReadBackOlderError` (an
        :class:`OutcomeUnknownError`) when the read-back was older than the write (a lagging Keeper server answered
        it): the caller reads again within its bound, judging each read with
        :func:`~airflow_provider_dpone.cluster.values.authority.row.judge_read_back`, and never repeats the write."""
        ...


class ClusterCatalog(Protocol):
    """Topology and catalog facts (read-only)."""

    def inventory(self, cluster: str) -> tuple[InventoryRow, ...]:
        """Every ``system.clusters`` row of the cluster (sorted by shard, replica), through the coordinator connection
        the ``ON CLUSTER`` dispatch uses, each with the ``distributed_ddl_entry_format_version`` that connection's
        session has there (read by the same request)."""
        ...

    def admission_facts(self, member: AdmittedMember, cluster: str, database: str, table: str) -> MemberFacts:
        """Through the member's own direct connection, in one request (admission runs at every entry point): its
        database's engine, one table's engine, key and columns, and the positions its own ``system.clusters``
        marks local for ``cluster``."""
        ...


class ArtifactHandle(Protocol):
    """An opened sealed artifact, streamed as raw bytes in large chunks. The bytes are verified against the receipt
    while they stream: the final chunk comes only after the SHA-256 is proven, else :class:`ArtifactInvalidError`."""

    @property
    def receipt(self) -> ArtifactReceipt: ...

    def chunks(self) -> Iterator[bytes]: ...


class MemberSession(Protocol):
    """A direct connection to one member (no load balancer, no retries, no async insert)."""

    def observe_table(self, read: TableRead) -> TableObservation:
        """What the member holds under ``read.database``.``read.table``, with what ``read`` asks for
        (:class:`TableRead`). With the parts of a MergeTree table and no content, the row count is
        the rows its active parts hold as listed with them (a lightweight delete's masked rows included).

        The digest is exactly the one a read of every row would give, of one moment's part set, even when known parts
        are not read again (parts replaced while it was read: read again, at worst the whole table)."""
        ...

    def table_uuids(self, database: str, tables: tuple[str, ...]) -> tuple[str | None, ...]:
        """The UUID each name holds (``None`` when free), all read in one consistent snapshot of the database.

        One read, not one per name: an ``EXCHANGE``/``RENAME`` applied between two separate reads would show a torn
        pair (the same UUID under both names, or under neither) that no single moment ever had.
        """
        ...

    def create_table(self, database: str, table: str, uuid: str, spec: TableSpec) -> None:
        """``CREATE TABLE ... UUID uuid`` (never ``IF NOT EXISTS``: a taken name is :class:`MutationRejectedError`)."""
        ...

    def load(
        self, database: str, table: str, uuid: str, artifact: ArtifactHandle, *, query_id: str, dedup_token: str
    ) -> None:
        """One INSERT of the whole artifact into the table, refused unless the name still holds ``uuid``.

        :class:`ArtifactInvalidError` when the artifact's bytes failed verification while they were sent: the INSERT
        never completed, but the member may hold part of it (the caller stops; a retry observes and rebuilds)."""
        ...

    def drop_table(self, database: str, table: str, uuid: str) -> None:
        """Drop the table iff it holds exactly ``uuid`` (``SYNC``); otherwise :class:`MutationRejectedError`."""
        ...

    def exchange_tables(self, database: str, left: str, right: str) -> None:
        """``EXCHANGE TABLES`` of two tables on this member alone (the fence's probe of scratch tables only).
        :class:`ExchangeUnsupportedError` when the member's OS or filesystem cannot exchange atomically."""
        ...

    def replica_status(self, database: str, table: str) -> ReplicaStatus | None:
        """This member's ``system.replicas`` row for the table, or ``None`` (absent or not replicated)."""
        ...

    def sync_replica(self, database: str, table: str, *, timeout_seconds: float) -> bool:
        """``SYSTEM SYNC REPLICA`` bounded by ``timeout_seconds``: ``True`` once this replica has fetched every entry
        of the shared log as of the call, ``False`` when the bound elapsed first (ClickHouse Code 159). Not a mutation
        (it only waits), so it may be repeated; :class:`UnavailableError` when it cannot be asked, its subclass
        :class:`AccessDeniedError` when the account lacks the grant (Code 497)."""
        ...


class MemberSessions(Protocol):
    """Opens member sessions from the resolved coordinator connection and an admitted member's endpoint."""

    def session(self, member: AdmittedMember) -> MemberSession: ...


class ClusterDDL(Protocol):
    """One-shot ``ON CLUSTER`` dispatch and read-only queue observation.

    ``dispatch`` applies :class:`DispatchSettings` exactly (``distributed_ddl_output_mode=throw``,
    ``skip_unavailable_shards=0``, ``log_comment``) and also carries the correlation token in the query text, so the one
    queue entry can be found again; it raises :class:`OutcomeUnknownError` when the initiator's answer is lost.
    """

    def dispatch(
        self, inventory: AdmittedInventory, intent: DdlIntent, settings: DispatchSettings
    ) -> DispatchOutcome: ...

    def queue_status(self, inventory: AdmittedInventory, correlation_token: str) -> QueueEntry | None:
        """The one entry carrying ``correlation_token`` or ``None``; raises :class:`UnavailableError`."""
        ...

    def server_identity(self, session_id: str | None = None) -> ServerIdentity:
        """The coordinator server that answers (``dispatch`` sends to the same endpoint): its name and a lower bound
        of when it last started, so a request it received before then died with the old server. With
        ``session_id`` the read opens that session on the answering server, and a dispatch carrying it runs there or
        nowhere. Raises :class:`UnavailableError`."""
        ...


class ArtifactStore(Protocol):
    """The content-addressed durable artifact store."""

    def open(self, receipt: ArtifactReceipt) -> ArtifactHandle:
        """Reopen by ``receipt.sha256``; :class:`ArtifactInvalidError` when it is missing or of another size (its
        digest may be checked here already, and is at the latest while the handle streams). A store local to one
        machine that lacks it says so instead (``DPONE_ARTIFACT_STORE_NOT_SHARED``)."""
        ...


class ArtifactSource(Protocol):
    """Extraction: produces and seals the artifact. Sealed only while no artifact is bound to the operation."""

    @property
    def columns(self) -> tuple[tuple[str, str], ...]:
        """The typed columns (name, ClickHouse type) the extraction produces: what the sealed artifact's schema must
        be and, until one is bound, what the candidates are created with."""
        ...

    def seal(self) -> ArtifactReceipt: ...


class Entropy(Protocol):
    """Randomness, injected so the simulation is deterministic. Random values are recorded, never derived."""

    def token(self) -> str:
        """32 lower-case hex digits (128 bits)."""
        ...

    def uuid(self) -> str:
        """A random UUID in canonical lower-case text."""
        ...


# --- quality replay: the bounded acceptance reader ----------------------------------------------------------


class ReadIncompleteError(Exception):
    """The bounded read did not end in one complete, well-formed answer within its budget."""


class AcceptanceReader(Protocol):
    """One observation of one exact generation, within a budget that interrupts every read in flight."""

    def observe(self, members: tuple[AdmittedMember, ...], plan: TargetReadPlan, *, budget_ms: int) -> Observation:
        """The facts and counts the plan asks for, answering it exactly (:meth:`Observation.answers`); ``members``
        are the plan's members (:attr:`TargetReadPlan.member_ids`, in order). The counts' generation UUID is read in
        the same statement as the counts; the caller judges every fact."""
        ...
