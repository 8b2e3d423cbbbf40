"""The example DAG's objects on the embedded cluster, for the tests that publish there (a helper module).

``embedded_manifest`` creates the demo objects in a fresh database and points the example manifest at them;
``existing_target`` gives every member an equal pre-existing target (per member or ``ON CLUSTER``); ``member_rows`` and ``member_tables`` read
every member directly, so assertions never trust what the operators report.
"""

from __future__ import annotations

import hashlib
from types import ModuleType
from typing import Any

from dpone_embedded import EmbeddedCluster, Endpoint

from tests.support.airflow.dag_runner import provision_example, retargeted_manifest


def embedded_manifest(example: ModuleType, cluster: EmbeddedCluster, database: str, *, rows: int) -> dict[str, Any]:
    """Create the example's demo objects (authority table, a source of ``rows`` rows) in ``database``; return the
    example manifest pointed at the embedded cluster, that database and that source."""
    provision_example(example, cluster, database, rows=rows)
    return retargeted_manifest(example, cluster=cluster.cluster_name, database=database)


def add_source_row(cluster: EmbeddedCluster, database: str, row_id: int) -> None:
    """One more row in the demo source (on the coordinator), so the next publication differs from the last."""
    client = cluster.client()
    try:
        client.command(
            f"INSERT INTO `{database}`.source_table (id, name, amount, updated_at) VALUES ({row_id}, 'n', NULL, 0)"
        )
    finally:
        client.close()


def existing_target(cluster: EmbeddedCluster, database: str, *, on_cluster: bool = False) -> None:
    """An equal pre-existing target with two rows on every member: the operation adopts it as its baseline.

    Created member by member, each table has its own UUID; created once with ``CREATE TABLE ... ON CLUSTER`` (the
    common layout of an Atomic database), every member holds the same UUID."""
    columns = "(id UInt64, name String, amount Nullable(Decimal(18, 4)), updated_at DateTime64(3, 'UTC'))"
    if on_cluster:
        coordinator = cluster.client()
        try:
            coordinator.command(
                f"CREATE TABLE `{database}`.target_table ON CLUSTER {cluster.cluster_name} {columns} "
                "ENGINE = MergeTree ORDER BY id"
            )
        finally:
            coordinator.close()
    for member in cluster.members:
        client = cluster.client(member)
        try:
            if not on_cluster:
                client.command(f"CREATE TABLE `{database}`.target_table {columns} ENGINE = MergeTree ORDER BY id")
            client.command(f"INSERT INTO `{database}`.target_table VALUES (1, 'old', NULL, 0), (2, 'old', 1.5, 0)")
        finally:
            client.close()


def member_uuids(cluster: EmbeddedCluster, database: str) -> list[set[str]]:
    """The UUIDs of every table of ``database`` on each member."""
    uuids = []
    for member in cluster.members:
        client = cluster.client(member)
        try:
            rows = client.query(f"SELECT toString(uuid) FROM system.tables WHERE database = '{database}'")
            uuids.append({str(row[0]) for row in rows.result_rows})
        finally:
            client.close()
    return uuids


def member_rows(cluster: EmbeddedCluster, database: str, table: str = "target_table") -> list[tuple[int, int] | None]:
    """(rows, distinct ids) of ``table`` on each member; ``None`` where absent."""
    result: list[tuple[int, int] | None] = []
    for member in cluster.members:
        client = cluster.client(member)
        try:
            exists = client.command(f"EXISTS TABLE `{database}`.`{table}`")
            if not int(exists):
                result.append(None)
                continue
            rows, ids = client.query(f"SELECT count(), uniqExact(id) FROM `{database}`.`{table}`").result_rows[0]
            result.append((int(rows), int(ids)))
        finally:
            client.close()
    return result


def member_tables(cluster: EmbeddedCluster, database: str) -> list[list[str]]:
    """The table names of ``database`` on each member, sorted."""
    names = []
    for member in cluster.members:
        client = cluster.client(member)
        try:
            rows = client.query(f"SELECT name FROM system.tables WHERE database = '{database}' ORDER BY name")
            names.append([str(row[0]) for row in rows.result_rows])
        finally:
            client.close()
    return names


def table_content(cluster: EmbeddedCluster, process: Endpoint, database: str, table: str) -> tuple[int, str]:
    """(rows, SHA-256 of every row in id order) of the example's ``database.table`` on one process of the cluster."""
    client = cluster.client(process)
    try:
        rows = client.query(f"SELECT id, name, amount, updated_at FROM `{database}`.`{table}` ORDER BY id").result_rows
    finally:
        client.close()
    digest = hashlib.sha256()
    for row in rows:
        digest.update(repr(row).encode())
    return len(rows), digest.hexdigest()
