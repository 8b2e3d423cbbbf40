"""The two implementations the publication port contract suite runs against: the in-memory fakes and the real
adapters on the embedded cluster (real ClickHouse engines behind HTTP, emulated ON CLUSTER queue).

Each backend offers the same small surface: the port objects, the admitted inventory, a way to seal an artifact
from Python rows (the fake keeps the rows; the real backend extracts them with a source query and the real artifact
store), and a way to lose the response of the next mutation of one kind (fault injection of each world).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from airflow.sdk import ObjectStoragePath

from airflow_provider_dpone.cluster.clickhouse.adapter_set import PublicationAdapters, adapters_for
from airflow_provider_dpone.cluster.clickhouse.artifact_store import ObjectStorageArtifactStore
from airflow_provider_dpone.cluster.clickhouse.member_session import ClickHouseMemberSessions
from airflow_provider_dpone.cluster.protocol.context import PublicationPorts
from airflow_provider_dpone.cluster.protocol.runtime_admission import admit_inventory
from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_COLUMNS, AUTHORITY_TABLE
from airflow_provider_dpone.cluster.values.receipts import ArtifactReceipt
from airflow_provider_dpone.core.clickhouse.clients import Purpose, build_client, close_client
from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection
from airflow_provider_dpone.core.clickhouse.literals import string_literal
from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
from airflow_provider_dpone.core.inventory import AdmittedInventory
from tests.fakes import parts
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

    def refuse_next_exchange(self, member_id: str) -> None:
        """The member's next ``EXCHANGE TABLES`` is refused as on a filesystem without ``RENAME_EXCHANGE`` (Code 1
        ``UNSUPPORTED_METHOD``, ``renameExchange`` in src/Common/renameat2.cpp); nothing changes."""
        ...

    def resume(self, member_id: str) -> None: ...

    def stop_fetches(self, member_id: str, table: str) -> None:
        """The member's replica of ``table`` stops fetching parts from the others (``SYSTEM STOP FETCHES``)."""
        ...

    def start_fetches(self, member_id: str, table: str) -> None: ...

    def stop_merges(self, member_id: str, table: str) -> None:
        """No background merge on the member's ``table`` from now on (the fake never merges by itself)."""
        ...

    def merge(self, member_id: str, table: str) -> None:
        """``OPTIMIZE TABLE ... FINAL`` on the member: its parts become one new part, the rows stay."""
        ...

    def drop_part(self, member_id: str, table: str, index: int) -> None:
        """``ALTER TABLE ... DROP PART`` of the member's ``index``-th active part (by name): its rows leave."""
        ...

    def stall_coordinator(self) -> None:
        """The coordinator keeps the next ON CLUSTER request it receives and queues nothing (a SIGSTOP)."""
        ...

    def release_coordinator(self) -> None:
        """The stalled coordinator wakes up and queues what it held, late."""
        ...

    def restart_coordinator(self) -> None:
        """The coordinator's server restarts now, its Keeper (the authority) living on: what it held dies."""
        ...

    def recreate_coordinator(self, server_uuid: str) -> None:
        """As :meth:`restart_coordinator`, and the server lost its data directory: it answers a new
        ``serverUUID()`` on the same host."""
        ...

    def now_ms(self) -> int:
        """The coordinator's clock."""
        ...

    def close(self) -> None: ...


