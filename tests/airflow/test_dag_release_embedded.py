"""The runbook's way back from a publication stopped after its swap, external mode, under real Airflow on the embedded
cluster: the external full-refresh example DAG stops with ``PUBLISHED_CONTENT_DIVERGENT``; the operator restores (or
accepts), runs the release maintenance DAG, drops what is left by UUID, and a new run publishes
(``tests/support/cluster/release_runbook.py`` has the steps, docs/runbook.md says them)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from dpone_embedded import EmbeddedCluster

from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from tests.support.airflow.airflow_env import load_dag_file
from tests.support.airflow.dag_runner import load_example
from tests.support.cluster import release_runbook as runbook

pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2)]


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder)


@pytest.fixture(scope="module")
def maintenance(dags_folder: Path) -> ModuleType:
    return load_dag_file("dpone_example_clickhouse_external_release", dags_folder / "clickhouse_external_release.py")


@pytest.fixture
def stopped(
    example: ModuleType,
    maintenance: ModuleType,
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[AuthorityRecord]:
    with runbook.stopped_run(example, maintenance, embedded_cluster, fresh_database, monkeypatch) as record:
        yield record


@pytest.mark.parametrize("decision", ["restored", "accepted"])
def test_restored_or_accepted_by_the_runbook_then_released_and_a_new_run_publishes(
    decision: str,
    example: ModuleType,
    maintenance: ModuleType,
    embedded_cluster: EmbeddedCluster,
    fresh_database: str,
    stopped: AuthorityRecord,
    capfd: pytest.CaptureFixture[str],
) -> None:
    runbook.follow_the_runbook(
        decision, example, maintenance, embedded_cluster, fresh_database, stopped, capfd, internal=False
    )
