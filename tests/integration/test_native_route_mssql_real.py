"""The native transfer route into a real SQL Server (opt-in: ``make test-real``, or ``pytest -m real_cluster``).

``make test-real`` starts the compose deployment (``docker compose up -d --wait``), runs this module and stops it: the source is its
ClickHouse ``member1`` (HTTP), read through :class:`DponeNativeTransferHook` from ``dpone_clickhouse_default``, and the
target its SQL Server, through the hook from ``mssql_default`` (pymssql via the Microsoft SQL Server provider, BCP as
the example manifest says). Ports and the login come from ``deploy/real-cluster.json``; the SA password from
``DPONE_MSSQL_SA_PASSWORD`` (the compose default otherwise). When either server does not answer a socket probe, every
test here is skipped and says which one; a skipped test is not a pass.
"""

from __future__ import annotations

import collections
import json
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.mssql.tsql import RECEIPT_TABLE
from airflow_provider_dpone.contracts.manifest import load_manifest
from airflow_provider_dpone.contracts.manifest_transfer import NativeTransferManifest
from airflow_provider_dpone.contracts.native_chunk import RelationRef
from airflow_provider_dpone.hooks.native_transfer import DponeNativeTransferHook
from tests.integration.native_route_chdb import multiset, read_rows
from tests.integration.native_route_pg import Crash, PgRoute, crash_at, events_table

pytestmark = [pytest.mark.real_cluster, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "dags_examples" / "manifests" / "clickhouse_to_mssql_raw_snapshot.yaml"
DEFAULT_SA_PASSWORD = "Dpone-Local-2022"  # docker-compose.yaml's default for a local, throwaway server
PROBE_TIMEOUT_SECONDS = 1.0
DATABASE = "dpone_real"


@dataclass(frozen=True)
class RealEndpoints:
    clickhouse: tuple[str, int]
    mssql: tuple[str, int]
    mssql_user: str
    mssql_password: str


def _unreachable(host: str, port: int) -> str | None:
    """None when a TCP connection opens within the probe timeout, else the reason."""
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_SECONDS):
            return None
    except OSError as exc:
        return type(exc).__name__


@pytest.fixture(scope="module")
def real() -> RealEndpoints:
    description = json.loads((ROOT / "deploy/real-cluster.json").read_text())
    member = description["members"][0]
    mssql = description["mssql"]
    endpoints = RealEndpoints(
        clickhouse=(member["host"], int(member["port"])),
        mssql=(mssql["host"], int(mssql["port"])),
        mssql_user=mssql["user"],
        mssql_password=os.environ.get("DPONE_MSSQL_SA_PASSWORD", DEFAULT_SA_PASSWORD),
    )
    for what, (host, port) in (("ClickHouse member1", endpoints.clickhouse), ("SQL Server", endpoints.mssql)):
        if (reason := _unreachable(host, port)) is not None:
            # `make test-real` started the servers: an unreachable one is a failure there, never a skip.
            missing = pytest.fail if os.environ.get("DPONE_REQUIRE_REAL") == "1" else pytest.skip
            missing(
                f"{what} not reachable at {host}:{port} ({reason}); run `make test-real` (starts the compose "
                "ClickHouse and SQL Server, needs Docker)"
            )
    return endpoints


def _mssql(real: RealEndpoints, database: str = "master") -> Any:
    import pymssql

    host, port = real.mssql
    return pymssql.connect(
        server=host, port=port, user=real.mssql_user, password=real.mssql_password, database=database, autocommit=True
    )


@pytest.fixture(scope="module")
def mssql_database(real: RealEndpoints) -> str:
    with _mssql(real) as conn, conn.cursor() as cursor:
        cursor.execute(f"IF DB_ID('{DATABASE}') IS NULL CREATE DATABASE {DATABASE}")
    return DATABASE


@pytest.fixture
def connections(real: RealEndpoints, mssql_database: str, monkeypatch: pytest.MonkeyPatch) -> NativeTransferManifest:
    """``dpone_clickhouse_default`` and ``mssql_default`` for the example manifest, pointing at the compose servers."""
    host, port = real.clickhouse
    clickhouse = {"conn_type": "dpone_clickhouse", "host": host, "port": port, "login": "default", "password": ""}
    mssql_host, mssql_port = real.mssql
    mssql = {
        "conn_type": "mssql",
        "host": mssql_host,
        "port": mssql_port,
        "login": real.mssql_user,
        "password": real.mssql_password,
        "schema": mssql_database,
    }
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(clickhouse))
    monkeypatch.setenv("AIRFLOW_CONN_MSSQL_DEFAULT", json.dumps(mssql))
    manifest = load_manifest(MANIFEST)
    assert isinstance(manifest, NativeTransferManifest)
    return manifest


