"""The implementations the publication port contract suite runs against: the in-memory fakes, the real adapters on
the embedded cluster (real ClickHouse engines behind HTTP, emulated ON CLUSTER queue) and, opt-in, the real adapters on
the docker-compose cluster (real ClickHouse servers, real Keeper, real DDLWorker and replication).

Each backend offers the same small surface: the port objects, the admitted inventory, a way to seal an artifact
from Python rows (the fake keeps the rows; the real backends extract them with a source query and the real artifact
store), and a way to lose the response of the next mutation of one kind (fault injection of each world).

The ``real`` backend carries the ``real_cluster`` marker (:data:`BACKENDS`) and skips, with the reason, when the compose
cluster is unreachable. It loses a reply in a relay in front of the server, restarts with ``docker compose restart``;
faults only a double can make (a paused DDL worker while its server answers, a coordinator that holds one request)
skip the ``real`` case and say so.
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal, Protocol

import pytest
from airflow.sdk import ObjectStoragePath

from airflow_provider_dpone.cluster.clickhouse.adapter_set import PublicationAdapters, adapters_for
from airflow_provider_dpone.cluster.clickhouse.artifact_store import ObjectStorageArtifactStore
from airflow_provider_dpone.cluster.clickhouse.literals import string_literal
from airflow_provider_dpone.cluster.clickhouse.member_session import ClickHouseMemberSessions
from airflow_provider_dpone.cluster.protocol.context import PublicationPorts
from airflow_provider_dpone.cluster.protocol.runtime_admission import admit_inventory
from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_COLUMNS, AUTHORITY_TABLE
from airflow_provider_dpone.cluster.values.inventory import AdmittedInventory
from airflow_provider_dpone.cluster.values.receipts import ArtifactReceipt
from airflow_provider_dpone.core.clickhouse.clients import Purpose, build_client, close_client
from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection
from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
from tests.support.fakes import parts
from tests.support.fakes.publication import FakeWorld, FaultKind
from tests.support.fixtures import real_cluster
from tests.support.http_servers import ReplyLoss, relay

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

    def add_column(self, member_id: str, table: str, column: tuple[str, str], default: int) -> None:
        """``ALTER TABLE ... ADD COLUMN <column> DEFAULT <default>`` on the member (a metadata-only alter)."""
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

    def set_ddl_entry_format_version(self, version: int) -> None:
        """From now on the coordinator answers the adapters' requests with this ``distributed_ddl_entry_format_version``
        (the fake's world value; a real server: a setting the coordinator connection sends with every request)."""
        ...

    def close(self) -> None: ...


BACKENDS = ("fake", "embedded", pytest.param("real", marks=pytest.mark.real_cluster))
"""The ``params`` of a contract suite's backend fixture: the same cases on the fakes, the double and the real cluster."""


def open_backend(kind: str, request: Any, directory: Path, *, internal_replication: bool = False) -> PortBackend:
    """The ``fake``, ``embedded`` or ``real`` backend of a contract test (the embedded one from the module's cluster,
    the real one from the compose cluster: skipped, with the reason, when that is unreachable)."""
    if kind == "fake":
        return FakeBackend(internal_replication=internal_replication)
    if kind == "real":
        return RealBackend(directory, internal_replication=internal_replication)
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

    def add_column(self, member_id: str, table: str, column: tuple[str, str], default: int) -> None:
        found = self.world.table(self.world.member(member_id), table)
        assert found is not None
        parts.add_column(found, column, default)

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

    def set_ddl_entry_format_version(self, version: int) -> None:
        self.world.ddl_entry_format_version = version

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

    def add_column(self, member_id: str, table: str, column: tuple[str, str], default: int) -> None:
        name, type_ = column
        self._command(
            member_id, f"ALTER TABLE `{self.database}`.`{table}` ADD COLUMN `{name}` {type_} DEFAULT {default}"
        )

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

    def set_ddl_entry_format_version(self, version: int) -> None:
        for client in (self.adapters.coordinator.reader(), self.adapters.coordinator.mutator()):
            client.set_client_setting("distributed_ddl_entry_format_version", version)

    def now_ms(self) -> int:
        return _wall_ms()

    def close(self) -> None:
        self.adapters.close()


ONLY_THE_DOUBLE = "only the embedded cluster can {what}; a real server has no such control (docs/limitations.md)"


@dataclass(frozen=True)
class _Relayed:
    """The compose cluster as the adapters see it: every server behind its own relay (``coordinator`` and each member
    apart, as the embedded cluster's processes are), in the shape :class:`EmbeddedBackend` provisions from."""

    cluster_name: str
    coordinator: tuple[str, int]
    members: dict[str, tuple[str, int]]
    """member key (``shard:replica``) -> its relay"""
    user: str
    password: str

    @property
    def endpoints(self) -> tuple[Any, ...]:
        return tuple(SimpleNamespace(host=host, port=port) for host, port in self.members.values())

    def connection_json(self, database: str | None = None) -> dict[str, Any]:
        host, port = self.coordinator
        endpoints = {key: f"{relay_host}:{relay_port}" for key, (relay_host, relay_port) in self.members.items()}
        return {
            "conn_type": "dpone_clickhouse",
            "host": host,
            "port": port,
            "login": self.user,
            "password": self.password,
            "schema": database or "",
            "extra": {"member_endpoints": endpoints},
        }


class RealBackend(EmbeddedBackend):
    """The real adapters on the docker-compose cluster, in a fresh database created ``ON CLUSTER`` with the authority
    table provisioned on every server (one Keeper path).

    The adapters reach each server through a transparent loopback relay (``tests/support/http_servers.relay``: bytes,
    status and headers unchanged), which is how a lost reply is made on real servers: the relay reads the server's
    whole answer to the matching statement, then closes the client's connection without it. The other controls are
    the servers' own (``SYSTEM STOP FETCHES``, ``SYSTEM STOP MERGES``) or Docker's (``docker compose restart`` of the
    coordinator); a paused DDL worker and a coordinator holding one request cannot be made and skip the case."""

    name = "real"

    def __init__(self, directory: Path, *, internal_replication: bool = False, ddl_timeout_seconds: int = 10) -> None:
        compose = real_cluster.compose_cluster(internal_replication=internal_replication)
        self.real = compose
        self.losses = {"coordinator": ReplyLoss(), **{m.name: ReplyLoss() for m in compose.members}}
        self._relays = contextlib.ExitStack()
        front = {}
        for name, loss in self.losses.items():
            server = compose.member(name)  # "coordinator" is the first member
            front[name] = self._relays.enter_context(relay((server.host, server.port), loss))
        relayed = _Relayed(
            cluster_name=compose.cluster_name,
            coordinator=("127.0.0.1", front["coordinator"].port),
            members={m.member_key: ("127.0.0.1", front[m.name].port) for m in compose.members},
            user=compose.user,
            password=compose.password,
        )
        database = f"contract_{uuid.uuid4().hex[:12]}"
        try:
            self._admin(f"CREATE DATABASE `{database}` ON CLUSTER `{compose.cluster_name}` ENGINE = Atomic")
            try:
                super().__init__(relayed, database, directory, ddl_timeout_seconds=ddl_timeout_seconds)
            except BaseException:
                self._drop(database)
                raise
        except BaseException:
            self._relays.close()
            raise

    def _admin(self, statement: str) -> None:
        client = self.real.client()
        try:
            client.command(statement)
        finally:
            client.close()

    def _drop(self, database: str) -> None:
        self._admin(f"DROP DATABASE IF EXISTS `{database}` ON CLUSTER `{self.real.cluster_name}` SYNC")

    def lose_next_response(self, point: LossPoint, member_id: str | None = None) -> None:
        if point == "authority":
            self.losses["coordinator"].arm(f"^(INSERT INTO|ALTER TABLE) .*{re.escape(AUTHORITY_TABLE)}")
        elif point == "ddl":
            self.losses["coordinator"].arm("ON CLUSTER")
        else:
            assert member_id is not None
            statement = {"create": "^CREATE TABLE", "load": "^INSERT INTO", "drop": "^DROP TABLE"}[point]
            self.losses[self.process_of(member_id)].arm(statement)

    def pause(self, member_id: str) -> None:
        pytest.skip(
            ONLY_THE_DOUBLE.format(what="pause a member's DDL worker alone")
            + "; `docker compose pause` freezes the whole server, which this case then reads"
        )

    def resume(self, member_id: str) -> None:
        del member_id

    def stop_fetches(self, member_id: str, table: str) -> None:
        self._command(member_id, f"SYSTEM STOP FETCHES `{self.database}`.`{table}`")

    def start_fetches(self, member_id: str, table: str) -> None:
        self._command(member_id, f"SYSTEM START FETCHES `{self.database}`.`{table}`")

    def stall_coordinator(self) -> None:
        pytest.skip(
            ONLY_THE_DOUBLE.format(what="hold one ON CLUSTER request in the coordinator")
            + "; a paused server would also hold the queue reads this case makes meanwhile"
        )

    def release_coordinator(self) -> None:
        return None

    def restart_coordinator(self) -> None:
        real_cluster.restart(self.real, self.real.coordinator)

    def refuse_next_exchange(self, member_id: str) -> None:
        pytest.skip(
            ONLY_THE_DOUBLE.format(what="refuse EXCHANGE on one member")
            + "; a real server refuses it only on a data path without renameat2(RENAME_EXCHANGE)"
        )

    def recreate_coordinator(self, server_uuid: str) -> None:
        pytest.skip(
            ONLY_THE_DOUBLE.format(what="give the coordinator a new serverUUID()")
            + "; a real server takes one only when its data directory's uuid file is lost"
        )

    def close(self) -> None:
        try:
            super().close()
        finally:
            try:
                self._drop(self.database)
            finally:
                self._relays.close()
