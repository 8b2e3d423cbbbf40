"""The one description of the test cluster's topology, shared by the embedded cluster and the docker-compose files.

The embedded cluster renders its per-process chdb configs from :data:`TOPOLOGY`, and ``deploy/`` plus
``docker-compose.yaml`` are rendered from the same object (``python -m dpone_embedded compose``);
a test compares the checked-in files with a fresh rendering, so the two cannot drift.

Both cluster definitions cover the same servers of one shard: ``external_cluster`` reports
``internal_replication=false`` (independent non-replicated tables, the external publication route) and
``internal_cluster`` reports ``true`` (Replicated tables, the internal route). ``--internal-replication`` only selects
which of the two is *the* cluster a caller is handed.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CLICKHOUSE_VERSION",
    "IMAGES",
    "TOPOLOGY",
    "ClusterTopology",
    "KeeperSlot",
    "MemberSlot",
    "remote_servers_xml",
    "replication_xml",
]


@dataclass(frozen=True)
class MemberSlot:
    """One server of the shard: its numbers as ``system.clusters`` reports them and its replica macro."""

    shard_num: int
    replica_num: int

    @property
    def name(self) -> str:
        """Stable member name: ``member<replica_num>`` (also the compose service suffix)."""
        return f"member{self.replica_num}"

    @property
    def replica_macro(self) -> str:
        return f"r{self.replica_num}"


@dataclass(frozen=True)
class KeeperSlot:
    """One ClickHouse Keeper server of the real cluster's Raft ensemble."""

    server_id: int

    @property
    def name(self) -> str:
        """``keeper<server_id>`` (also the compose service and host name)."""
        return f"keeper{self.server_id}"


@dataclass(frozen=True)
class ClusterTopology:
    external_cluster: str = "dpone_cluster"
    internal_cluster: str = "dpone_cluster_replicated"
    shard_num: int = 1
    default_members: int = 2
    keeper_map_path_prefix: str = "/keeper_map_tables"
    default_replica_path: str = "/clickhouse/tables/{uuid}/{shard}"
    default_replica_name: str = "{replica}"
    """Where a ``Replicated*MergeTree`` without arguments keeps its replica (ClickHouse's defaults, stated)."""
    user: str = "default"
    compose_http_port_base: int = 18123
    """The real cluster publishes member N's HTTP port on ``127.0.0.1:<base + N - 1>`` (docker-compose)."""
    compose_keeper_port: int = 19181
    """Keeper server N's client port is published on ``127.0.0.1:<base + N - 1>``."""
    keepers: int = 3
    """The real cluster's Keeper ensemble: three Raft servers, so one may be lost (quorum two of three)."""
    compose_mssql_port: int = 11433
    mssql_utf8_database: str = "dpone_utf8"
    mssql_utf8_collation: str = "Latin1_General_100_CI_AS_SC_UTF8"
    """The second SQL Server database, created by the compose init step on a ``_UTF8`` collation (SQL Server 2019+):
    the collation the transfer's in-server text digest uses."""

    def cluster_name(self, internal_replication: bool) -> str:
        return self.internal_cluster if internal_replication else self.external_cluster

    def slots(self, members: int) -> tuple[MemberSlot, ...]:
        if members < 2:
            raise ValueError("a cluster needs at least two members")
        return tuple(MemberSlot(self.shard_num, replica) for replica in range(1, members + 1))

    def keeper_slots(self) -> tuple[KeeperSlot, ...]:
        if self.keepers < 3 or self.keepers % 2 == 0:
            raise ValueError("a Keeper ensemble that survives one lost server has an odd number of three or more")
        return tuple(KeeperSlot(server_id) for server_id in range(1, self.keepers + 1))


TOPOLOGY = ClusterTopology()

CLICKHOUSE_VERSION = "26.9"
"""The ClickHouse release the embedded cluster embeds (chdb-core 26.9, ``chdb.engine_version`` 26.9.2.1) and the
real cluster runs: ``tests/embedded/test_compose.py`` checks it against the installed chdb, so the double and the
compose servers cannot move apart unnoticed. The image tag is the release line (``clickhouse-server:<major>.<minor>``,
as the project publishes its tags), which follows that release's latest patch."""

IMAGES = {
    "clickhouse": f"clickhouse/clickhouse-server:{CLICKHOUSE_VERSION}",
    "mssql": "mcr.microsoft.com/mssql/server:2022-CU14-ubuntu-22.04",
}
"""Pinned images of the real cluster (docker-compose); Keeper runs from the ClickHouse image (``clickhouse keeper``),
and the SQL Server init step from the SQL Server image (its ``sqlcmd``)."""


def remote_servers_xml(topology: ClusterTopology, replicas: list[tuple[str, int]], indent: str = "    ") -> str:
    """``<remote_servers>`` with both cluster definitions over the given ``(host, native_port)`` replicas."""
    lines = [f"{indent}<remote_servers>"]
    for name, internal in ((topology.external_cluster, False), (topology.internal_cluster, True)):
        lines.append(f"{indent}    <{name}>")
        lines.append(f"{indent}        <shard>")
        lines.append(f"{indent}            <internal_replication>{str(internal).lower()}</internal_replication>")
        for host, port in replicas:
            lines.append(f"{indent}            <replica><host>{host}</host><port>{port}</port></replica>")
        lines.append(f"{indent}        </shard>")
        lines.append(f"{indent}    </{name}>")
    lines.append(f"{indent}</remote_servers>")
    return "\n".join(lines)


def macros_xml(topology: ClusterTopology, cluster: str, slot: MemberSlot | None, indent: str = "    ") -> str:
    """``<macros>`` for one server (``slot`` is ``None`` for the embedded coordinator, which is no replica)."""
    items = [f"<cluster>{cluster}</cluster>"]
    if slot is not None:
        items += [f"<shard>{slot.shard_num}</shard>", f"<replica>{slot.replica_macro}</replica>"]
    return f"{indent}<macros>{''.join(items)}</macros>"


def replication_xml(topology: ClusterTopology, indent: str = "    ") -> str:
    """``default_replica_path``/``default_replica_name``: a replicated table created without arguments (as the
    internal route creates them, ``ON CLUSTER`` with one UUID) shares one Keeper path on every replica."""
    return (
        f"{indent}<default_replica_path>{topology.default_replica_path}</default_replica_path>\n"
        f"{indent}<default_replica_name>{topology.default_replica_name}</default_replica_name>"
    )
