"""The Test button on the embedded cluster: every broken member and every broken authority table is one coded line.

Each case breaks one thing a user can get wrong (a closed member port, a wrong password, an endpoint that is another
member, a missing or wrong-schema authority table, a second Keeper path) and asserts the line's code and which
member it names; the good connection passes every check.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from dpone_embedded.cluster import EmbeddedCluster

from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_COLUMNS, AUTHORITY_TABLE
from airflow_provider_dpone.cluster.values.identities import member_id
from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook
from tests.support.fixtures.object_store import StoreBackend

pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(password="s3cret-pw")]

AUTHORITY = ", ".join(f"`{name}` {type_}" for name, type_ in AUTHORITY_COLUMNS)


def member(shard: int, replica: int) -> str:
    """A member's one name: its opaque id (as in the task logs and XCom) and its position (never its host)."""
    return f"member {member_id(shard, replica)} (shard {shard}, replica {replica})"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_sql(cluster: EmbeddedCluster, target: Any, statement: str) -> None:
    client = cluster.client(target)
    try:
        client.command(statement)
    finally:
        client.close()


def create_authority(cluster: EmbeddedCluster, target: Any, database: str, *, columns: str = AUTHORITY) -> None:
    run_sql(
        cluster,
        target,
        f"CREATE TABLE `{database}`.`{AUTHORITY_TABLE}` ({columns})"
        f" ENGINE = KeeperMap('/dpone/authority/{database}') PRIMARY KEY target_key",
    )


@pytest.fixture
def authority_database(embedded_cluster: EmbeddedCluster, fresh_database: str) -> str:
    """``fresh_database`` with the exact authority table on the coordinator and every member."""
    for endpoint in embedded_cluster.endpoints:
        create_authority(embedded_cluster, endpoint, fresh_database)
    return fresh_database


def press_test(
    monkeypatch: pytest.MonkeyPatch, embedded: EmbeddedCluster, *, password: str | None = None, **extra: Any
) -> tuple[bool, str]:
    """The Test button's answer for the embedded connection with ``extra`` merged into its extra."""
    connection = embedded.connection_json()
    connection["extra"] = {**connection["extra"], **extra}
    if password is not None:
        connection["password"] = password
    monkeypatch.setenv("AIRFLOW_CONN_CHECKED", json.dumps(connection))
    ok, message = DponeClickHouseHook(dpone_clickhouse_conn_id="checked").test_connection()
    assert "127.0.0.1" not in message and embedded.password not in message
    return ok, message


def codes(message: str) -> list[str]:
    return [line.split(":", 1)[0] for line in message.splitlines()]


def test_a_good_connection_passes_every_check(
    monkeypatch: pytest.MonkeyPatch, embedded_cluster: EmbeddedCluster, authority_database: str
) -> None:
    ok, message = press_test(
        monkeypatch, embedded_cluster, cluster=embedded_cluster.cluster_name, authority_database=authority_database
    )
    assert ok, message
    assert f"2 members of {embedded_cluster.cluster_name}" in message and authority_database in message


def test_closed_member_ports_fail_with_one_line_per_member(
    monkeypatch: pytest.MonkeyPatch, embedded_cluster: EmbeddedCluster
) -> None:
    endpoints = {member.member_key: f"127.0.0.1:{closed_port()}" for member in embedded_cluster.members}
    # the walkthrough's false "ok": the coordinator answers, every member endpoint is a closed port
    ok, message = press_test(monkeypatch, embedded_cluster, member_endpoints=endpoints)
    assert not ok
    assert codes(message) == ["DPONE_CLICKHOUSE_MEMBER_UNREACHABLE"] * 2
    assert f"[{member(1, 1)} identity read" in message and f"[{member(1, 2)} identity read" in message
    ok, message = press_test(
        monkeypatch, embedded_cluster, cluster=embedded_cluster.cluster_name, member_endpoints={"1:1": endpoints["1:1"]}
    )
    assert not ok
    assert codes(message) == ["DPONE_CLICKHOUSE_MEMBER_UNREACHABLE", "DPONE_CLICKHOUSE_MEMBER_ENDPOINT_UNRESOLVED"]


def test_a_wrong_password_is_refused_credentials(
    monkeypatch: pytest.MonkeyPatch, embedded_cluster: EmbeddedCluster
) -> None:
    ok, message = press_test(monkeypatch, embedded_cluster, password="wrong", cluster=embedded_cluster.cluster_name)
    assert not ok and codes(message) == ["DPONE_CLICKHOUSE_AUTHENTICATION_FAILED"]


