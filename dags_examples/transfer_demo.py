"""What the two transfer example DAGs share: their demo source, created on the source connection when absent.

The source of both examples is ``events.raw_events``, a ``ReplacingMergeTree`` of an Atomic database on the server
of ``dpone_clickhouse_default`` (with the embedded cluster: its coordinator). ``demo_setup`` creates it when absent,
in four separate inserts (duplicate keys, row versions, an identical duplicate and a delete marker: 7 raw rows, 5 of
them inside the SQL Server example's window ``[2026-09-01, 2026-09-02)``), and never touches an existing table.
Demo-only: a real source already exists, and the transfer never creates one. A failure is the provider's coded line
(``operators.reporting.on_coordinator``), never a driver traceback.
"""

from __future__ import annotations

from pathlib import Path

RAW_EVENTS = (
    "(id UInt64, ver UInt64, is_deleted UInt8, payload Nullable(String), event_time DateTime64(3, 'UTC'), "
    "amount Nullable(Decimal(18, 4)))"
)
BATCHES = (
    "(1, 1, 0, 'a', '2026-09-01 00:00:00.001', 1.5), (2, 1, 0, NULL, '2026-09-01 08:00:00', 0)",
    "(1, 2, 0, 'b', '2026-09-01 09:00:00', 2), (3, 1, 0, '', '2026-08-31 23:59:59.999', NULL)",
    "(1, 2, 0, 'b', '2026-09-01 09:00:00', 2), (4, 1, 0, '0', '2026-09-02 00:00:00', -0.0001)",
    "(2, 2, 1, NULL, '2026-09-01 10:00:00', 0)",
)


def prepare_source(client: object, database: str, table: str) -> int:
    """Create ``database.table`` with its four inserts when absent; return its raw row count."""
    command = client.command  # type: ignore[attr-defined]
    command(f"CREATE DATABASE IF NOT EXISTS `{database}` ENGINE = Atomic")
    command(
        f"CREATE TABLE IF NOT EXISTS `{database}`.`{table}` {RAW_EVENTS} "
        "ENGINE = ReplacingMergeTree(ver, is_deleted) PARTITION BY toYYYYMMDD(event_time) ORDER BY id"
    )
    if int(command(f"SELECT count() FROM `{database}`.`{table}`")) == 0:
        for batch in BATCHES:
            command(f"INSERT INTO `{database}`.`{table}` VALUES {batch}")
    return int(command(f"SELECT count() FROM `{database}`.`{table}`"))


def ensure_demo_source(manifest: Path, task_id: str = "demo_setup") -> int:
    """``prepare_source`` for the manifest's source relation, through its source connection."""
    from airflow_provider_dpone.core.manifest import load_manifest
    from airflow_provider_dpone.core.manifest.transfer import NativeTransferManifest
    from airflow_provider_dpone.operators.reporting import on_coordinator

    loaded = load_manifest(manifest)
    assert isinstance(loaded, NativeTransferManifest)
    source = loaded.source
    return on_coordinator(
        source.connection_id, task_id, lambda client: prepare_source(client, source.database, source.table)
    )
