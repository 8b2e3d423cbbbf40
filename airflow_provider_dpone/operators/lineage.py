"""OpenLineage facets of the operators (``get_openlineage_facets_on_complete``), from the manifest and the task's counts.

Dataset names follow the OpenLineage naming spec, so lineage joins with other producers:

* a ClickHouse server: namespace ``clickhouse://{host}:{port}``, name ``{database}.{table}``;
* the published cluster table: namespace ``clickhouse-cluster://{cluster}``, name ``{database}.{table}``: the table
  exists once per member, so the cluster (never a host) names it, as the Airflow Asset does;
* SQL Server ``mssql://{host}:{port}`` and PostgreSQL ``postgres://{host}:{port}``, name
  ``{database}.{schema}.{table}``.

A publication source is a query: its tables come from OpenLineage's own SQL parser (ClickHouse dialect), and the
query text travels as the job's ``sql`` facet. Counts come from what the task itself proved (the sealed artifact, the
commit receipt, the transfer's published rows); nothing is re-read for lineage. Only connection host and port are
looked up, never a secret. The OpenLineage classes are imported here, when the listener asks, so neither parsing a
DAG file nor running a task without the OpenLineage provider imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_dpone.core.manifest import ClusterPublicationManifest
from airflow_provider_dpone.core.manifest.cluster import ClickHouseQuerySource

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_provider_dpone.core.manifest.transfer import NativeTransferManifest

_DEFAULT_PORTS = {"mssql": 1433, "postgres": 5432}


@dataclass(frozen=True)
class Moved:
    """What a finished task proved it moved: rows, and bytes where known."""

    rows: int
    size: int | None = None


def clickhouse_namespace(conn_id: str) -> tuple[str, str]:
    """``clickhouse://host:port`` of a ClickHouse connection, and its database (``default`` when unset)."""
    from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

    resolved = DponeClickHouseHook.resolve(DponeClickHouseHook.get_connection(conn_id))
    return f"clickhouse://{resolved.host}:{resolved.port}", resolved.database or "default"


def _server_namespace(scheme: str, conn_id: str) -> tuple[str, str | None]:
    from airflow.sdk import BaseHook

    from airflow_provider_dpone.core.connection_options import bare_host

    connection = BaseHook.get_connection(conn_id)
    port = connection.port or _DEFAULT_PORTS[scheme]
    return f"{scheme}://{bare_host(connection.host, conn_id)}:{port}", connection.schema or None


def source_tables(query: str, default_database: str) -> list[str]:
    """``database.table`` of every table the query reads, as OpenLineage's SQL parser sees it (ClickHouse dialect)."""
    from airflow.providers.openlineage.sqlparser import SQLParser

    parsed = SQLParser(dialect="clickhouse", default_schema=default_database).parse(query)
    return sorted({table.qualified_name for table in parsed.in_tables}) if parsed is not None else []


def publication_lineage(
    manifest: ClusterPublicationManifest, moved: Moved, *, published: bool
) -> OperatorLineage[Any, Any]:
    """Stage: the source tables read (rows and bytes of the sealed artifact). Publish: the same inputs, and the
    published cluster table with its committed row count."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import (
        input_statistics_input_dataset,
        output_statistics_output_dataset,
        sql_job,
    )

    inputs: list[Any] = []
    job_facets: dict[str, Any] = {}
    source = manifest.source
    if isinstance(source, ClickHouseQuerySource):
        namespace, database = clickhouse_namespace(source.connection_id)
        statistics = input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
            rowCount=moved.rows, size=moved.size
        )
        read: dict[str, Any] = {} if published else {"inputStatistics": statistics}
        inputs = [InputDataset(namespace, name, inputFacets=read) for name in source_tables(source.query, database)]
        job_facets["sql"] = sql_job.SQLJobFacet(query=source.query, dialect="clickhouse")
    outputs: list[Any] = []
    cluster = manifest.cluster
    if published and cluster is not None:
        written: dict[str, Any] = {
            "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(rowCount=moved.rows)
        }
        name = f"{manifest.sink.database}.{manifest.sink.table}"
        outputs.append(OutputDataset(f"clickhouse-cluster://{cluster.name}", name, outputFacets=written))
    return OperatorLineage(inputs=inputs, outputs=outputs, job_facets=job_facets)


def transfer_lineage(manifest: NativeTransferManifest, moved: Moved) -> OperatorLineage[Any, Any]:
    """The ClickHouse source table (rows read) and the SQL Server or PostgreSQL target table (rows published)."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import input_statistics_input_dataset, output_statistics_output_dataset

    source, sink = manifest.source, manifest.sink
    source_namespace, _ = clickhouse_namespace(source.connection_id)
    read: dict[str, Any] = {
        "inputStatistics": input_statistics_input_dataset.InputStatisticsInputDatasetFacet(rowCount=moved.rows)
    }
    target_namespace, database = _server_namespace(sink.type, sink.connection_id)
    name = ".".join(part for part in (database, sink.target_schema, sink.table) if part)
    written: dict[str, Any] = {
        "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(rowCount=moved.rows)
    }
    return OperatorLineage(
        inputs=[InputDataset(source_namespace, f"{source.database}.{source.table}", inputFacets=read)],
        outputs=[OutputDataset(target_namespace, name, outputFacets=written)],
    )
