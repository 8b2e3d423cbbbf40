"""What the full-refresh example DAGs share: the demo scaffolding, and the standalone run that prints the receipt.

Each example's manifest names its own cluster of the embedded topology (one ``embedded up`` lists both in
``system.clusters``: ``dpone_cluster`` reports ``internal_replication=false``, ``dpone_cluster_replicated`` reports
``true``, over the same servers) and its own database, so every example runs in one Airflow against one embedded
cluster and one connection. For a cluster of your own, copy the example and its manifest and set the cluster name,
database and table there.

The scaffolding is demo-only: a real deployment already has its Atomic database, the KeeperMap authority table on
every member, and its source. The publication protocol never creates its own source or authority. A failure of the
scaffolding is the provider's coded line (``operators.reporting.on_coordinator``), never a driver traceback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

CONN_ID = "dpone_clickhouse_default"
SOURCE_COLUMNS = "id UInt64, name String, amount Nullable(Decimal(18, 4)), updated_at DateTime64(3, 'UTC')"

DEMO_ROWS = 1000
"""Rows the demo source gets when it is absent (ids 1..DEMO_ROWS, a few NULL amounts)."""


def prepare_demo(
    client: Any,
    *,
    cluster: str,
    database: str,
    rows: int = DEMO_ROWS,
    replicated_target: str | None = None,
    target: str = "target_table",
) -> int:
    """Create what the demo needs when absent, idempotently; return the source row count.

    On every member (``ON CLUSTER``) and on the coordinator: the Atomic database and the KeeperMap authority table
    the protocol fences with (one shared Keeper path). On the coordinator (where the source query runs): the source
    table ``source_table``, filled once. With ``replicated_target`` (the target's ``PARTITION BY`` and ``ORDER BY``
    clause), also an empty ``ReplicatedMergeTree`` table ``target`` created ``ON CLUSTER``: one replicated table whose replicas share a Keeper
    path, the table internal mode publishes into (the first run then exchanges it instead of renaming into place).
    """
    from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_COLUMNS, AUTHORITY_TABLE

    authority_columns = ", ".join(f"`{name}` {type_}" for name, type_ in AUTHORITY_COLUMNS)
    authority = (
        f"CREATE TABLE IF NOT EXISTS `{database}`.`{AUTHORITY_TABLE}` ({authority_columns}) "
        f"ENGINE = KeeperMap('/dpone/authority/{database}') PRIMARY KEY target_key"
    )
    for on_cluster in (f" ON CLUSTER `{cluster}`", ""):
        client.command(f"CREATE DATABASE IF NOT EXISTS `{database}`{on_cluster} ENGINE = Atomic")
        client.command(authority.replace(" (", f"{on_cluster} (", 1))
    if replicated_target is not None:
        client.command(
            f"CREATE TABLE IF NOT EXISTS `{database}`.`{target}` ON CLUSTER `{cluster}` ({SOURCE_COLUMNS}) "
            f"ENGINE = ReplicatedMergeTree {replicated_target}"
        )
    client.command(
        f"CREATE TABLE IF NOT EXISTS `{database}`.source_table ({SOURCE_COLUMNS}) ENGINE = MergeTree ORDER BY id"
    )
    count = int(client.command(f"SELECT count() FROM `{database}`.source_table"))
    if count == 0:
        client.command(
            f"INSERT INTO `{database}`.source_table SELECT number + 1, concat('item-', toString(number + 1)), "
            "if(number % 10 = 0, NULL, toDecimal64(number, 4) / 100), "
            "toDateTime64('2026-01-01 00:00:00', 3, 'UTC') + toIntervalSecond(number) "
            f"FROM numbers({int(rows)})"
        )
        count = int(client.command(f"SELECT count() FROM `{database}`.source_table"))
    return count


def replicated_target_keys(manifest: Any) -> str | None:
    """``PARTITION BY ... ORDER BY ...`` of an internal-mode manifest's target (``None`` in external mode)."""
    storage = manifest.physical_design.storage.clickhouse
    if manifest.cluster is None or manifest.cluster.replication_mode.value != "internal":
        return None
    partition = f"PARTITION BY {storage.partition_by} " if storage.partition_by else ""
    return f"{partition}ORDER BY ({', '.join(storage.order_by)})"


def ensure_demo_setup(manifest: Path | dict[str, Any], conn_id: str = CONN_ID, task_id: str = "demo_setup") -> int:
    """``prepare_demo`` for ``manifest``'s cluster and database through the Airflow connection ``conn_id`` (its
    coordinator); an internal-mode manifest also gets its empty replicated target."""
    from airflow_provider_dpone.operators.full_refresh import cluster_name, read_manifest
    from airflow_provider_dpone.operators.reporting import on_coordinator

    admitted = read_manifest(manifest)
    sink = admitted.sink
    return on_coordinator(
        conn_id,
        task_id,
        lambda client: prepare_demo(
            client,
            cluster=cluster_name(admitted),
            database=sink.database,
            replicated_target=replicated_target_keys(admitted),
            target=sink.table,
        ),
    )


def receipt_of(run: Any, task_id: str = "cleanup") -> dict[str, Any] | None:
    """The redacted receipt a finished run pushed to XCom (``None`` when the task did not succeed)."""
    instance = run.get_task_instance(task_id)
    if instance is None:
        return None
    value: dict[str, Any] | None = instance.xcom_pull(task_ids=task_id)
    return value


def run_standalone(dag: Any) -> int:
    """``dag.test()`` once; print the run's state and receipt; 0 only when the receipt is COMPLETED."""
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    run = dag.test()
    receipt = receipt_of(run)
    print(json.dumps({"dag_run": run.run_id, "state": str(run.state), "receipt": receipt}, indent=2, sort_keys=True))
    return 0 if receipt is not None and receipt.get("phase") == "COMPLETED" else 1