@pytest.fixture
def admin(real: RealEndpoints) -> Iterator[Any]:
    import clickhouse_connect

    host, port = real.clickhouse
    client = clickhouse_connect.get_client(host=host, port=port, connect_timeout=3)
    yield client
    client.close()


@pytest.fixture
def events(admin: Any) -> Iterator[RelationRef]:
    database = f"real_{uuid.uuid4().hex[:12]}"
    admin.command(f"CREATE DATABASE {database} ENGINE = Atomic")
    yield events_table(admin, database)
    admin.command(f"DROP DATABASE IF EXISTS {database} SYNC")


@dataclass
class MsSqlTarget:
    """What :class:`PgRoute` needs of a harness: the target adapter and its schema (plus readback for the test)."""

    real: RealEndpoints
    database: str
    target: Any
    schema: str = "dbo"

    def rows(self, table: str) -> collections.Counter[tuple[object, ...]]:
        with _mssql(self.real, self.database) as conn, conn.cursor() as cursor:
            cursor.execute(f"SELECT * FROM [{self.schema}].[{table}]")
            return multiset(cursor.fetchall())

    def receipts(self) -> int:
        with _mssql(self.real, self.database) as conn, conn.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM [{self.schema}].[{RECEIPT_TABLE}]")
            return int(cursor.fetchone()[0])


class MsSqlRoute(PgRoute):
    """The PostgreSQL route harness with the SQL Server target; readback through pymssql."""

    def target_rows(self) -> collections.Counter[tuple[object, ...]]:
        return self.harness.rows(self.table)  # type: ignore[attr-defined]

    def receipts(self) -> int:
        return int(self.harness.receipts())  # type: ignore[attr-defined]


@pytest.fixture
def route_parts(real: RealEndpoints, mssql_database: str, connections: NativeTransferManifest) -> dict[str, Any]:
    hook = DponeNativeTransferHook(connections)
    target = MsSqlTarget(real, mssql_database, hook.target())
    return {"harness": target, "source": hook.source_connector(), "table": f"events_{uuid.uuid4().hex[:8]}"}


def test_mssql_publishes_the_raw_multiset_not_final(admin, events, route_parts, tmp_path) -> None:
    route = MsSqlRoute(tmp_path, events, **route_parts)
    result = route.run()
    raw = read_rows(admin, f"SELECT * FROM {events.database}.events")
    final = read_rows(admin, f"SELECT * FROM {events.database}.events FINAL")
    published = route.target_rows()
    assert published == raw and result.rows == sum(raw.values()) == 7
    assert published != final and sum(final.values()) == 3
    assert published[(1, 2, 0, b"b", "2026-01-03T00:00:00+00:00", Decimal(2))] == 2
    assert route.last_connections == 1 and len(route.streams) == 1 and "FINAL" not in route.streams[0]
    assert route.receipts() >= 1 and result.endpoint_authority_agreement is True


@pytest.mark.parametrize("point", ["stage_complete", "loaded", "publish_intent"])
def test_mssql_crash_after_eof_completes_without_the_source(admin, events, route_parts, tmp_path, point) -> None:
    route = MsSqlRoute(tmp_path, events, **route_parts)
    with pytest.raises(Crash):
        route.run(crash_at(point))
    route.expire_leases()
    route.deny_source = True
    result = route.run() if point != "publish_intent" else _after_absent(route)
    assert route.last_connections == 0 and result.source_connections == 0
    assert route.target_rows() == read_rows(admin, f"SELECT * FROM {events.database}.events")


def _after_absent(route: MsSqlRoute) -> Any:
    """An intent without a receipt is first proven absent (the try fails), then republished from the stage."""
    from airflow_provider_dpone.contracts.errors import DponeError

    with pytest.raises(DponeError) as absent:
        route.run()
    assert absent.value.code == "mssql_native.publication_absent"
    return route.run()
