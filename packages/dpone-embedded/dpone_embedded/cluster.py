"""``EmbeddedCluster``: the handle tests, the demo and the CLI use to run and reach an embedded cluster."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

from dpone_embedded import launcher, member_names
from dpone_embedded.faults import Faults, target_name
from dpone_embedded.layout import COORDINATOR, ProcessSpec

CONN_TYPE = "dpone_clickhouse"

CONNECTION_OPTION_DEFAULTS: dict[str, Any] = {
    "secure": False,
    "allow_plaintext": False,
    "verify": True,
    "ca_cert": None,
    "member_http_port": None,
    "member_endpoints": None,
    "connect_timeout_seconds": 10,
    "send_receive_timeout_seconds": 300,
    "cluster": None,
    "authority_database": None,
}
"""Every extra key of the provider's ``dpone_clickhouse`` connection with its default (docs/connections.md; a test
holds it equal to the provider's options). The connection carries them all because Airflow's Edit form lists only
the extra fields a connection's extra holds: a connection created from this JSON or URI shows every field there."""


@dataclass(frozen=True)
class Endpoint:
    """One process of the cluster as a client reaches it.

    ``port`` is the HTTP port (what clickhouse-connect uses). ``native_port`` is the port ``system.clusters`` and
    the DDL queue report for this host; nothing listens on it. The coordinator has ``shard_num == replica_num == 0``.
    """

    name: str
    role: str
    host: str
    port: int
    native_port: int
    shard_num: int
    replica_num: int

    @property
    def member_key(self) -> str:
        """``'<shard_num>:<replica_num>'``, the key of the connection's ``member_endpoints`` map."""
        return f"{self.shard_num}:{self.replica_num}"

    @property
    def position(self) -> str:
        """``'shard <shard_num>, replica <replica_num>'``: the member's position as the provider's task logs and Test
        button write it inside their one name of a member, ``member m<16 hex> (shard S, replica R)``."""
        return f"shard {self.shard_num}, replica {self.replica_num}"

    @property
    def member_id(self) -> str:
        """The provider's opaque id of this member (:mod:`dpone_embedded.member_names`)."""
        return member_names.member_id(self.shard_num, self.replica_num)

    @property
    def label(self) -> str:
        """The member's one name, as the provider's task logs, errors and Test button write it:
        ``m<16 hex> (shard S, replica R)``; ``name`` (``memberN``) is the double's local alias."""
        return member_names.member_label(self.shard_num, self.replica_num)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def of(cls, spec: ProcessSpec) -> Endpoint:
        return cls(spec.name, spec.role, spec.host, spec.http_port, spec.native_port, spec.shard_num, spec.replica_num)