def open_backend(kind: str, request: Any, directory: Path, *, internal_replication: bool = False) -> PortBackend:
    """The ``fake`` or the ``embedded`` backend of a contract test (the embedded one from the module's cluster)."""
    if kind == "fake":
        return FakeBackend(internal_replication=internal_replication)
    cluster = request.getfixturevalue("embedded_cluster")
    return EmbeddedBackend(cluster, request.getfixturevalue("fresh_database"), directory)


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

    def refuse_next_exchange(self, member_id: str) -> None:
        self.world.member(member_id).no_rename_exchange = True  # for the rest of the test: its filesystem

    def resume(self, member_id: str) -> None:
        self.world.resume(self.world.member(member_id))

    def stop_fetches(self, member_id: str, table: str) -> None:
        self.world.member(member_id).fetch_paused = True

    def start_fetches(self, member_id: str, table: str) -> None:
        self.world.member(member_id).fetch_paused = False

    def stop_merges(self, member_id: str, table: str) -> None:
        del member_id, table

    def merge(self, member_id: str, table: str) -> None:
        found = self.world.table(self.world.member(member_id), table)
        assert found is not None
        found.merges += 1

    def drop_part(self, member_id: str, table: str, index: int) -> None:
        found = self.world.table(self.world.member(member_id), table)
        assert found is not None
        parts.drop_part(found, index)

    def stall_coordinator(self) -> None:
        self.world.stall_coordinator()

    def release_coordinator(self) -> None:
        self.world.resume_coordinator()

    def restart_coordinator(self) -> None:
        self.world.clock.advance(1000)
        self.world.restart_coordinator()

    def recreate_coordinator(self, server_uuid: str) -> None:
        self.world.clock.advance(1000)
        self.world.recreate_coordinator(server_uuid)

    def now_ms(self) -> int:
        return self.world.clock.now_ms()

    def close(self) -> None:
        return None


def _wall_ms() -> int:
    return int(time.time() * 1000)  # the embedded processes share this machine's clock


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
        rows = self.ports.catalog.inventory(self.cluster)
        mode = "internal" if rows and rows[0].internal_replication else "external"
        self.inventory = admit_inventory(rows, cluster=self.cluster, mode=mode)

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

    def refuse_next_exchange(self, member_id: str) -> None:
        self.embedded.faults.fail_next_statement(self.process_of(member_id), 1, match="^EXCHANGE TABLES")

    def resume(self, member_id: str) -> None:
        self.embedded.faults.resume(self.process_of(member_id))

    def stop_fetches(self, member_id: str, table: str) -> None:
        del table  # the embedded cluster pauses a member's whole replication worker
        self.embedded.faults.pause_replication(self.process_of(member_id))

    def start_fetches(self, member_id: str, table: str) -> None:
        del table
        self.embedded.faults.resume_replication(self.process_of(member_id))

    def stop_merges(self, member_id: str, table: str) -> None:
        self._command(member_id, f"SYSTEM STOP MERGES `{self.database}`.`{table}`")

    def merge(self, member_id: str, table: str) -> None:
        name = f"`{self.database}`.`{table}`"
        self._command(member_id, f"SYSTEM START MERGES {name}")
        self._command(member_id, f"OPTIMIZE TABLE {name} FINAL")
        self._command(member_id, f"SYSTEM STOP MERGES {name}")

    def drop_part(self, member_id: str, table: str, index: int) -> None:
        names = self._query(
            member_id,
            f"SELECT name FROM system.parts WHERE database = {string_literal(self.database)}"
            f" AND table = {string_literal(table)} AND active ORDER BY name",
        )
        part = string_literal(str(names[index][0]))
        self._command(member_id, f"ALTER TABLE `{self.database}`.`{table}` DROP PART {part}")

    def _endpoint(self, member_id: str) -> Any:
        sessions = self.ports.sessions
        assert isinstance(sessions, ClickHouseMemberSessions)
        return sessions.endpoints(self.inventory.member(member_id))

    def _command(self, member_id: str, statement: str) -> None:
        self._endpoint(member_id).reader().command(statement, settings={"mutations_sync": 2})

    def _query(self, member_id: str, statement: str) -> list[Any]:
        return list(self._endpoint(member_id).reader().query(statement).result_rows)

    def stall_coordinator(self) -> None:
        self.embedded.faults.hold_ddl("coordinator", match="ON CLUSTER")

    def release_coordinator(self) -> None:
        self.embedded.faults.release_ddl("coordinator")

    def restart_coordinator(self) -> None:
        self.embedded.faults.emulate_restart("coordinator")

    def recreate_coordinator(self, server_uuid: str) -> None:
        self.embedded.faults.emulate_restart("coordinator", new_server_uuid=server_uuid)

    def now_ms(self) -> int:
        return _wall_ms()

    def close(self) -> None:
        self.adapters.close()
