"""The example DAG under real Airflow on the embedded ClickHouse cluster (real engines, real clickhouse-connect).

Nothing is faked here: the operators build the real adapters through the hook from the ``dpone_clickhouse_default``
connection (``AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT``), the trigger polls the real (emulated) distributed DDL queue
with the async client, and faults are armed in the embedded cluster's processes. Each test publishes into a fresh
database; assertions read every member directly.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from airflow_provider_dpone.contracts.manifest import ClusterPublicationManifest, load_manifest
from airflow_provider_dpone.embedded import EmbeddedCluster
from tests.integration.dag_runner import RunOutcome, configure, load_example, run_example

PASSWORD = "pw-Redact-Me-7f3e9a"
pytestmark = pytest.mark.embedded_cluster(members=2, password=PASSWORD)

SOURCE_ROWS = 40


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder)


@pytest.fixture
def published(
    example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """A fresh database with the demo objects, the connection exported, and the DAG pointed at that database."""
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(embedded_cluster.connection_json()))
    client = embedded_cluster.client()
    try:
        example.prepare_demo(client, cluster=embedded_cluster.cluster_name, database=fresh_database, rows=SOURCE_ROWS)
    finally:
        client.close()
    manifest = load_manifest(example.MANIFEST)
    assert isinstance(manifest, ClusterPublicationManifest)
    content = manifest.model_dump(mode="json", exclude_none=True)
    content["physical_design"]["storage"]["clickhouse"]["cluster"]["name"] = embedded_cluster.cluster_name
    content["sink"]["database"] = content["sink"]["staging_database"] = fresh_database
    content["source"]["query"] = f"SELECT id, name, amount, updated_at FROM {fresh_database}.source_table"
    configure(example, None, manifest=content, poll_interval=0.2)
    yield {"database": fresh_database, "manifest": content}
    configure(example, None)


def _members(cluster: EmbeddedCluster, database: str, table: str = "target_table") -> list[tuple[int, int] | None]:
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


def _tables(cluster: EmbeddedCluster, database: str) -> list[list[str]]:
    names = []
    for member in cluster.members:
        client = cluster.client(member)
        try:
            rows = client.query(f"SELECT name FROM system.tables WHERE database = '{database}' ORDER BY name")
            names.append([str(row[0]) for row in rows.result_rows])
        finally:
            client.close()
    return names


def _run(example: ModuleType, day: int) -> RunOutcome:
    return run_example(example, logical_date=datetime(2026, 4, day, tzinfo=UTC))


def test_two_runs_complete_and_the_second_replaces_the_first(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    published: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
) -> None:
    database = published["database"]
    capfd.readouterr()
    first = _run(example, 1)
    assert first.succeeded, first.states
    receipt = first.xcom["cleanup"]
    assert (receipt["phase"], receipt["baseline"], receipt["publication_kind"]) == ("COMPLETED", "absent", "rename")
    assert _members(embedded_cluster, database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2

    client = embedded_cluster.client()
    try:
        client.command(f"INSERT INTO `{database}`.source_table (id, name, amount, updated_at) VALUES (9001, 'x', NULL, 0)")
    finally:
        client.close()
    second = _run(example, 2)
    assert second.succeeded, second.states
    assert second.xcom["cleanup"]["baseline"] == "existing"
    assert second.xcom["cleanup"]["publication_kind"] == "exchange"
    assert second.xcom["cleanup"]["generation_id"] != receipt["generation_id"]
    assert _members(embedded_cluster, database) == [(SOURCE_ROWS + 1, SOURCE_ROWS + 1)] * 2
    authority = "__dpone_cluster_publication_authority"
    assert _tables(embedded_cluster, database) == [[authority, "target_table"]] * 2, "predecessor and candidates gone"

    # redaction: nothing a human or a downstream task sees carries the password, a host, a port or a row value
    captured = capfd.readouterr()
    seen = "\n".join([captured.out, captured.err, repr(first.xcom), repr(second.xcom)])
    assert "dpone stage: operation" in seen and "DPONE_" not in seen
    forbidden = [PASSWORD, "item-17", "item-23"]
    forbidden += [f"{m.host}:{m.port}" for m in embedded_cluster.members]
    forbidden += [f"127.0.0.1:{embedded_cluster.coordinator.port}"]
    for value in forbidden:
        assert value not in seen, f"{value!r} leaked"