class EmbeddedCluster:
    """A running embedded cluster: a coordinator plus N member processes, each a real ClickHouse engine."""

    def __init__(self, directory: Path, *, owned: bool) -> None:
        self.directory = Path(directory).resolve()
        self._owned = owned
        state = launcher.read_state(self.directory)
        specs = launcher.specs_of(self.directory)
        self.cluster_name: str = state["cluster"]
        self.internal_replication: bool = bool(state["internal_replication"])
        self.coordinator = Endpoint.of(specs[COORDINATOR])
        self.members: tuple[Endpoint, ...] = tuple(
            sorted((Endpoint.of(s) for n, s in specs.items() if n != COORDINATOR), key=lambda e: e.replica_num)
        )
        self.password = specs[COORDINATOR].password
        self.user = specs[COORDINATOR].user
        self.faults = Faults(self.directory)

    # -- lifecycle ------------------------------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        directory: str | os.PathLike[str],
        members: int = 2,
        internal_replication: bool = False,
        *,
        password: str = "",
        owned: bool = True,
        tls: tuple[str, str] | None = None,
    ) -> EmbeddedCluster:
        """Start a cluster in ``directory`` and return once every process is ready (``tls``: certificate and key
        files; members then serve HTTPS only, with that certificate).

        With ``owned`` (the default) the processes exit by themselves if this Python process dies, and
        :meth:`stop` (or leaving the ``with`` block) stops them; ``owned=False`` leaves them running (the CLI).
        """
        launcher.start_processes(
            Path(directory),
            members,
            internal_replication,
            password=password,
            owner_pid=os.getpid() if owned else 0,
            tls=tls,
        )
        return cls(Path(directory), owned=owned)

    @classmethod
    def attach(cls, directory: str | os.PathLike[str]) -> EmbeddedCluster:
        """A handle on a cluster started elsewhere (e.g. by ``python -m dpone_embedded up``)."""
        return cls(Path(directory), owned=False)

    def stop(self) -> None:
        launcher.stop_all(self.directory)

    def restrict_account(self, grants: Sequence[str] | None, targets: Sequence[Any] | None = None) -> None:
        """Restart each process (all, or ``targets``) with its engine's account holding exactly ``grants`` (``GRANT``
        statements without ``TO``), or the full account again with ``None``; returns once they answer ``/ping``.

        The engine enforces the grants on every statement the process runs, its own bookkeeping included (chdb has one
        account). A restart loses the process's in-process KeeperMap state (Code 668 until the table is recreated).
        """
        specs = launcher.specs_of(self.directory)
        names = [target_name(target) for target in targets] if targets is not None else list(specs)
        for name in names:
            replace(specs[name], grants=tuple(grants or ())).write()
            launcher.restart(self.directory, name)

    def __enter__(self) -> EmbeddedCluster:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- reaching it ----------------------------------------------------------------------------------------------

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        return (self.coordinator, *self.members)

    def endpoint(self, target: Any) -> Endpoint:
        """The endpoint for a process name, an Endpoint or a member's replica number."""
        name = target_name(target)
        for endpoint in self.endpoints:
            if endpoint.name == name:
                return endpoint
        raise KeyError(name)

    def client(self, target: Any = COORDINATOR, database: str | None = None, **kwargs: Any) -> Any:
        """An ordinary clickhouse-connect (sync, HTTP) client of one process."""
        import clickhouse_connect

        endpoint = self.endpoint(target)
        return clickhouse_connect.get_client(
            host=endpoint.host,
            port=endpoint.port,
            username=self.user,
            password=self.password,
            database=database or "",
            **kwargs,
        )

    async def async_client(self, target: Any = COORDINATOR, database: str | None = None, **kwargs: Any) -> Any:
        """An ordinary clickhouse-connect async client of one process."""
        import clickhouse_connect

        endpoint = self.endpoint(target)
        return await clickhouse_connect.get_async_client(
            host=endpoint.host,
            port=endpoint.port,
            username=self.user,
            password=self.password,
            database=database or "",
            **kwargs,
        )

    def connection_extra(self) -> dict[str, Any]:
        """The ``dpone_clickhouse`` extra: members are reached through ``member_endpoints`` (ports differ); every
        other option of the connection type is written with its default (:data:`CONNECTION_OPTION_DEFAULTS`)."""
        return {**CONNECTION_OPTION_DEFAULTS, "member_endpoints": {m.member_key: m.address for m in self.members}}

    def connection_json(self, database: str | None = None) -> dict[str, Any]:
        """The Airflow connection as JSON (e.g. for ``AIRFLOW_CONN_<ID>``)."""
        return {
            "conn_type": CONN_TYPE,
            "host": self.coordinator.host,
            "port": self.coordinator.port,
            "login": self.user,
            "password": self.password,
            "schema": database or "",
            "extra": self.connection_extra(),
        }

    def connection_uri(self, database: str | None = None) -> str:
        """The Airflow connection as a URI (``dpone-clickhouse://``; Airflow maps ``-`` back to ``_``)."""
        credentials = quote(self.user, safe="") + (":" + quote(self.password, safe="") if self.password else "")
        extra = quote(json.dumps(self.connection_extra(), separators=(",", ":")), safe="")
        path = quote(database or "", safe="")
        return (
            f"{CONN_TYPE.replace('_', '-')}://{credentials}@{self.coordinator.host}:{self.coordinator.port}/{path}"
            f"?__extra__={extra}"
        )

    def describe(self) -> dict[str, Any]:
        """The JSON the CLI prints for ``up`` and ``status``."""
        return {
            "cluster": self.cluster_name,
            "internal_replication": self.internal_replication,
            "directory": str(self.directory),
            "coordinator": asdict(self.coordinator),
            "members": [
                {**asdict(member), "position": member.position, "member_id": member.member_id, "label": member.label}
                for member in self.members
            ],
            "airflow_connection_uri": self.connection_uri(),
            "airflow_connection_json": self.connection_json(),
        }

    def processes(self) -> dict[str, dict[str, Any]]:
        """Pid and liveness of every process."""
        state = launcher.read_state(self.directory)
        specs = launcher.specs_of(self.directory)
        return {
            name: {
                "pid": int(state["pids"].get(name, 0)),
                "alive": launcher.alive(int(state["pids"].get(name, 0)), spec),
            }
            for name, spec in specs.items()
        }
