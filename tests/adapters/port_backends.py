"""The two implementations the publication port contract suite runs against: the in-memory fakes and the real
adapters on the embedded cluster (real ClickHouse engines behind HTTP, emulated ON CLUSTER queue and, on a cluster
started with ``internal_replication=True``, emulated ``Replicated*MergeTree`` replication between the engines).

Each backend offers the same small surface: the port objects, the admitted inventory (in the mode its cluster
reports), a way to seal an artifact from Python rows (the fake keeps the rows; the real backend extracts them with a
source query and the real artifact store), a way to lose the response of the next mutation of one kind, and a way to
pause one member's DDL worker or its replication fetches (fault injection of each world).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, Protocol

from airflow.sdk import ObjectStoragePath

from airflow_provider_dpone.adapters.clickhouse.adapter_set import PublicationAdapters, adapters_for
from airflow_provider_dpone.adapters.clickhouse.clients import Purpose, build_client, close_client
from airflow_provider_dpone.adapters.clickhouse.connection import ResolvedConnection
from airflow_provider_dpone.adapters.clickhouse.literals import string_literal
from airflow_provider_dpone.adapters.storage.artifact_store import ObjectStorageArtifactStore
from airflow_provider_dpone.contracts.authority_row import AUTHORITY_COLUMNS, AUTHORITY_TABLE
from airflow_provider_dpone.contracts.connection import ClickHouseConnectionOptions
from airflow_provider_dpone.contracts.inventory import AdmittedInventory
from airflow_provider_dpone.contracts.receipts import ArtifactReceipt
from airflow_provider_dpone.embedded.store import Store
from airflow_provider_dpone.protocol.context import PublicationPorts
from airflow_provider_dpone.protocol.runtime_admission import admit_inventory
from tests.fakes.publication import FakeWorld, FaultKind

Row = tuple[object, ...]
LossPoint = Literal["authority", "create", "load", "drop", "ddl"]


class PortBackend(Protocol):
    name: str
    cluster: str
    database: str
    ports: PublicationPorts
    inventory: AdmittedInventory

    def seal(self, columns: Sequence[tuple[str, str]], rows: Sequence[Row]) -> ArtifactReceipt: ...

    def lose_next_response(self, point: LossPoint, member_id: str | None = None) -> None: ...

    def pause(self, member_id: str) -> None:
        """The member's DDL worker stops taking queue entries (a host that is down for the queue)."""
        ...

    def resume(self, member_id: str) -> None: ...

    def pause_replication(self, member_id: str) -> None:
        """The member's replicas fetch nothing (internal mode): its ``SYSTEM SYNC REPLICA`` waits out its bound."""
        ...

    def resume_replication(self, member_id: str) -> None: ...

    def close(self) -> None: ...


class FakeBackend:
    name = "fake"

    def __init__(self, members: int = 2, *, internal_replication: bool = False) -> None:
        self.world = FakeWorld(members=members, internal_replication=internal_replication)
        self.cluster = self.world.cluster
        self.database = self.world.database
        self.ports = self.world.ports()
        mode = "internal" if internal_replication else "external"
        self.inventory = admit_inventory(self.ports.catalog.inventory(self.cluster), cluster=self.cluster, mode=mode)

    def seal(self, columns: Sequence[tuple[str, str]], rows: Sequence[Row]) -> ArtifactReceipt:
        return self.world.source(columns, rows).seal()

    def lose_next_response(self, point: LossPoint, member_id: str | None = None) -> None:
        faults = self.world.faults
        faults.schedule([(faults.counter, FaultKind.LOSE_RESPONSE)])

    def pause(self, member_id: str) -> None:
        self.world.member(member_id).paused = True

    def resume(self, member_id: str) -> None:
        self.world.resume(self.world.member(member_id))

    def pause_replication(self, member_id: str) -> None:
        self.world.member(member_id).fetch_paused = True

    def resume_replication(self, member_id: str) -> None:
        self.world.member(member_id).fetch_paused = False

    def close(self) -> None:
        return None


