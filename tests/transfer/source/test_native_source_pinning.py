"""Endpoint pinning of the native-transfer source, on real engines behind a real HTTP balancer.

Two members of the embedded cluster hold a table of the same name with DIFFERENT rows, as two servers behind one
address can. The route's production HTTP connector dials a layer-7 balancer (``tests/support/http_servers.balance``)
that forwards each request to the member its rule picks. Pinning decides the outcome: when the data SELECT lands on
another member than admission read, that member could answer it with its own rows; the run must instead fail closed
with ``native_transfer.source_endpoint_drift`` and publish nothing. The target is a real PostgreSQL.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_provider_dpone.core.canonical import tagged_digest
from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.source.session import ClickHouseSnapshotConnector, http_connector
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.source_observation import ServerObservation
from tests.support.fixtures.target_harness import PostgresHarness
from tests.support.http_servers import Balancer, Route, balance
from tests.support.transfer.native_route_chdb import read_rows
from tests.support.transfer.native_route_pg import EVENTS, PgRoute

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.embedded_cluster(members=2),
]

ADMITTED, OTHER = "member1", "member2"
RAW = "exact_raw_rows"
ENGINES = {
    "legacy": "MergeTree",
    "single_server": "ReplacingMergeTree(ver, is_deleted)",
}
"""``connected_replica`` on the embedded cluster's replicated tables runs end to end in
``test_native_route_http.py`` (``test_a_replicated_replacing_source_is_read_from_its_connected_replica``)."""
ADMITTED_ROWS = ("(1, 1, 0, 'a', '2026-01-01 00:00:00', 1)", "(1, 2, 0, '', '2026-01-02 00:00:00', 2)")
OTHER_ROWS = ("(9, 1, 0, 'other', '2026-01-05 00:00:00', 9)",)


def options(scope: str) -> dict[str, Any]:
    return {} if scope == "legacy" else {"source_snapshot": {"mode": RAW, "replica_scope": scope}}


def data_select_elsewhere(parameters: dict[str, list[str]], number: int) -> str:
    """Every request to the admitted member, except the route's data SELECT (its query id is ``dpone-<invocation>``)."""
    return OTHER if parameters.get("query_id", [""])[0].startswith("dpone-") else ADMITTED


def sticky(parameters: dict[str, list[str]], number: int) -> str:
    return ADMITTED


def round_robin(parameters: dict[str, list[str]], number: int) -> str:
    return (ADMITTED, OTHER)[number % 2]


@pytest.fixture
def harness(postgres_server) -> Iterator[PostgresHarness]:
    created = PostgresHarness(postgres_server.dsn)
    yield created
    created.close()


@pytest.fixture
def clients(embedded_cluster) -> Iterator[dict[str, Any]]:
    opened = {name: embedded_cluster.client(name) for name in (ADMITTED, OTHER)}
    yield opened
    for client in opened.values():
        client.close()


def create_tables(clients: dict[str, Any], database: str, scope: str) -> RelationRef:
    """``events`` on both members with the same schema and engine, and different rows."""
    for name, batches in ((ADMITTED, ADMITTED_ROWS), (OTHER, OTHER_ROWS)):
        clients[name].command(
            f"CREATE TABLE {database}.events {EVENTS} ENGINE = {ENGINES[scope]} PARTITION BY toYYYYMM(ts) ORDER BY id"
        )
        for batch in batches:
            clients[name].command(f"INSERT INTO {database}.events VALUES {batch}")
    return RelationRef(database=database, table="events")


def backends(cluster: Any) -> dict[str, tuple[str, int]]:
    return {name: (cluster.endpoint(name).host, cluster.endpoint(name).port) for name in (ADMITTED, OTHER)}


def dial(cluster: Any, port: int) -> ClickHouseSnapshotConnector:
    """What the hook builds for a loopback source: the production HTTP connector."""
    return http_connector("127.0.0.1", port, cluster.user, cluster.password, ClickHouseConnectionOptions())


def observe_server(source: ClickHouseSnapshotConnector) -> ServerObservation:
    session = source.connect()
    try:
        return session.server()
    finally:
        session.close()


def run(tmp_path: Path, relation: RelationRef, harness: PostgresHarness, source: Any, scope: str) -> PgRoute:
    route = PgRoute(tmp_path, relation, harness, options=options(scope), source=source)
    route.run()
    return route


def refused(
    tmp_path, relation, harness, cluster, rule: Route, scope: str, **drop: Any
) -> tuple[str, Balancer, PgRoute]:
    with balance(backends(cluster), rule, **drop) as balancer:
        route = PgRoute(tmp_path, relation, harness, options=options(scope), source=dial(cluster, balancer.port))
        with pytest.raises(DponeError) as failed:
            route.run()
    return failed.value.code, balancer, route


def published(route: PgRoute) -> bool:
    with psycopg.connect(route.harness.dsn, autocommit=True) as conn:
        found = conn.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
            (route.harness.schema, route.table),
        ).fetchone()
    return found is not None


def journal_and_evidence(root: Path) -> str:
    return "\n".join(path.read_text() for path in sorted(root.rglob("*.json")))