def test_an_endpoint_that_is_another_member_is_an_identity_mismatch(
    monkeypatch: pytest.MonkeyPatch, embedded_cluster: EmbeddedCluster
) -> None:
    first, second = embedded_cluster.members
    swapped = {first.member_key: second.address, second.member_key: first.address}
    ok, message = press_test(
        monkeypatch, embedded_cluster, cluster=embedded_cluster.cluster_name, member_endpoints=swapped
    )
    assert not ok and codes(message) == ["DPONE_CLICKHOUSE_MEMBER_IDENTITY_MISMATCH"] * 2
    assert f"{member(1, 1)}: answers as shard 1, replica 2" in message
    assert f"{member(1, 2)}: answers as shard 1, replica 1" in message
    coordinator_as_member = {first.member_key: first.address, second.member_key: embedded_cluster.coordinator.address}
    ok, message = press_test(monkeypatch, embedded_cluster, member_endpoints=coordinator_as_member)
    assert not ok and f"{member(1, 2)}: answers as no member the coordinator lists" in message


def test_a_missing_authority_table_is_named_on_every_facade(
    monkeypatch: pytest.MonkeyPatch, embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    ok, message = press_test(
        monkeypatch, embedded_cluster, cluster=embedded_cluster.cluster_name, authority_database=fresh_database
    )
    assert not ok
    assert codes(message) == ["DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TABLE_UNSUPPORTED"] * 3
    for facade in ("coordinator", member(1, 1), member(1, 2)):
        assert f"absent on members ['{facade}']" in message
    ok, message = press_test(
        monkeypatch, embedded_cluster, cluster=embedded_cluster.cluster_name, authority_database="no_such_database"
    )
    assert not ok and codes(message) == ["DPONE_CLICKHOUSE_CLUSTER_DATABASE_NOT_ATOMIC"] * 3


def test_a_wrong_schema_or_a_second_keeper_path_is_one_line(
    monkeypatch: pytest.MonkeyPatch, embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    create_authority(embedded_cluster, "coordinator", fresh_database)
    create_authority(embedded_cluster, "member1", fresh_database)
    create_authority(embedded_cluster, "member2", fresh_database, columns=AUTHORITY.replace("UInt64", "UInt32"))
    ok, message = press_test(
        monkeypatch, embedded_cluster, cluster=embedded_cluster.cluster_name, authority_database=fresh_database
    )
    assert not ok and message.splitlines() == [
        line for line in message.splitlines() if f"{member(1, 2)}: columns" in line
    ]
    assert codes(message) == ["DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TABLE_UNSUPPORTED"]
    run_sql(embedded_cluster, "member2", f"DROP TABLE `{fresh_database}`.`{AUTHORITY_TABLE}` SYNC")
    run_sql(
        embedded_cluster,
        "member2",
        f"CREATE TABLE `{fresh_database}`.`{AUTHORITY_TABLE}` ({AUTHORITY})"
        " ENGINE = KeeperMap('/dpone/authority/elsewhere') PRIMARY KEY target_key",
    )
    ok, message = press_test(
        monkeypatch, embedded_cluster, cluster=embedded_cluster.cluster_name, authority_database=fresh_database
    )
    assert not ok and codes(message) == ["DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TABLE_UNSUPPORTED"]
    assert "engine expressions differ" in message


def test_an_unknown_cluster_is_named(monkeypatch: pytest.MonkeyPatch, embedded_cluster: EmbeddedCluster) -> None:
    ok, message = press_test(monkeypatch, embedded_cluster, cluster="no_such_cluster")
    assert not ok and codes(message) == ["DPONE_CLICKHOUSE_CLUSTER_NOT_DEFINED"]
    assert "[cluster no_such_cluster]" in message


def test_the_test_button_refuses_a_configured_stage_store_that_accepts_a_second_write(
    monkeypatch: pytest.MonkeyPatch, embedded_cluster: EmbeddedCluster, store_backend: StoreBackend
) -> None:
    """``[dpone] native_transfer_base`` set: the same create-once probe as a transfer task start, on ``file://`` and
    on S3 (moto's server); the fault is a store that ignores the conditional write."""
    monkeypatch.setenv("AIRFLOW__DPONE__NATIVE_TRANSFER_BASE", store_backend.url)
    ok, message = press_test(monkeypatch, embedded_cluster, cluster=embedded_cluster.cluster_name)
    assert ok, message
    with store_backend.ignoring_conditional_writes():
        ok, message = press_test(monkeypatch, embedded_cluster, cluster=embedded_cluster.cluster_name)
    assert not ok and codes(message) == ["native_transfer.stage_store_overwrites"]
    assert store_backend.url.split("//", 1)[1] not in message
    assert store_backend.objects() == [], "no probe object is left"
