"""The native transfer route over HTTP: an embedded-cluster member -> durable file:// stage -> real PostgreSQL.

Besides the transport checks below, :class:`TestRouteOverHttp` runs the shared corpus and recovery matrix
(``native_route_scenarios.RouteCorpus``) with this source.

The source is what a production worker builds: the Airflow connection (``AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT``) read
by :class:`DponeNativeTransferHook`, a real clickhouse-connect HTTP client with no retries and no redirects, talking to
a member process of the embedded cluster (the real ClickHouse engine behind ClickHouse's HTTP interface). The target is
the PostgreSQL adapter on a throwaway server. Connections are counted by the connector; after EOF a client factory
that fails the test if it is called at all proves the retry is source-free.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest import load_manifest
from airflow_provider_dpone.core.manifest.transfer import NativeTransferManifest
from airflow_provider_dpone.hooks.native_transfer import DponeNativeTransferHook
from airflow_provider_dpone.transfer.route.admission import check_transport
from airflow_provider_dpone.transfer.source.session import ClickHouseSnapshotConnector, http_transport
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from tests.support.fixtures.target_harness import PostgresHarness
from tests.support.transfer.native_route_chdb import read_rows
from tests.support.transfer.native_route_pg import PgRoute, events_table
from tests.support.transfer.native_route_scenarios import MakeRoute, RouteCorpus

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

MANIFEST = (
    Path(__file__).resolve().parents[2] / "dags_examples" / "manifests" / "clickhouse_to_postgres_raw_snapshot.yaml"
)
MEMBER = "member1"


def member_connection(cluster: Any, **extra: Any) -> dict[str, Any]:
    """The cluster's Airflow connection, pointed at one member (the route reads one server directly)."""
    endpoint = cluster.endpoint(MEMBER)
    connection = cluster.connection_json()
    connection.update(host=endpoint.host, port=endpoint.port)
    connection["extra"] = {**connection.get("extra", {}), **extra}
    return connection


def hook_connector(monkeypatch: pytest.MonkeyPatch, connection: dict[str, Any]) -> ClickHouseSnapshotConnector:
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(connection))
    manifest = load_manifest(MANIFEST)
    assert isinstance(manifest, NativeTransferManifest)
    return DponeNativeTransferHook(manifest).source_connector()


@pytest.fixture
def admin(embedded_cluster):
    client = embedded_cluster.client(MEMBER)
    yield client
    client.close()


@pytest.fixture
def events(admin, fresh_database) -> RelationRef:
    return events_table(admin, fresh_database)


@pytest.fixture
def harness(postgres_server):
    created = PostgresHarness(postgres_server.dsn)
    yield created
    created.close()


@pytest.fixture
def source(embedded_cluster, monkeypatch) -> ClickHouseSnapshotConnector:
    return hook_connector(monkeypatch, member_connection(embedded_cluster))


@pytest.fixture
def db(fresh_database) -> str:
    return fresh_database


@pytest.fixture
def make_route(harness, source) -> MakeRoute:
    def make(root: Path, relation: RelationRef, **fields: Any) -> PgRoute:
        return PgRoute(root, relation, harness, source=source, **fields)

    return make


class TestRouteOverHttp(RouteCorpus):
    """The whole corpus and recovery matrix with the source read over HTTP through the hook."""


def target_columns(route: PgRoute) -> list[str]:
    with psycopg.connect(route.harness.dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
            "ORDER BY ordinal_position",
            (route.harness.schema, route.table),
        ).fetchall()
    return [row[0] for row in rows]


