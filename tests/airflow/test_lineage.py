"""OpenLineage facets of the publication operators, with the OpenLineage provider installed, on the embedded cluster.

Fence, stage and publish run for real (``execute``, as a worker calls it); the facets are then taken the way the
OpenLineage listener takes them when a task succeeds (``ExtractorManager.extract_metadata`` in state SUCCESS, which
calls ``get_openlineage_facets_on_complete``) and serialized as an OpenLineage event carries them.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from airflow.providers.openlineage.extractors.manager import ExtractorManager
from airflow.utils.state import TaskInstanceState
from dpone_embedded import EmbeddedCluster
from openlineage.client.serde import Serde

from airflow_provider_dpone.operators import DponeFenceOperator, DponePublishOperator, DponeStageOperator
from tests.support.airflow.dag_runner import load_example
from tests.support.airflow.embedded_example import embedded_manifest, member_rows

pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2)]

SOURCE_ROWS = 25


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder)


def context() -> Any:
    return {"dag_run": SimpleNamespace(dag_id="lineage_it", run_id="manual__lineage")}


def lineage_of(task: Any) -> dict[str, Any]:
    """The task's lineage as the listener extracts it on success, as JSON (what an OpenLineage event carries)."""
    dagrun = SimpleNamespace(run_id="manual__lineage", dag_id="lineage_it")
    task_instance = SimpleNamespace(task=task, task_id=task.task_id, dag_id="lineage_it", run_id=dagrun.run_id)
    metadata = ExtractorManager().extract_metadata(dagrun, task, TaskInstanceState.SUCCESS, task_instance)
    return {
        "inputs": [Serde.to_dict(dataset) for dataset in metadata.inputs],
        "outputs": [Serde.to_dict(dataset) for dataset in metadata.outputs],
        "job_facets": {name: Serde.to_dict(facet) for name, facet in metadata.job_facets.items()},
    }


def test_stage_and_publish_report_the_source_query_the_published_table_and_row_counts(
    example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(embedded_cluster.connection_json()))
    manifest = embedded_manifest(example, embedded_cluster, fresh_database, rows=SOURCE_ROWS)
    fence = DponeFenceOperator(task_id="fence", manifest=manifest)
    stage = DponeStageOperator(task_id="stage", manifest=manifest)
    publish = DponePublishOperator(task_id="publish", manifest=manifest, deferrable=False, poll_interval=0.2)
    assert lineage_of(stage)["inputs"] == [], "nothing is reported before the task has run"
    fence.execute(context())
    staged = stage.execute(context())
    receipt = publish.execute(context())
    assert member_rows(embedded_cluster, fresh_database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2

    source = {
        "namespace": f"clickhouse://{embedded_cluster.coordinator.host}:{embedded_cluster.coordinator.port}",
        "name": f"{fresh_database}.source_table",
    }
    sql = {"query": manifest["source"]["query"], "dialect": "clickhouse"}

    staged_lineage = lineage_of(stage)
    (read,) = staged_lineage["inputs"]
    assert {key: read[key] for key in ("namespace", "name")} == source
    statistics = read["inputFacets"]["inputStatistics"]
    assert (statistics["rowCount"], statistics["size"]) == (SOURCE_ROWS, staged["artifact_bytes"])
    assert staged_lineage["outputs"] == [], "candidates are not a user-visible dataset"
    assert {key: staged_lineage["job_facets"]["sql"][key] for key in sql} == sql

    published = lineage_of(publish)
    assert [{key: dataset[key] for key in ("namespace", "name")} for dataset in published["inputs"]] == [source]
    (written,) = published["outputs"]
    assert written["namespace"] == f"clickhouse-cluster://{embedded_cluster.cluster_name}"
    assert written["name"] == f"{fresh_database}.target_table"
    assert written["outputFacets"]["outputStatistics"]["rowCount"] == receipt["row_count"] == SOURCE_ROWS
    assert {key: published["job_facets"]["sql"][key] for key in sql} == sql
    assert lineage_of(fence)["outputs"] == [] and lineage_of(fence)["inputs"] == []
