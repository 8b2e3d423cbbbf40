"""The transfer's source table is an Asset inlet: the DAG processor records it, so the Asset graph shows the reader.

The example transfer DAGs are parsed from the session's DAGs folder and collected as Airflow's DAG processor collects
assets for the metadata database (``AssetModelOperation.collect`` over the serialized DAG).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.dag_processing.collection import AssetModelOperation
from airflow.serialization.serialized_objects import LazyDeserializedDAG

from airflow_provider_dpone.core.manifest import NativeTransferManifest, read_manifest_input
from airflow_provider_dpone.operators.native_transfer import DponeNativeTransferOperator, source_asset
from tests.support.airflow.dag_runner import load_example

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("file_name", ["clickhouse_to_mssql_raw_snapshot.py", "clickhouse_to_postgres_raw_snapshot.py"])
def test_the_example_transfer_reads_its_source_table_as_an_asset(dags_folder: Path, file_name: str) -> None:
    dag = load_example(dags_folder, file_name).dag
    (task,) = [task for task in dag.tasks if isinstance(task, DponeNativeTransferOperator)]
    source = read_manifest_input(task.manifest, kind=NativeTransferManifest).source
    uri = f"clickhouse-connection://{source.connection_id}/{source.database}/{source.table}"
    collected = AssetModelOperation.collect({dag.dag_id: LazyDeserializedDAG.from_dag(dag)})
    assert [(task_id, asset.uri) for task_id, asset in collected.inlet_references[dag.dag_id]] == [(task.task_id, uri)]


def test_explicit_inlets_win_and_a_templated_manifest_has_none() -> None:
    from airflow.sdk import Asset

    published = Asset(uri="clickhouse-cluster://analytics/db/events")
    explicit = DponeNativeTransferOperator(task_id="t", manifest="{{ var.value.manifest }}", inlets=[published])
    assert explicit.inlets == [published]
    assert DponeNativeTransferOperator(task_id="u", manifest="{{ var.value.manifest }}").inlets == []
    assert source_asset("{{ var.value.manifest }}") is None