def test_http_source_publishes_the_raw_multiset_not_final(admin, events, harness, source, tmp_path) -> None:
    session = source.connect()
    try:
        observed = session.transport()
        access = session.access(events)
    finally:
        session.close()
    assert (observed.scheme, observed.requires_tls, observed.follows_redirects) == ("http", False, False)
    assert access.policies_inspectable and access.row_policies == (), "the server proves no policy applies"

    route = PgRoute(tmp_path, events, harness, source=source)
    result = route.run()
    raw = read_rows(admin, f"SELECT * FROM {events.database}.events")
    final = read_rows(admin, f"SELECT * FROM {events.database}.events FINAL")
    published = route.target_rows()
    assert published == raw and result.rows == sum(raw.values()) == 7
    assert published != final and sum(final.values()) == 3
    assert published[(1, 2, 0, b"b", "2026-01-03T00:00:00+00:00", Decimal(2))] == 2, "identical duplicates kept"
    assert target_columns(route) == ["id", "ver", "is_deleted", "payload", "ts", "amount"], "no _part/_part_offset"
    assert route.last_connections == 1 and len(route.streams) == 1
    assert "FINAL" not in route.streams[0] and "_part" in route.streams[0], "provenance read, then stripped"
    assert result.endpoint_authority_agreement is True and route.receipts() == 1


def test_tls_required_is_never_downgraded_to_http(embedded_cluster, events, harness, monkeypatch, tmp_path) -> None:
    """``secure: true`` against a plain-HTTP endpoint fails; a plain client under a TLS policy is refused."""
    endpoint = embedded_cluster.endpoint(MEMBER)
    secure = hook_connector(monkeypatch, member_connection(embedded_cluster, secure=True))
    route = PgRoute(tmp_path, events, harness, source=secure)
    with pytest.raises(DponeError) as failed:
        route.run()
    assert failed.value.code == "native_transfer.source_transport_unsupported"
    assert str(endpoint.port) not in str(failed.value), "the driver's message (host, port) is withheld"
    assert target_columns(route) == [], "nothing was published"

    plain = embedded_cluster.client(MEMBER)
    try:
        observe = http_transport(endpoint.host, endpoint.port, ClickHouseConnectionOptions(secure=True))
        with pytest.raises(DponeError) as refused:
            check_transport(observe(plain))
    finally:
        plain.close()
    assert refused.value.code == "native_transfer.source_transport_unsupported"


def test_a_replicated_replacing_source_is_read_from_its_connected_replica(
    embedded_cluster, admin, fresh_database, harness, source, tmp_path
) -> None:
    """A ReplicatedReplacingMergeTree on both members (the embedded cluster's replication): ``connected_replica``
    reads the raw rows of the one replica the session is pinned to, end to end into the target; the single-server
    scope is refused for a replicated engine."""
    db = fresh_database
    other = embedded_cluster.client("member2")
    try:
        for client in (admin, other):
            client.command(f"CREATE DATABASE IF NOT EXISTS {db} ENGINE = Atomic")
            client.command(
                f"CREATE TABLE {db}.replicated (id UInt64, ver UInt64, note String) "
                f"ENGINE = ReplicatedReplacingMergeTree('/dpone/tables/{db}/replicated', '{{replica}}', ver) "
                "ORDER BY id"
            )
        for batch in ("(1, 1, 'a'), (2, 1, 'b')", "(1, 2, 'a2')", "(3, 1, '')"):
            admin.command(f"INSERT INTO {db}.replicated VALUES {batch}")
        relation = RelationRef(database=db, table="replicated")
        engine = admin.query(
            "SELECT engine FROM system.tables WHERE database = {d:String} AND name = 'replicated'", parameters={"d": db}
        ).result_rows
        assert engine == [("ReplicatedReplacingMergeTree",)]
        scoped = {"source_snapshot": {"mode": "exact_raw_rows", "replica_scope": "connected_replica"}}
        route = PgRoute(tmp_path / "replica", relation, harness, source=source, table="replicated_copy", options=scoped)
        result = route.run()
        raw = read_rows(admin, f"SELECT * FROM {db}.replicated")
        final = read_rows(admin, f"SELECT * FROM {db}.replicated FINAL")
        assert route.target_rows() == raw and result.rows == sum(raw.values()) == 4
        assert raw != final and sum(final.values()) == 3, "both versions of id 1 are raw rows"
        assert route.receipts() == 1
        single = PgRoute(tmp_path / "single", relation, harness, source=source, table="replicated_single")
        with pytest.raises(DponeError) as refused:
            single.run()
        assert refused.value.code == "native_transfer.replica_scope_unproven"
    finally:
        other.close()
