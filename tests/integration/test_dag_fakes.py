"""The example DAG under real Airflow (``dag.test()``, SQLite metadata DB) over the in-memory fake cluster.

Every test asserts physical outcomes in the fake world (what each member holds under the target name) and Airflow
outcomes (task states and tries), never just what the operators report about themselves.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

from airflow_provider_dpone.contracts.authority_codec import decode
from airflow_provider_dpone.contracts.authority_external import ExternalAuthorityRecord
from airflow_provider_dpone.contracts.manifest import ClusterPublicationManifest, load_manifest
from tests.integration.dag_runner import configure, load_example, run_example
from tests.integration.dpone_airflow_fakes import FakeDeployment

ROWS = ((1, "a", 10), (2, "b", None), (3, "c", 30))
BASELINE = ((7, "old", 1),)


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder)


@pytest.fixture(scope="module")
def manifest(example: ModuleType) -> ClusterPublicationManifest:
    loaded = load_manifest(example.MANIFEST)
    assert isinstance(loaded, ClusterPublicationManifest)
    return loaded


def _record(deployment: FakeDeployment, target_key: str) -> ExternalAuthorityRecord:
    row, _ = deployment.world.keeper[target_key]
    record = decode(row)
    assert isinstance(record, ExternalAuthorityRecord)
    return record


def _when(day: int) -> datetime:
    return datetime(2026, 3, day, tzinfo=UTC)


def test_full_run_completes_and_every_member_holds_the_generation(
    example: ModuleType, manifest: ClusterPublicationManifest
) -> None:
    deployment = FakeDeployment.build(manifest, rows=ROWS, baseline=BASELINE)
    configure(example, deployment.factory())
    outcome = run_example(example, logical_date=_when(1))
    assert outcome.succeeded, outcome.states
    assert outcome.tries == {"fence": 1, "stage": 1, "publish": 1, "cleanup": 1}
    expected = sorted(ROWS, key=repr)
    assert deployment.content("target_table") == [expected, expected]
    receipt = outcome.xcom["cleanup"]
    assert receipt["phase"] == "COMPLETED"
    assert receipt["row_count"] == len(ROWS)
    assert outcome.xcom["publish"]["phase"] == "COMMITTED"
    assert outcome.xcom["publish"]["generation_id"] == receipt["generation_id"]
    record = _record(deployment, receipt["target_key"])
    assert record.operation_id == receipt["operation_id"] == outcome.xcom["fence"]["operation_id"]
    # the predecessor generation is gone everywhere; nothing else was touched
    assert all(len(member.tables) == 1 for member in deployment.world.members)
    assert Counter(effect.op for effect in deployment.world.effects)["drop"] == 2
