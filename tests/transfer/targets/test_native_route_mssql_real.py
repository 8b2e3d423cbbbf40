"""The native route into a real SQL Server: the corpus PostgreSQL passes, with BCP and with parameterized batches.

Opt-in: ``make test-real`` starts the compose deployment (``docker compose up -d --wait``, then the one-shot
``mssql-init`` that creates the ``_UTF8`` database), runs this module with the rest of the real-server suite and stops
it. The cases are :class:`~tests.support.transfer.native_route_scenarios.RouteCorpus` (every corpus table, windows, kills
before EOF, after EOF and during publication), run once per import backend. The source is the compose ClickHouse
``member1`` over HTTP, read through :class:`DponeNativeTransferHook` from ``dpone_clickhouse_default``; the target is
the production :class:`MsSqlTransferTarget` on connections from ``mssql_default`` (pymssql through the Microsoft SQL
Server provider, TDS 7.4), with COMMIT faults injected by the same connection proxy the PostgreSQL harness uses. Each
test publishes into its own schema of the ``dpone_real`` database.

Ports and the login come from ``deploy/real-cluster.json``; the SA password from ``DPONE_MSSQL_SA_PASSWORD`` (the
compose default otherwise). When either server does not answer a socket probe every test here is skipped and the
reason names ``make test-real``; under ``make test-real`` (``DPONE_REQUIRE_REAL=1``) it fails instead. A skipped test
is not a pass.
"""

from __future__ import annotations

import collections
import json
import os
import secrets
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.core.manifest import load_manifest
from airflow_provider_dpone.core.manifest.transfer import NativeTransferManifest, StringMapping
from airflow_provider_dpone.core.manifest.transfer_options import ImportBackend
from airflow_provider_dpone.hooks.native_transfer import DponeNativeTransferHook
from airflow_provider_dpone.transfer.source.session import ClickHouseSnapshotConnector
from airflow_provider_dpone.transfer.targets.mssql.digest import UTF8_COLLATION
from airflow_provider_dpone.transfer.targets.mssql.driver import mssql_connection_factory
from airflow_provider_dpone.transfer.targets.mssql.target import MsSqlTransferTarget
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.target import RECEIPT_TABLE, TargetTable
from tests.support.fakes.transfer_target import FaultPlan
from tests.support.fixtures.target_harness import FaultyConnection, settle_held
from tests.support.transfer.native_route_chdb import multiset
from tests.support.transfer.native_route_pg import PgRoute
from tests.support.transfer.native_route_scenarios import MakeRoute, RouteCorpus, rows_of

pytestmark = [
    pytest.mark.integration,
    pytest.mark.real_cluster,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = ROOT / "dags_examples" / "manifests" / "clickhouse_to_mssql_raw_snapshot.yaml"
DEFAULT_SA_PASSWORD = "Dpone-Local-2022"  # docker-compose.yaml's default for a local, throwaway server
PROBE_TIMEOUT_SECONDS = 1.0
DATABASE = "dpone_real"
TDS_VERSION = "7.4"
LOCK_TIMEOUT_MS = 2_000  # an in-flight COMMIT makes reconcile wait this long before it answers "in flight"


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
        server=host,
        port=str(port),
        user=real.mssql_user,
        password=real.mssql_password,
        database=database,
        autocommit=True,
        tds_version=TDS_VERSION,
    )


@pytest.fixture(scope="module")
def mssql_database(real: RealEndpoints) -> str:
    with _mssql(real) as conn, conn.cursor() as cursor:
        cursor.execute(f"IF DB_ID('{DATABASE}') IS NULL CREATE DATABASE {DATABASE}")
    return DATABASE


@pytest.fixture
def manifest(real: RealEndpoints, mssql_database: str, monkeypatch: pytest.MonkeyPatch) -> NativeTransferManifest:
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
        "extra": {"tds_version": TDS_VERSION},
    }
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(clickhouse))
    monkeypatch.setenv("AIRFLOW_CONN_MSSQL_DEFAULT", json.dumps(mssql))
    loaded = load_manifest(MANIFEST)
    assert isinstance(loaded, NativeTransferManifest)
    return loaded


@pytest.fixture
def admin(real: RealEndpoints) -> Iterator[Any]:
    import clickhouse_connect

    host, port = real.clickhouse
    client = clickhouse_connect.get_client(host=host, port=port, connect_timeout=3)
    yield client
    client.close()


@pytest.fixture
def db(admin: Any) -> Iterator[str]:
    database = f"real_{uuid.uuid4().hex[:12]}"
    admin.command(f"CREATE DATABASE {database} ENGINE = Atomic")
    yield database
    admin.command(f"DROP DATABASE IF EXISTS {database} SYNC")


