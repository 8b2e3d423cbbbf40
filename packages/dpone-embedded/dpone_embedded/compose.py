"""Render the real cluster (``docker-compose.yaml`` and ``deploy/``) from the shared topology.

The real thing for a developer's machine or a hosted runner: a three-server ClickHouse Keeper ensemble (Raft), one
shard of ClickHouse servers of the release the embedded cluster embeds, with both cluster definitions
(``internal_replication`` false and true) and what ``Replicated*MergeTree`` needs (Keeper, macros, default replica path
and name, interserver host), and SQL Server 2022 with a one-shot init step (``mssql-init``, profile ``init``: run it
with ``docker compose run --rm mssql-init``) that creates a second database on a ``_UTF8`` collation; images pinned,
ports on loopback only, healthchecks on every long-running service. ``deploy/real-cluster.json`` tells the opt-in real-cluster test suite where the
servers are. Everything here is derived from :data:`~dpone_embedded.topology.TOPOLOGY`, the same
object the embedded cluster renders its configs from.
"""

from __future__ import annotations

import json
from pathlib import Path

from dpone_embedded.topology import (
    CLICKHOUSE_VERSION,
    IMAGES,
    TOPOLOGY,
    ClusterTopology,
    KeeperSlot,
    MemberSlot,
    macros_xml,
    remote_servers_xml,
    replication_xml,
)

HEADER = (
    "# Rendered by `python -m dpone_embedded compose` from packages/dpone-embedded/dpone_embedded/topology.py."
    "\n# Do not edit by hand: tests/embedded/test_compose.py fails when these files and the topology drift apart.\n"
)
XML_HEADER = (
    "<!-- Rendered by `python -m dpone_embedded compose` from packages/dpone-embedded/dpone_embedded/"
    "topology.py; do not edit. -->\n"
)
NATIVE_PORT = 9000
HTTP_PORT = 8123
KEEPER_PORT = 9181
RAFT_PORT = 9234
MSSQL_PASSWORD = "${DPONE_MSSQL_SA_PASSWORD:-Dpone-Local-2022}"  # noqa: S105 - a compose variable, local default
"""Compose interpolation: the SA password from the environment, else the local throwaway default."""


def _server_xml(topology: ClusterTopology, slot: MemberSlot, members: int) -> str:
    replicas = [(other.name, NATIVE_PORT) for other in topology.slots(members)]
    return XML_HEADER + "\n".join(
        [
            "<clickhouse>",
            f"    <display_name>{slot.name}</display_name>",
            "    <listen_host>0.0.0.0</listen_host>",
            f"    <interserver_http_host>{slot.name}</interserver_http_host>",
            remote_servers_xml(topology, replicas),
            macros_xml(topology, topology.external_cluster, slot),
            replication_xml(topology),
            "    <zookeeper>",
            *(
                f"        <node><host>{keeper.name}</host><port>{KEEPER_PORT}</port></node>"
                for keeper in topology.keeper_slots()
            ),
            "    </zookeeper>",
            f"    <keeper_map_path_prefix>{topology.keeper_map_path_prefix}</keeper_map_path_prefix>",
            "    <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>",
            "</clickhouse>",
            "",
        ]
    )


def _keeper_xml(topology: ClusterTopology, keeper: KeeperSlot) -> str:
    """One Keeper server: its own ``server_id`` and the whole ensemble in ``raft_configuration``."""
    return XML_HEADER + "\n".join(
        [
            "<clickhouse>",
            "    <listen_host>0.0.0.0</listen_host>",
            "    <logger><level>information</level><console>1</console></logger>",
            "    <keeper_server>",
            f"        <tcp_port>{KEEPER_PORT}</tcp_port>",
            f"        <server_id>{keeper.server_id}</server_id>",
            "        <log_storage_path>/var/lib/clickhouse/coordination/log</log_storage_path>",
            "        <snapshot_storage_path>/var/lib/clickhouse/coordination/snapshots</snapshot_storage_path>",
            "        <coordination_settings>",
            "            <operation_timeout_ms>10000</operation_timeout_ms>",
            "            <session_timeout_ms>30000</session_timeout_ms>",
            "        </coordination_settings>",
            "        <raft_configuration>",
            *(
                f"            <server><id>{other.server_id}</id><hostname>{other.name}</hostname>"
                f"<port>{RAFT_PORT}</port></server>"
                for other in topology.keeper_slots()
            ),
            "        </raft_configuration>",
            "    </keeper_server>",
            "</clickhouse>",
            "",
        ]
    )


def _users_xml(topology: ClusterTopology) -> str:
    return XML_HEADER + "\n".join(
        [
            "<clickhouse>",
            "    <users>",
            f"        <{topology.user}>",
            "            <password></password>",
            '            <networks replace="replace"><ip>::/0</ip></networks>',
            "            <access_management>1</access_management>",
            f"        </{topology.user}>",
            "    </users>",
            "</clickhouse>",
            "",
        ]
    )


def _healthcheck(test: str, interval: str = "3s") -> list[str]:
    return [
        "    healthcheck:",
        f"      test: {test}",
        f"      interval: {interval}",
        "      timeout: 5s",
        "      retries: 40",
    ]


