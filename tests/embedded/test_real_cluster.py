"""The same cluster contract against the real docker-compose cluster (opt-in: ``pytest -m real_cluster``).

``make test-real`` starts it (``docker compose up -d --wait``). Without it every test here is skipped and says why
(failed under ``make test-real``); a skipped test is not a pass.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Callable, Iterator

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError
from dpone_embedded.topology import CLICKHOUSE_VERSION

from tests.support.embedded import replication_checks as checks
from tests.support.embedded import session_checks
from tests.support.fixtures.real_cluster import DESCRIPTION, RealCluster, compose_cluster, require_reachable

pytestmark = [pytest.mark.embedded, pytest.mark.real_cluster]

QUEUE_COLUMNS_DOCUMENTED = [
    "entry", "entry_version", "initiator_host", "initiator_port", "cluster", "query", "settings",
    "query_create_time", "host", "port", "status", "exception_code", "exception_text", "query_finish_time",
    "query_duration_ms",
]  # fmt: skip


@pytest.fixture(scope="module")
def real_cluster() -> RealCluster:
    return compose_cluster()


@pytest.fixture
def real_database(real_cluster: RealCluster) -> Iterator[str]:
    name = f"real_{uuid.uuid4().hex[:12]}"
    coordinator = real_cluster.client(real_cluster.coordinator)
    coordinator.command(f"CREATE DATABASE `{name}` ON CLUSTER {real_cluster.cluster_name} ENGINE = Atomic")
    yield name
    coordinator.command(f"DROP DATABASE IF EXISTS `{name}` ON CLUSTER {real_cluster.cluster_name} SYNC")


def test_every_server_runs_the_release_the_double_embeds(real_cluster: RealCluster) -> None:
    for member in real_cluster.members:
        client = real_cluster.client(member)
        try:
            version = str(client.command("SELECT version()"))
        finally:
            client.close()
        assert version.split(".")[:2] == CLICKHOUSE_VERSION.split("."), (member.name, version)


def _four_letter_word(host: str, port: int, word: bytes) -> str:
    with socket.create_connection((host, port), timeout=3) as connection:
        connection.sendall(word)
        chunks = []
        while chunk := connection.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def test_the_keepers_form_one_ensemble_with_one_leader(real_cluster: RealCluster) -> None:
    """Three Raft servers, one leader and two followers (``mntr``), each answering on its own published port."""
    keepers = json.loads(DESCRIPTION.read_text())["keepers"]
    assert len(keepers) == 3
    states = []
    for keeper in keepers:
        require_reachable(f"Keeper {keeper['name']}", keeper["host"], int(keeper["port"]))
        report = dict(
            line.split("\t", 1)
            for line in _four_letter_word(keeper["host"], int(keeper["port"]), b"mntr").splitlines()
            if "\t" in line
        )
        states.append(report["zk_server_state"])
    assert sorted(states) == ["follower", "follower", "leader"]


def test_system_clusters_topology(real_cluster: RealCluster) -> None:
    rows = (
        real_cluster.client(real_cluster.coordinator)
        .query(
            "SELECT shard_num, replica_num, host_name, port, internal_replication FROM system.clusters"
            " WHERE cluster = {c:String} ORDER BY replica_num",
            parameters={"c": real_cluster.cluster_name},
        )
        .result_rows
    )
    assert rows == [(m.shard_num, m.replica_num, m.host_name, m.native_port, 0) for m in real_cluster.members]


def test_on_cluster_create_reaches_every_member_with_one_uuid(real_cluster: RealCluster, real_database: str) -> None:
    coordinator = real_cluster.client(real_cluster.coordinator)
    answer = coordinator.command(
        f"CREATE TABLE `{real_database}`.t ON CLUSTER {real_cluster.cluster_name} (a UInt8) ENGINE = MergeTree ORDER BY a",
        settings={"log_comment": f"real-{real_database}"},
    )
    assert isinstance(answer, list) and len(answer) == 6 * len(real_cluster.members) - (len(real_cluster.members) - 1)
    uuids = {
        real_cluster.client(m).command(f"SELECT toString(uuid) FROM system.tables WHERE database = '{real_database}'")
        for m in real_cluster.members
    }
    assert len(uuids) == 1
    statuses = coordinator.query(
        "SELECT status, exception_code FROM system.distributed_ddl_queue WHERE settings['log_comment'] = {c:String}",
        parameters={"c": f"real-{real_database}"},
    ).result_rows
    assert statuses == [("Finished", 0)] * len(real_cluster.members)
    described = coordinator.query("DESCRIBE TABLE system.distributed_ddl_queue").result_rows
    assert [row[0] for row in described] == QUEUE_COLUMNS_DOCUMENTED


def test_member_error_keeps_its_code(real_cluster: RealCluster, real_database: str) -> None:
    real_cluster.client(real_cluster.members[-1]).command(
        f"CREATE TABLE `{real_database}`.dup (a UInt8) ENGINE = Memory"
    )
    with pytest.raises(DatabaseError) as error:
        real_cluster.client(real_cluster.coordinator).command(
            f"CREATE TABLE `{real_database}`.dup ON CLUSTER {real_cluster.cluster_name} (a UInt8) ENGINE = Memory"
        )
    assert error.value.code == 57


def test_request_settings_bind_only_the_request_like_the_embedded_cluster(real_cluster: RealCluster) -> None:
    """The embedded cluster's session check (``tests/embedded/test_http_contract.py``), on a real server."""
    client = real_cluster.client(real_cluster.coordinator, session_id=f"s-{uuid.uuid4()}")
    try:
        session_checks.check_request_settings_bind_only_the_request(client)
    finally:
        client.close()


