"""The one-shot guard, failure classification and member endpoint resolution."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError, ProgrammingError

from airflow_provider_dpone.cluster.clickhouse.endpoint import Endpoint
from airflow_provider_dpone.cluster.clickhouse.oneshot import (
    MutationGuard,
    MutationReplayRefusedError,
    Refused,
    Unknown,
    classify,
    mutation_query_id,
    sanitized,
)
from airflow_provider_dpone.cluster.values.identities import member_id
from airflow_provider_dpone.cluster.values.inventory import AdmittedMember, MemberEndpoint
from airflow_provider_dpone.core.clickhouse.clients import Purpose
from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection
from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
from airflow_provider_dpone.core.errors import DponeError, MutationRejectedError
from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

pytestmark = pytest.mark.adapter


def test_guard_refuses_the_second_claim_of_one_query_id() -> None:
    guard = MutationGuard()
    guard.claim("dpone-load-a")
    guard.claim("dpone-load-b")
    with pytest.raises(MutationReplayRefusedError) as caught:
        guard.claim("dpone-load-a")
    assert isinstance(caught.value, MutationRejectedError)
    assert "DPONE_CLICKHOUSE_MUTATION_REPLAY_REFUSED" in str(caught.value)


def test_guard_admits_exactly_one_of_many_concurrent_claims() -> None:
    guard = MutationGuard()
    admitted: list[int] = []

    def claim(n: int) -> None:
        try:
            guard.claim("dpone-ddl-same")
            admitted.append(n)
        except MutationReplayRefusedError:
            pass

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(admitted) == 1


def test_query_ids_are_deterministic_per_kind_scope_and_statement() -> None:
    first = mutation_query_id("drop", "m1", "DROP TABLE x")
    assert first == mutation_query_id("drop", "m1", "DROP TABLE x")
    assert first.startswith("dpone-drop-") and len(first) == len("dpone-drop-") + 32
    assert first != mutation_query_id("drop", "m2", "DROP TABLE x")
    assert first != mutation_query_id("drop", "m1", "DROP TABLE y")


def test_classification_uses_only_the_server_error_code() -> None:
    assert classify(DatabaseError("Code: 57 ... host.internal:9000", code=57)) == Refused(57)
    assert classify(ProgrammingError("x", code=60)) == Refused(60)
    assert isinstance(classify(OperationalError("Error executing HTTP request")), Unknown)
    assert isinstance(classify(TimeoutError()), Unknown)
    assert sanitized(Refused(57)) == "server refused (Code 57)"
    assert sanitized(Unknown()) == "outcome unknown"


def member(shard: int, replica: int, host: str = "ch-1-1.internal", port: int = 9000) -> AdmittedMember:
    return AdmittedMember(
        member_id=member_id(shard, replica),
        shard_num=shard,
        replica_num=replica,
        endpoint=MemberEndpoint(host=host, port=port),
    )


def coordinator(**options: object) -> ResolvedConnection:
    return ResolvedConnection(
        host="coordinator.internal",
        port=8443,
        username="u",
        password="p",
        database="target_db",
        options=ClickHouseConnectionOptions.model_validate(options),
    )


def test_member_host_comes_from_the_inventory_and_port_from_the_connection() -> None:
    resolved = coordinator(secure=True).for_member(member(1, 2, host="ch-1-2.internal"))
    assert (resolved.host, resolved.port, resolved.scheme) == ("ch-1-2.internal", 8443, "https")
    assert (resolved.username, resolved.password) == ("u", "p")
    assert resolved.database == ""  # member statements are fully qualified; a missing database must not fail a connect


def test_member_http_port_overrides_the_connection_port() -> None:
    resolved = coordinator(member_http_port=8123).for_member(member(1, 1))
    assert (resolved.host, resolved.port) == ("ch-1-1.internal", 8123)


def test_member_endpoint_map_is_explicit_and_complete() -> None:
    options = {"member_endpoints": {"1:1": "10.0.0.5:18123", "1:2": "[::1]:18124"}}
    first = coordinator(**options).for_member(member(1, 1))
    assert (first.host, first.port) == ("10.0.0.5", 18123)
    assert coordinator(**options).for_member(member(1, 2)).host == "::1"
    with pytest.raises(DponeError) as caught:
        coordinator(**options).for_member(member(1, 3))
    assert caught.value.code == "DPONE_CLICKHOUSE_MEMBER_ENDPOINT_UNRESOLVED"
    assert "10.0.0.5" not in str(caught.value)


@pytest.mark.parametrize(
    "extra",
    [
        {"member_endpoints": {"1:1": "ch-a:8123", "1:2": "CH-A:8123"}},  # two members, one endpoint
        {"member_endpoints": {"1:1": "[::1]:8123", "1:2": "::1:8123"}},
        {"member_endpoints": {"01:1": "ch-a:8123"}},  # not the spelling system.clusters gives
        '{"member_endpoints": {"1:1": "ch-a:8123", "1:1": "ch-b:8123"}}',  # a key given twice
        {"member_endpoints": '{"1:1": "ch-a:8123", "1:1": "ch-b:8123"}'},
    ],
)
def test_a_duplicated_member_endpoint_is_refused_when_the_connection_is_read(extra: object) -> None:
    with pytest.raises(DponeError) as caught:
        DponeClickHouseHook.parse_options(extra)  # type: ignore[arg-type]
    assert caught.value.code == "DPONE_CONNECTION_INVALID"
    assert "ch-a" not in str(caught.value)


def test_an_endpoint_builds_one_client_per_purpose_when_threads_ask_at_once() -> None:
    built: list[object] = []
    closed: list[object] = []
    gate = threading.Barrier(8)

    def factory(purpose: Purpose, session: str | None) -> object:
        time.sleep(0.01)  # a connect takes time: every thread is inside the factory's window
        client = object()
        built.append(client)
        return client

    endpoint = Endpoint(factory, closer=closed.append)

    def ask() -> object:
        gate.wait()
        return endpoint.reader()

    with ThreadPoolExecutor(max_workers=8) as pool:
        clients = list(pool.map(lambda _: ask(), range(8)))
    assert len(built) == 1 and all(client is built[0] for client in clients)
    endpoint.close()
    assert closed == built