def test_members_have_distinct_identities_though_host_name_and_uuid_agree(embedded_cluster) -> None:
    """The embedded members share a host name and report a zero server UUID: the macros still tell them apart."""
    first, second = (
        observe_server(dial(embedded_cluster, embedded_cluster.endpoint(n).port)) for n in (ADMITTED, OTHER)
    )
    assert (first.host_identity, first.server_uuid) == (second.host_identity, second.server_uuid)
    assert dict(first.macros)["replica"] == "r1" and dict(second.macros)["replica"] == "r2"
    assert first.identity_sha256() != second.identity_sha256()


def test_a_pinned_balancer_reads_one_member_and_binds_its_identity_as_a_digest(
    embedded_cluster, clients, fresh_database, harness, tmp_path
) -> None:
    relation = create_tables(clients, fresh_database, "single_server")
    with balance(backends(embedded_cluster), sticky) as balancer:
        source = dial(embedded_cluster, balancer.port)
        session = source.connect()
        try:
            transport, server = session.transport(), session.server()
        finally:
            session.close()
        route = run(tmp_path, relation, harness, source, "single_server")
    assert transport.pinned, "observed: the member refuses a session it does not hold"
    assert {backend for backend, _ in balancer.routed} == {ADMITTED}
    assert route.target_rows() == read_rows(clients[ADMITTED], f"SELECT * FROM {fresh_database}.events")

    stored = journal_and_evidence(tmp_path)
    evidence = next(json.loads(p.read_text()) for p in tmp_path.rglob("source_physical.json"))
    complete = next(json.loads(p.read_text()) for p in tmp_path.rglob("*.json") if '"stage_complete"' in p.read_text())
    profile = complete["body"]["completion_metadata"]["source_snapshot_v1"]["profile"]
    assert evidence["endpoint_identity_sha256"] == server.identity_sha256()
    assert profile["endpoint_authority_sha256"] == tagged_digest(
        "dpone.endpoint-authority.v2", "http", f"127.0.0.1:{balancer.port}", server.identity_sha256()
    )
    assert profile["replica"] == {"scope": "single_server", "identity_sha256": None}
    assert f'"{server.host_identity}"' not in stored and '"r1"' not in stored, "only digests are recorded"


@pytest.mark.parametrize("scope", list(ENGINES))
def test_a_data_select_answered_by_another_member_fails_closed(
    embedded_cluster, clients, fresh_database, harness, tmp_path, scope
) -> None:
    relation = create_tables(clients, fresh_database, scope)
    other = read_rows(clients[OTHER], f"SELECT * FROM {fresh_database}.events")
    assert other and other != read_rows(clients[ADMITTED], f"SELECT * FROM {fresh_database}.events")

    code, balancer, route = refused(tmp_path, relation, harness, embedded_cluster, data_select_elsewhere, scope)
    assert code == "native_transfer.source_endpoint_drift"
    data = [backend for backend, query_id in balancer.routed if query_id.startswith("dpone-")]
    assert data == [OTHER], "the data SELECT reached the other member, which refused the foreign session"
    assert route.journal_kinds()[-2:] == ["invocation_settled", "lease"], "settled: the retry re-extracts"
    assert not published(route), "nothing reached the target table"


def test_a_balancer_that_moves_requests_between_members_is_refused_before_any_data_read(
    embedded_cluster, clients, fresh_database, harness, tmp_path
) -> None:
    relation = create_tables(clients, fresh_database, "single_server")
    code, balancer, _ = refused(tmp_path, relation, harness, embedded_cluster, round_robin, "single_server")
    assert code == "native_transfer.source_endpoint_drift"
    assert not [query_id for _, query_id in balancer.routed if query_id.startswith("dpone-")]


def test_an_intermediary_that_drops_the_session_is_not_pinned(
    embedded_cluster, clients, fresh_database, harness, tmp_path
) -> None:
    """Without the session parameters every request would be answered wherever it lands: pinning is unproven."""
    relation = create_tables(clients, fresh_database, "single_server")
    drop = frozenset({"session_id", "session_check", "session_timeout"})
    code, balancer, route = refused(tmp_path, relation, harness, embedded_cluster, sticky, "single_server", drop=drop)
    assert code == "native_transfer.replica_scope_unproven"
    assert not [query_id for _, query_id in balancer.routed if query_id.startswith("dpone-")]
    assert "plan" not in route.journal_kinds()


def test_a_read_waits_while_the_session_is_still_held_by_the_previous_request(embedded_cluster) -> None:
    """A server may answer before it releases the session; the next read then finds it locked and is sent again."""
    source = dial(embedded_cluster, embedded_cluster.endpoint(ADMITTED).port)
    session = source.connect()
    holder = embedded_cluster.client(ADMITTED)
    held = {"session_id": session.client.get_client_setting("session_id"), "session_check": 1}
    thread = threading.Thread(target=lambda: holder.query("SELECT sleep(0.6)", settings=held))
    try:
        thread.start()
        time.sleep(0.2)  # the holder's request now owns the session on the server
        started = time.monotonic()
        server = session.server()
        waited = time.monotonic() - started
    finally:
        thread.join()
        holder.close()
        session.close()
    assert dict(server.macros)["replica"] == "r1"
    assert waited >= 0.2, "the first attempt was refused with SESSION_IS_LOCKED and sent again after a pause"
