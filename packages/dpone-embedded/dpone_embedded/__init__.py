"""A local ClickHouse cluster on the real engine (chdb), for the demo and the tests of airflow-provider-dpone.

A test double: its own distribution (``dpone-embedded``, installed by the provider's ``[embedded]`` extra); the
provider never imports it.

Every process of the cluster is a real ClickHouse engine (chdb, one per OS process, its own data directory and
generated config) behind a loopback HTTP endpoint that speaks ClickHouse's HTTP interface, so clickhouse-connect's
ordinary sync and async clients reach it exactly as they reach a server. Only what chdb cannot do is emulated:
listening, distributed DDL (``ON CLUSTER``, ``system.distributed_ddl_queue``) and the replication of
``Replicated*MergeTree`` tables between the member engines (``system.replicas``, ``SYSTEM SYNC REPLICA``), and the
running queries (``system.processes``, ``system.query_log``, ``KILL QUERY``, cancellation on client close). See
``docs/embedded-cluster.md``.

Public API (everything else in this package is internal)::

    from dpone_embedded import EmbeddedCluster

    with EmbeddedCluster.start(directory, members=2, internal_replication=False) as cluster:
        cluster.cluster_name                  # "dpone_cluster" (or "dpone_cluster_replicated")
        cluster.coordinator                   # Endpoint(name, role, host, port, native_port, shard_num, replica_num)
        cluster.members                       # tuple of member Endpoints, by replica_num
        cluster.client("member1", database=...)        # clickhouse-connect client (sync); also async_client(...)
        cluster.connection_uri(database=...)           # Airflow connection, dpone_clickhouse type
        cluster.connection_json(database=...)          # the same as JSON; extra carries member_endpoints
        cluster.faults.pause("member2")                # DDL worker paused: a down host for the DDL queue
        cluster.faults.fail_next_ddl("member1", 57)    # next queue entry on member1 fails with code 57
        cluster.faults.fail_next_statement("member1", 241, match="INSERT")
        cluster.faults.lose_response("coordinator", match="ON CLUSTER")  # effect happens, response is lost
        cluster.faults.delay_response("member1", 2.0, match="INSERT")
        cluster.faults.pause_replication("member2")   # also stall_replication, lag_replication(member, seconds)
        cluster.faults.kill("member2"); cluster.faults.restart("member2")  # tables survive
        cluster.faults.reset()

- The coordinator is its own process: it holds the KeeperMap authority (chdb's Keeper is in-process) and initiates
  ``ON CLUSTER`` statements; it is not a replica. ``system.clusters`` on every process shows the cluster with the
  members' host ``127.0.0.1`` and their *native* ports (reserved, never served); clients reach members through
  their HTTP ports, which the connection's ``member_endpoints`` maps from ``"shard_num:replica_num"``.
- KeeperMap state lives in a process's memory and does not survive that process's restart (Code 668).
- CLI: ``python -m dpone_embedded up --dir DIR`` (also ``status``, ``down``, ``fault``, ``compose``).
- Pytest: fixtures ``embedded_cluster`` and ``fresh_database`` (``dpone_embedded.pytest_plugin``).
"""

from __future__ import annotations

__version__ = "0.1.0"

from dpone_embedded.cluster import EmbeddedCluster, Endpoint
from dpone_embedded.faults import Faults
from dpone_embedded.topology import TOPOLOGY, ClusterTopology

__all__ = ["TOPOLOGY", "ClusterTopology", "EmbeddedCluster", "Endpoint", "Faults", "__version__"]