def _compose_yaml(topology: ClusterTopology, members: int) -> str:
    lines = [HEADER.rstrip("\n"), "name: dpone", "services:"]
    keepers = topology.keeper_slots()
    for keeper in keepers:
        host_port = topology.compose_keeper_port + keeper.server_id - 1
        lines += [
            f"  {keeper.name}:",
            f"    image: {IMAGES['clickhouse']}",
            f"    hostname: {keeper.name}",
            '    command: ["clickhouse", "keeper", "--config-file=/etc/clickhouse-keeper/keeper.xml"]',
            "    volumes:",
            f"      - ./deploy/clickhouse/{keeper.name}.xml:/etc/clickhouse-keeper/keeper.xml:ro",
            "    ports:",
            f'      - "127.0.0.1:{host_port}:{KEEPER_PORT}"',
            # healthy once the ensemble has a leader: a read needs a quorum-connected server
            *_healthcheck(
                f'["CMD", "clickhouse", "keeper-client", "--host", "127.0.0.1", "--port", "{KEEPER_PORT}",'
                ' "--query", "ls /"]'
            ),
        ]
    for slot in topology.slots(members):
        host_port = topology.compose_http_port_base + slot.replica_num - 1
        lines += [
            f"  {slot.name}:",
            f"    image: {IMAGES['clickhouse']}",
            f"    hostname: {slot.name}",
            "    environment:",
            '      CLICKHOUSE_SKIP_USER_SETUP: "1"',
            "    volumes:",
            f"      - ./deploy/clickhouse/{slot.name}.xml:/etc/clickhouse-server/config.d/dpone.xml:ro",
            "      - ./deploy/clickhouse/users.xml:/etc/clickhouse-server/users.d/dpone.xml:ro",
            "    ports:",
            f'      - "127.0.0.1:{host_port}:{HTTP_PORT}"',
            "    depends_on:",
            *(line for keeper in keepers for line in (f"      {keeper.name}:", "        condition: service_healthy")),
            *_healthcheck('["CMD", "clickhouse", "client", "--query", "SELECT 1"]'),
        ]
    sqlcmd = "/opt/mssql-tools18/bin/sqlcmd"
    database, collation = topology.mssql_utf8_database, topology.mssql_utf8_collation
    create = f"IF DB_ID(N'{database}') IS NULL CREATE DATABASE [{database}] COLLATE {collation}"
    lines += [
        "  mssql:",
        f"    image: {IMAGES['mssql']}",
        "    hostname: mssql",
        "    environment:",
        '      ACCEPT_EULA: "Y"',
        f"      MSSQL_SA_PASSWORD: {MSSQL_PASSWORD}",
        "    ports:",
        f'      - "127.0.0.1:{topology.compose_mssql_port}:1433"',
        *_healthcheck(
            f'["CMD-SHELL", "{sqlcmd} -C -S localhost -U sa -P \\"$$MSSQL_SA_PASSWORD\\"'
            ' -Q \\"SELECT 1\\" -b -o /dev/null"]',
            interval="5s",
        ),
        # one-shot (profile init, so `up --wait` never waits on a container that exits): `docker compose run --rm
        # mssql-init` creates the second database on a _UTF8 collation, idempotently
        "  mssql-init:",
        f"    image: {IMAGES['mssql']}",
        '    profiles: ["init"]',
        '    restart: "no"',
        "    depends_on:",
        "      mssql:",
        "        condition: service_healthy",
        f'    entrypoint: ["{sqlcmd}"]',
        f'    command: ["-C", "-S", "mssql", "-U", "sa", "-P", "{MSSQL_PASSWORD}", "-l", "30", "-b", "-Q", "{create}"]',
        "",
    ]
    return "\n".join(lines)


def _real_cluster_json(topology: ClusterTopology, members: int) -> str:
    slots = topology.slots(members)
    description = {
        "clickhouse_version": CLICKHOUSE_VERSION,
        "cluster": topology.external_cluster,
        "internal_cluster": topology.internal_cluster,
        "coordinator": slots[0].name,
        "members": [
            {
                "name": slot.name,
                "host": "127.0.0.1",
                "port": topology.compose_http_port_base + slot.replica_num - 1,
                "host_name": slot.name,
                "native_port": NATIVE_PORT,
                "shard_num": slot.shard_num,
                "replica_num": slot.replica_num,
            }
            for slot in slots
        ],
        "keepers": [
            {"name": keeper.name, "host": "127.0.0.1", "port": topology.compose_keeper_port + keeper.server_id - 1}
            for keeper in topology.keeper_slots()
        ],
        "mssql": {
            "host": "127.0.0.1",
            "port": topology.compose_mssql_port,
            "user": "sa",
            "utf8_database": topology.mssql_utf8_database,
            "utf8_collation": topology.mssql_utf8_collation,
        },
    }
    return json.dumps(description, indent=2) + "\n"


def render(topology: ClusterTopology = TOPOLOGY, members: int | None = None) -> dict[str, str]:
    """Every rendered file, by path relative to the repository root."""
    count = members or topology.default_members
    files = {
        "docker-compose.yaml": _compose_yaml(topology, count),
        "deploy/clickhouse/users.xml": _users_xml(topology),
        "deploy/real-cluster.json": _real_cluster_json(topology, count),
    }
    for keeper in topology.keeper_slots():
        files[f"deploy/clickhouse/{keeper.name}.xml"] = _keeper_xml(topology, keeper)
    for slot in topology.slots(count):
        files[f"deploy/clickhouse/{slot.name}.xml"] = _server_xml(topology, slot, count)
    return files


def write(out: Path, *, check: bool = False) -> list[str]:
    """Write the rendering under ``out``; with ``check``, write nothing and return the paths that differ."""
    differences = []
    for relative, text in render().items():
        path = Path(out) / relative
        if check:
            if not path.exists() or path.read_text() != text:
                differences.append(relative)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return differences
