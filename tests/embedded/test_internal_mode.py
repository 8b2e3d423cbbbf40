"""A three-member cluster in internal-replication mode: the topology it reports, and what chdb cannot do."""

from __future__ import annotations

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

from airflow_provider_dpone.embedded import TOPOLOGY, EmbeddedCluster

pytestmark = pytest.mark.embedded_cluster(members=3, internal_replication=True)


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


def test_replicated_tables_are_refused_not_hung(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    client = embedded_cluster.client("member1")
    with pytest.raises(DatabaseError) as error:
        client.command(
            f"CREATE TABLE `{fresh_database}`.r (a UInt8) ENGINE = ReplicatedMergeTree('/t/{{shard}}', '{{replica}}')"
            " ORDER BY a"
        )
    assert error.value.code == 48
    coordinator = embedded_cluster.client("coordinator")
    with pytest.raises(DatabaseError) as on_cluster:
        coordinator.command(
            f"CREATE TABLE `{fresh_database}`.r ON CLUSTER {embedded_cluster.cluster_name} (a UInt8)"
            " ENGINE = ReplicatedMergeTree ORDER BY a"
        )
    assert on_cluster.value.code == 48
