"""Stage and publish tries in two worker processes with different local directories, as two Celery workers run them.

Each worker is its own Python process with its own host name, its own ``AIRFLOW_HOME`` (so its own worker-local
default store) and its own ``[dpone]`` settings; they share only the embedded cluster and the Airflow connection. What is asserted is read
from the engines and the authority: without a shared store nothing is written at all; with each worker's own
``file://`` store a retry on the other worker names the setting instead of failing as a corrupt artifact, and the
sealing worker still resumes; with one shared store the other worker completes the operation.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from dpone_embedded import EmbeddedCluster

from tests.support.airflow.dag_runner import load_example
from tests.support.airflow.embedded_example import embedded_manifest, member_rows
from tests.support.airflow.workers import Worker
from tests.support.cluster.replica_checks import authority_record
from tests.support.fixtures.object_store import StoreBackend

ROWS = 40
pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2)]


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder, "clickhouse_external_full_refresh.py")


@pytest.fixture
def manifest(example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str) -> dict[str, Any]:
    return embedded_manifest(example, embedded_cluster, fresh_database, rows=ROWS)


def test_a_worker_local_default_store_is_refused_before_anything_is_written(
    tmp_path: Path, embedded_cluster: EmbeddedCluster, fresh_database: str, manifest: dict[str, Any]
) -> None:
    worker = Worker(tmp_path / "worker-a", embedded_cluster, manifest)
    assert worker.run("fence", "stage") == ["DPONE_ARTIFACT_STORE_WORKER_LOCAL"] * 2
    assert authority_record(embedded_cluster, fresh_database) is None
    assert not (tmp_path / "worker-a" / "dpone").exists()
    declared = Worker(tmp_path / "worker-b", embedded_cluster, manifest, single_worker="True")
    assert declared.run("fence") == ["LOCKED"]  # a declared one-worker deployment keeps the local default


def test_a_retry_on_a_worker_without_the_artifact_names_the_setting_and_the_sealing_worker_resumes(
    tmp_path: Path, embedded_cluster: EmbeddedCluster, fresh_database: str, manifest: dict[str, Any]
) -> None:
    a_home, b_home = tmp_path / "worker-a", tmp_path / "worker-b"
    first = Worker(a_home, embedded_cluster, manifest, artifact_base=f"file://{a_home}/artifacts")
    second = Worker(b_home, embedded_cluster, manifest, artifact_base=f"file://{b_home}/artifacts")
    assert first.run("fence", "stage-then-die") == ["LOCKED", "died"]
    assert second.run("stage") == ["DPONE_ARTIFACT_STORE_NOT_SHARED"]
    record = authority_record(embedded_cluster, fresh_database)
    assert record is not None and record.phase.value == "STAGING"
    assert member_rows(embedded_cluster, fresh_database, record.candidate_name) == [(0, 0), (0, 0)]
    assert first.run("stage") == ["STAGED"]
    assert second.run("publish") == ["COMMITTED"]
    assert member_rows(embedded_cluster, fresh_database) == [(ROWS, ROWS)] * 2


def test_with_one_shared_store_the_other_worker_completes_the_stage_and_publishes(
    tmp_path: Path,
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    manifest: dict[str, Any],
    s3_store: StoreBackend,
) -> None:
    """The shared store is S3 (moto's server, ``[dpone] artifact_base = s3://<conn_id>@bucket/...``): the artifact the
    dead worker sealed is reopened by the other worker's process from the store alone. (A shared ``file://`` mount:
    ``test_dag_embedded_internal.py``, through ``kill_mid_stage_then_retry_elsewhere``.)"""
    store_backend = s3_store
    shared, connections = f"{store_backend.url}/artifacts", store_backend.connections
    first = Worker(tmp_path / "worker-a", embedded_cluster, manifest, connections, artifact_base=shared)
    second = Worker(tmp_path / "worker-b", embedded_cluster, manifest, connections, artifact_base=shared)
    assert first.run("fence", "stage-then-die") == ["LOCKED", "died"]
    sealed = [key for key in store_backend.objects("artifacts") if key.endswith(".native")]
    assert len(sealed) == 1 and sealed[0].startswith("artifacts/sha256/"), "the dead worker sealed its artifact there"
    assert second.run("stage", "publish") == ["STAGED", "COMMITTED"]
    assert member_rows(embedded_cluster, fresh_database) == [(ROWS, ROWS)] * 2
    assert [key for key in store_backend.objects("artifacts") if key.endswith(".native")] == sealed