def _value(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError("test rows hold int, str or None")
    return str(value) if isinstance(value, int) else string_literal(value)


def values_query(columns: Sequence[tuple[str, str]], rows: Sequence[Row]) -> str:
    """A source query returning exactly ``rows`` with exactly ``columns`` (names and types)."""
    structure = string_literal(", ".join(f"{name} {type_}" for name, type_ in columns))
    body = ", ".join("(" + ", ".join(_value(value) for value in row) + ")" for row in rows)
    if not rows:
        body = "(" + ", ".join("NULL" if "Nullable" in type_ else "0" for _, type_ in columns) + ")"
    names = ", ".join(f"`{name}`" for name, _ in columns)
    return f"SELECT {names} FROM values({structure}, {body})" + ("" if rows else " WHERE 0")


class EmbeddedBackend:
    """The real adapters on a running embedded cluster, in a fresh database with the authority table provisioned."""

    name = "embedded"

    def __init__(self, cluster: Any, database: str, directory: Path, *, ddl_timeout_seconds: int = 2) -> None:
        self.embedded = cluster
        self.cluster = cluster.cluster_name
        self.database = database
        raw = cluster.connection_json(database)
        self.connection = ResolvedConnection(
            host=raw["host"],
            port=int(raw["port"]),
            username=raw["login"],
            password=raw["password"],
            database=database,
            options=ClickHouseConnectionOptions.model_validate(raw["extra"]),
        )
        columns = ", ".join(f"`{name}` {type_}" for name, type_ in AUTHORITY_COLUMNS)
        keeper_path = f"/dpone/contract/{uuid.uuid4().hex}"
        for endpoint in cluster.endpoints:
            client = build_client(self.connection.at(endpoint.host, endpoint.port), Purpose.READ)
            try:
                client.command(
                    f"CREATE TABLE `{database}`.`{AUTHORITY_TABLE}` ({columns})"
                    f" ENGINE = KeeperMap('{keeper_path}') PRIMARY KEY target_key"
                )
            finally:
                close_client(client)
        store = ObjectStorageArtifactStore(ObjectStoragePath(f"file://{directory}/artifacts"))
        self.adapters: PublicationAdapters = adapters_for(
            self.connection, database=database, store=store, ddl_task_timeout_seconds=ddl_timeout_seconds
        )
        self.ports = self.adapters.ports
        mode = "internal" if cluster.internal_replication else "external"
        self.inventory = admit_inventory(self.ports.catalog.inventory(self.cluster), cluster=self.cluster, mode=mode)

    def seal(self, columns: Sequence[tuple[str, str]], rows: Sequence[Row]) -> ArtifactReceipt:
        source = self.adapters.query_source(
            query=values_query(columns, rows), columns=columns, max_source_bytes=1 << 24
        )
        return source.seal()

    def process_of(self, member_id: str) -> str:
        return f"member{self.inventory.member(member_id).replica_num}"

    def lose_next_response(self, point: LossPoint, member_id: str | None = None) -> None:
        faults = self.embedded.faults
        if point == "authority":
            faults.lose_response("coordinator", match=f"^(INSERT INTO|ALTER TABLE) .*{re.escape(AUTHORITY_TABLE)}")
        elif point == "ddl":
            faults.lose_response("coordinator", match="ON CLUSTER")
        else:
            assert member_id is not None
            statement = {"create": "^CREATE TABLE", "load": "^INSERT INTO", "drop": "^DROP TABLE"}[point]
            faults.lose_response(self.process_of(member_id), match=statement)

    def pause(self, member_id: str) -> None:
        self.embedded.faults.pause(self.process_of(member_id))

    def resume(self, member_id: str) -> None:
        self.embedded.faults.resume(self.process_of(member_id))

    def pause_replication(self, member_id: str) -> None:
        replication_fault(self.embedded, self.process_of(member_id), PAUSE_REPLICATION)

    def resume_replication(self, member_id: str) -> None:
        clear_replication_fault(self.embedded, self.process_of(member_id), PAUSE_REPLICATION)

    def close(self) -> None:
        self.adapters.close()


# --- replication faults of the embedded cluster ------------------------------------------------------------------

PAUSE_REPLICATION = "pause_replication"
"""The member's replication worker executes no log entry (its queue grows; ``SYSTEM SYNC REPLICA`` times out)."""
LAG_REPLICATION = "lag_replication"
"""The member's replication worker executes a log entry only once it is ``seconds`` old."""


def replication_fault(cluster: Any, process: str, kind: str, *, seconds: float | None = None) -> None:
    """Arm a replication fault on one member process, in the cluster's shared fault state.

    The embedded replication worker reads these fault kinds on every step, but :class:`Faults` has no method for
    them yet, so they are armed in the same durable state its controls use (``reset()`` disarms them too).
    """
    Store(cluster.directory / "state.sqlite").arm(process, kind, seconds=seconds, count=-1)


def clear_replication_fault(cluster: Any, process: str, kind: str) -> None:
    Store(cluster.directory / "state.sqlite").disarm(process, kind)


def on_every_process(cluster: Any, statement: str) -> None:
    for endpoint in cluster.endpoints:
        client = cluster.client(endpoint)
        try:
            client.command(statement)
        finally:
            client.close()


@contextmanager
def fresh_database_on(cluster: Any) -> Iterator[str]:
    """A new Atomic database on every process of ``cluster`` (one not handed out by the pytest plugin's fixture)."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    on_every_process(cluster, f"CREATE DATABASE `{name}` ENGINE = Atomic")
    try:
        yield name
    finally:
        cluster.faults.reset()
        on_every_process(cluster, f"DROP DATABASE IF EXISTS `{name}` SYNC")