def test_keeper_map_cas(real_cluster: RealCluster, real_database: str) -> None:
    client = real_cluster.client(real_cluster.coordinator)
    table = f"`{real_database}`.authority"
    client.command(
        f"CREATE TABLE {table} (k String, v String) ENGINE = KeeperMap('/dpone/{real_database}') PRIMARY KEY k"
    )
    strict = {"keeper_map_strict_mode": 1}
    client.command(f"INSERT INTO {table} VALUES ('k', 'v0')", settings=strict)
    with pytest.raises(DatabaseError) as duplicate:
        client.command(f"INSERT INTO {table} VALUES ('k', 'v1')", settings=strict)
    assert duplicate.value.code == 999
    client.command(f"ALTER TABLE {table} UPDATE v = 'v1' WHERE k = 'k' AND _version = 0", settings=strict)
    client.command(f"ALTER TABLE {table} UPDATE v = 'stale' WHERE k = 'k' AND _version = 0", settings=strict)
    assert client.query(f"SELECT v, _version FROM {table}").result_rows == [("v1", 1)]


def test_internal_route_replicates_between_members(real_cluster: RealCluster, real_database: str) -> None:
    """The internal cluster definition (internal_replication=true) with a Replicated table, as the internal route uses."""
    coordinator = real_cluster.client(real_cluster.coordinator)
    table = f"`{real_database}`.replicated"
    coordinator.command(
        f"CREATE TABLE {table} ON CLUSTER {real_cluster.internal_cluster} (a UInt64)"
        f" ENGINE = ReplicatedMergeTree('/clickhouse/tables/{{shard}}/{real_database}/replicated', '{{replica}}')"
        " ORDER BY a"
    )
    coordinator.insert(table, [(i,) for i in range(100)], column_names=["a"])
    other = real_cluster.client(real_cluster.members[-1])
    other.command(f"SYSTEM SYNC REPLICA {table}")
    assert other.command(f"SELECT count() FROM {table}") == 100
    flags = coordinator.query(
        "SELECT DISTINCT internal_replication FROM system.clusters WHERE cluster = {c:String}",
        parameters={"c": real_cluster.internal_cluster},
    ).result_rows
    assert flags == [(1,)]


@pytest.fixture
def real_replicas(real_cluster: RealCluster) -> checks.Replicas:
    return checks.Replicas(
        real_cluster.internal_cluster,
        lambda: real_cluster.client(real_cluster.coordinator),
        tuple((lambda member=member: real_cluster.client(member)) for member in real_cluster.members),
    )


@pytest.mark.parametrize("check", checks.CHECKS, ids=lambda check: check.__name__.removeprefix("check_"))
def test_replication_like_the_embedded_cluster(
    check: Callable[[checks.Replicas, str], None], real_replicas: checks.Replicas, real_database: str
) -> None:
    """The embedded cluster's replication checks (``tests/embedded/test_internal_mode.py``), on real servers."""
    check(real_replicas, real_database)
