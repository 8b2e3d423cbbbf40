"""A three-member cluster in internal-replication mode: its topology, and Replicated*MergeTree held to the same
checks a real ClickHouse cluster passes (``replication_checks.py``, also run by ``test_real_cluster.py``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError
from dpone_embedded import TOPOLOGY, EmbeddedCluster

from tests.support.embedded import replication_checks as checks

pytestmark = [pytest.mark.embedded, pytest.mark.embedded_cluster(members=3, internal_replication=True)]


@pytest.fixture
def replicas(embedded_cluster: EmbeddedCluster) -> checks.Replicas:
    return checks.Replicas(
        embedded_cluster.cluster_name,
        lambda: embedded_cluster.client("coordinator"),
        tuple((lambda member=member: embedded_cluster.client(member)) for member in embedded_cluster.members),
    )


def test_topology_and_on_cluster_on_three_members(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    assert embedded_cluster.cluster_name == TOPOLOGY.internal_cluster
    assert [m.replica_num for m in embedded_cluster.members] == [1, 2, 3]
    client = embedded_cluster.client("coordinator")
    flags = client.query(
        "SELECT cluster, groupUniqArray(internal_replication), count() FROM system.clusters GROUP BY cluster ORDER BY cluster"
    ).result_rows
    assert flags == [(TOPOLOGY.external_cluster, [0], 3), (TOPOLOGY.internal_cluster, [1], 3)]
    client.command(
        f"CREATE TABLE `{fresh_database}`.t ON CLUSTER '{{cluster}}' (a UInt8) ENGINE = MergeTree ORDER BY a"
    )
    for member in embedded_cluster.members:
        assert embedded_cluster.client(member).command(f"EXISTS TABLE `{fresh_database}`.t") == 1


@pytest.mark.parametrize("check", checks.CHECKS, ids=lambda check: check.__name__.removeprefix("check_"))
def test_replication_like_a_real_cluster(
    check: Callable[[checks.Replicas, str], None], replicas: checks.Replicas, fresh_database: str
) -> None:
    check(replicas, fresh_database)


def test_macros_the_process_lacks_and_replicated_databases(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    """The coordinator has no ``shard``/``replica`` macros (it is no replica): ClickHouse's NO_ELEMENTS_IN_CONFIG.
    A ``Replicated`` database is not emulated and is refused, not hung."""
    coordinator = embedded_cluster.client("coordinator")
    with pytest.raises(DatabaseError) as missing:
        coordinator.command(
            f"CREATE TABLE `{fresh_database}`.t UUID '00000000-0000-4000-8000-000000000001' (a UInt8)"
            " ENGINE = ReplicatedMergeTree ORDER BY a"
        )
    assert missing.value.code == 139
    assert "No macro 'shard' in config" in str(missing.value)
    assert coordinator.command(f"EXISTS TABLE `{fresh_database}`.t") == 0
    with pytest.raises(DatabaseError) as database:
        embedded_cluster.client("member1").command(
            "CREATE DATABASE replicated_db ENGINE = Replicated('/db/{shard}', '{shard}', '{replica}')"
        )
    assert database.value.code == 48