@dataclass
class RealMsSqlHarness:
    """The production SQL Server target in a schema of its own, its COMMIT faults and readback through pymssql."""

    real: RealEndpoints
    database: str
    backend: ImportBackend
    schema: str = field(default_factory=lambda: f"t_{secrets.token_hex(6)}")
    faults: FaultPlan = field(default_factory=FaultPlan)
    held: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        import pymssql

        with _mssql(self.real, self.database) as conn, conn.cursor() as cursor:
            cursor.execute(f"CREATE SCHEMA [{self.schema}]")
        connect = mssql_connection_factory("mssql_default", database=self.database)
        self.connect = lambda: FaultyConnection(connect(), self.faults, self.held, pymssql.OperationalError)
        self.target = self.bind()

    def bind(self, table: str = "events", mapping: StringMapping = StringMapping.BINARY) -> MsSqlTransferTarget:
        bound = TargetTable(target_schema=self.schema, table=table, string_mapping=mapping)
        return MsSqlTransferTarget(
            self.connect,
            bound,
            import_backend=self.backend,
            lock_timeout_ms=LOCK_TIMEOUT_MS,
        )

    def rows(self, table: str) -> collections.Counter[tuple[object, ...]]:
        with _mssql(self.real, self.database) as conn, conn.cursor() as cursor:
            cursor.execute(f"SELECT * FROM [{self.schema}].[{table}]")
            return multiset(cursor.fetchall())

    def receipts(self) -> int:
        with _mssql(self.real, self.database) as conn, conn.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM [{self.schema}].[{RECEIPT_TABLE}]")
            return int(cursor.fetchone()[0])

    def settle_in_flight(self, plan: Any, *, commit: bool) -> None:
        settle_held(self.held, commit=commit)

    def close(self) -> None:
        for conn in self.held:
            conn.close()
        with _mssql(self.real, self.database) as conn, conn.cursor() as cursor:
            cursor.execute(
                "SELECT t.[name] FROM sys.tables AS t JOIN sys.schemas AS s ON s.[schema_id] = t.[schema_id] "
                "WHERE s.[name] = %s",
                (self.schema,),
            )
            for (table,) in cursor.fetchall():
                cursor.execute(f"DROP TABLE [{self.schema}].[{table}]")
            cursor.execute(f"DROP SCHEMA [{self.schema}]")


class MsSqlRoute(PgRoute):
    """The route harness with the SQL Server target; the published table and receipts are read through pymssql."""

    def target_rows(self) -> collections.Counter[tuple[object, ...]]:
        return self.harness.rows(self.table)  # type: ignore[attr-defined, no-any-return]

    def receipts(self) -> int:
        return int(self.harness.receipts())  # type: ignore[attr-defined]


@pytest.fixture(params=list(ImportBackend), ids=lambda backend: str(backend.value))  # every loader the product has
def harness(request: pytest.FixtureRequest, real: RealEndpoints, manifest: NativeTransferManifest) -> Iterator[Any]:
    created = RealMsSqlHarness(real, DATABASE, request.param)
    yield created
    created.close()


@pytest.fixture
def source(manifest: NativeTransferManifest) -> ClickHouseSnapshotConnector:
    return DponeNativeTransferHook(manifest).source_connector()


@pytest.fixture
def make_route(harness: RealMsSqlHarness, source: ClickHouseSnapshotConnector) -> MakeRoute:
    def make(root: Path, relation: RelationRef, **fields: Any) -> PgRoute:
        return MsSqlRoute(root, relation, harness, source=source, **fields)  # type: ignore[arg-type]

    return make


def test_the_init_step_created_the_utf8_database(real: RealEndpoints) -> None:
    """``mssql-init`` (``docker compose run --rm mssql-init``) made the second database on the ``_UTF8`` collation the
    transfer's in-server text digest needs."""
    described = json.loads((ROOT / "deploy/real-cluster.json").read_text())["mssql"]
    assert described["utf8_collation"] == UTF8_COLLATION
    with _mssql(real) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT collation_name FROM sys.databases WHERE name = %s", (described["utf8_database"],))
        assert cursor.fetchall() == [(UTF8_COLLATION,)]


class TestRouteOnSqlServer(RouteCorpus):
    """Every corpus table and every kill of the matrix, into SQL Server, with BCP and with parameterized batches."""

    def test_chunks_whose_bulk_load_escalates_to_a_table_lock_publish(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path
    ) -> None:
        """5,000-row chunks: one INSERT BULK each, past the documented lock escalation threshold (a table lock until
        the chunk commits). The route never verifies while another chunk loads, so no read waits into LOCK_TIMEOUT
        (error 1222, a false ``target_unavailable``)."""
        admin.command(f"CREATE TABLE {db}.bulk (id UInt64, ver UInt64) ENGINE = ReplacingMergeTree(ver) ORDER BY id")
        admin.command(f"INSERT INTO {db}.bulk SELECT number, 1 FROM numbers(20000)")
        relation = RelationRef(database=db, table="bulk")
        route = make_route(tmp_path, relation, table="bulk_copy")
        route.run(chunk_rows=5000)
        assert route.target_rows() == rows_of(admin, relation)
