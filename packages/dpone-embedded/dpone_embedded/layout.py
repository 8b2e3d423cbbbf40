"""What one process of the embedded cluster is: its spec (written as JSON) and its generated chdb config.

The launcher writes one spec per process into the cluster directory; the process reads it at start and again on
every restart, so a restarted member comes back with the same ports, data directory and config.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from dpone_embedded.topology import (
    TOPOLOGY,
    ClusterTopology,
    MemberSlot,
    macros_xml,
    remote_servers_xml,
    replication_xml,
)

HOST = "127.0.0.1"
COORDINATOR = "coordinator"
STATE_DB = "state.sqlite"
CLUSTER_FILE = "cluster.json"
REPLICATION_DIR = "replication"
"""Under the cluster directory: the spooled blocks of replicated inserts (``replication.py``)."""


@dataclass(frozen=True)
class ProcessSpec:
    """Everything a cluster process needs to start (and to restart identically)."""

    name: str
    role: str  # "coordinator" | "member"
    cluster_dir: str
    http_port: int
    native_port: int
    host: str = HOST
    shard_num: int = 0
    replica_num: int = 0
    user: str = "default"
    password: str = ""
    owner_pid: int = 0
    clusters: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    default_cluster: str = ""
    tls_cert_file: str = ""
    """With a certificate (and ``tls_key_file``), a member serves HTTPS only; the coordinator always serves HTTP."""
    tls_key_file: str = ""
    grants: tuple[str, ...] = ()
    """``GRANT`` statements (without ``TO``) the engine's account holds instead of ``access_management``; empty: the
    full account. The engine enforces them (``users_xml``)."""

    @property
    def tls(self) -> bool:
        return bool(self.tls_cert_file)

    @property
    def root(self) -> Path:
        return Path(self.cluster_dir) / self.name

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def config_file(self) -> Path:
        return self.root / "config.xml"

    @property
    def spool_dir(self) -> Path:
        return self.root / "spool"

    @property
    def spec_file(self) -> Path:
        return self.root / "spec.json"

    @property
    def log_file(self) -> Path:
        return self.root / "process.log"

    @property
    def state_db(self) -> Path:
        return Path(self.cluster_dir) / STATE_DB

    @property
    def replication_dir(self) -> Path:
        return Path(self.cluster_dir) / REPLICATION_DIR

    @property
    def host_id(self) -> tuple[str, int]:
        """How ``remote_servers`` and the DDL queue name this process: host and native (TCP) port."""
        return (self.host, self.native_port)

    def write(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.spool_dir.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(render_chdb_config(self))
        temporary = self.spec_file.with_suffix(".tmp")
        temporary.unlink(missing_ok=True)
        # the spec holds the HTTP password: readable by the owner only, from the first byte written
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(json.dumps(asdict(self), indent=2))
        temporary.replace(self.spec_file)

    @classmethod
    def read(cls, path: Path) -> ProcessSpec:
        raw = json.loads(Path(path).read_text())
        raw["clusters"] = {name: [tuple(r) for r in replicas] for name, replicas in raw["clusters"].items()}
        raw["grants"] = tuple(raw.get("grants", ()))
        return cls(**raw)


def users_xml(config_file: Path, grants: tuple[str, ...] = ()) -> str:
    """The engine's ``default`` user: with ``access_management``, as the compose deployment's ``users.xml`` grants,
    or holding exactly ``grants`` (a restricted account, ``EmbeddedCluster.restrict_account``).

    A client must be able to read ``system.row_policies`` to prove which row policies apply to what it reads (the
    native transfer source refuses a table whose policies it cannot inspect). HTTP authentication is the server's
    (``server.py``); the engine's own user has no password. chdb authenticates every connection as ``default``
    (``programs/local/ChdbClient.cpp``: ``session->authenticate("default", ...)``), so the engine has one account;
    its ``<grants>`` are parsed by ClickHouse's ``UsersConfigAccessStorage`` and enforced by the engine (Code 497).
    """
    access = (
        "<access_management>1</access_management>"
        if not grants
        else "<grants>" + "".join(f"<query>{escape(grant)}</query>" for grant in grants) + "</grants>"
    )
    return "\n".join(
        [
            "    <users><default><password></password><networks><ip>::/0</ip></networks><profile>default</profile>",
            f"        <quota>default</quota>{access}</default></users>",
            "    <profiles><default></default></profiles><quotas><default></default></quotas>",
            f"    <user_directories><users_xml><path>{config_file}</path></users_xml></user_directories>",
        ]
    )


def render_chdb_config(spec: ProcessSpec, topology: ClusterTopology = TOPOLOGY) -> str:
    """The process's ClickHouse config: cluster topology, macros, in-process Keeper, KeeperMap prefix.

    ``tcp_port`` is the process's native port as ``remote_servers`` names it, so ``system.clusters.is_local`` is 1
    on exactly the member's own row, as on a server. Nothing listens on it: clients use the HTTP port.
    """
    slot = MemberSlot(spec.shard_num, spec.replica_num) if spec.role == "member" else None
    replicas = spec.clusters[topology.external_cluster]
    return "\n".join(
        [
            "<clickhouse>",
            f"    <display_name>{spec.name}</display_name>",
            f"    <tcp_port>{spec.native_port}</tcp_port>",
            remote_servers_xml(topology, [(host, port) for host, port in replicas]),
            macros_xml(topology, spec.default_cluster, slot),
            replication_xml(topology),
            "    <zookeeper><implementation>testkeeper</implementation></zookeeper>",
            f"    <keeper_map_path_prefix>{topology.keeper_map_path_prefix}</keeper_map_path_prefix>",
            users_xml(spec.config_file, spec.grants),
            "</clickhouse>",
            "",
        ]
    )
