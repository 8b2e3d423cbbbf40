"""The common shape of the four publication operators: rebuild everything, call one entry point, report.

Each try of each task starts from nothing it did not re-derive: the manifest (re-admitted statically), the request
(from the manifest, the DAG id and the DAG run id, never the try number), a fresh environment from the ports factory,
and a fresh :class:`PublicationService`. The service re-reads the authority itself, so an Airflow retry, a
clear of one task or a clear of the whole run is a same-operation retry that resumes wherever the authority says.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from airflow.sdk import BaseOperator, Context

from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.manifest import ClusterPublicationManifest
from airflow_provider_dpone.operators.publication_environment import (
    PortsFactory,
    PublicationEnvironment,
    hook_environment,
)
from airflow_provider_dpone.operators.publication_inputs import (
    ManifestInput,
    build_request,
    declared_table,
    read_manifest,
    require_admissible,
)
from airflow_provider_dpone.operators.publication_report import observed_record
from airflow_provider_dpone.operators.task_outcome import TaskLog, raise_for
from airflow_provider_dpone.ports.publication import TableSpec
from airflow_provider_dpone.protocol.request import PublicationRequest
from airflow_provider_dpone.protocol.runtime_facts import admit_runtime
from airflow_provider_dpone.protocol.service import PublicationService, publication_service

T = TypeVar("T")


def fence_table(manifest: ClusterPublicationManifest) -> TableSpec:
    """A placeholder table definition: the manifest's sorting-key columns, untyped (``UInt8``).

    Only staging reads the table definition (to check the sealed artifact and to create candidates). The request
    model requires a valid one in every task, so a task that does not stage passes this placeholder rather than
    touching the source: the fence runs before any source I/O (seed 000 §2), and publish and cleanup must not depend
    on the source at all.
    """
    order_by = manifest.physical_design.storage.clickhouse.order_by
    return declared_table(manifest, tuple((name, "UInt8") for name in order_by) or (("fence_only", "UInt8"),))


def resolve_table(
    manifest: ClusterPublicationManifest,
    environment: PublicationEnvironment,
    fence: PublicationRequest,
    *,
    stages: bool,
) -> TableSpec:
    """The table definition of this task's request (``fence`` is the request with :func:`fence_table`).

    Once this operation has bound an artifact, its typed columns (from the authority, read-only) are the definition:
    a retry recreates candidates exactly as bound even if the source changed meanwhile. Before that, only the stage
    task resolves it from the source (metadata only), and only after runtime admission passed: a mode that does not
    match the cluster's ``internal_replication`` flag fails before the source is touched. Every other task gets
    :func:`fence_table`.
    """
    if not stages:
        return fence.table
    record = observed_record(environment.ports.authority, fence.target_key)
    if record is not None and record.operation_id == fence.operation_id and record.artifact is not None:
        return declared_table(manifest, record.artifact.schema_pairs)
    admit_runtime(environment.ports.catalog, fence)
    return environment.table()


@dataclass(frozen=True)
class TaskSession:
    """One task try's view: the admitted manifest, its environment, the request and the service."""

    manifest: ClusterPublicationManifest
    environment: PublicationEnvironment
    request: PublicationRequest
    service: PublicationService
    conn_id: str


class DponePublicationOperator(BaseOperator):
    """Base of the full-refresh operators (``fence >> stage >> publish >> cleanup``), the same in both replication
    modes: the admitted manifest's ``replication_mode`` (default ``internal``) selects the protocol, and the live
    ``system.clusters`` inventory must report the matching ``internal_replication`` flag; nothing falls back.

    :param manifest: the cluster publication manifest: a ``.yaml`` path (relative paths resolve against the DAG
        file's folder), inline YAML text, or a mapping. Every task of the DAG must get the same manifest. Templated:
        Jinja renders the path or inline text, or every string of a mapping (not the content of a manifest file).
    :param dpone_clickhouse_conn_id: the ``dpone_clickhouse`` connection of the cluster's coordinator; default: the
        manifest's ``sink.connection_id``. Templated.
    :param ports_factory: builds the protocol's ports and the extraction (default: the ClickHouse adapters through
        :class:`~airflow_provider_dpone.hooks.clickhouse.DponeClickHouseHook`). A seam for tests and alternative
        deployments; see :mod:`airflow_provider_dpone.operators.publication_environment`.
    """

    template_fields: Sequence[str] = ("manifest", "dpone_clickhouse_conn_id")
    ui_color = "#fff3c4"

    def __init__(
        self,
        *,
        manifest: ManifestInput,
        dpone_clickhouse_conn_id: str | None = None,
        ports_factory: PortsFactory | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.manifest = manifest
        self.dpone_clickhouse_conn_id = dpone_clickhouse_conn_id
        self.ports_factory = ports_factory

    @property
    def task_log(self) -> TaskLog:
        """The task's log in the one line format of every operator."""
        return TaskLog(self.log, self.task_id)

    # --- shared machinery -----------------------------------------------------------------------------------------

    def _base_dir(self, context: Context) -> Path | None:
        dag = context.get("dag")
        fileloc = getattr(dag, "fileloc", None)
        return Path(fileloc).parent if fileloc else None

    stages: bool = False
    """Whether the task's entry point stages (the only one that reads the table definition)."""

    def _ddl_task_timeout_seconds(self) -> int | None:
        """The initiator's wait for this task's ``ON CLUSTER`` DDL; ``None``: the deployment's configured bound."""
        return None

    def _run(self, context: Context, action: Callable[[TaskSession], T]) -> T:
        """Build a fresh session, run ``action``; map a :class:`DponeError` to retry or terminal failure."""
        try:
            manifest = read_manifest(self.manifest, base_dir=self._base_dir(context))
            require_admissible(manifest)
            conn_id = self.dpone_clickhouse_conn_id or manifest.sink.connection_id
            factory = self.ports_factory or hook_environment
            environment = factory(manifest, conn_id, ddl_task_timeout_seconds=self._ddl_task_timeout_seconds())
            try:
                dag_run = context["dag_run"]
                fence = build_request(
                    manifest, dag_id=dag_run.dag_id, run_id=dag_run.run_id, table=fence_table(manifest)
                )
                table = resolve_table(manifest, environment, fence, stages=self.stages)
                request = build_request(manifest, dag_id=dag_run.dag_id, run_id=dag_run.run_id, table=table)
                service = publication_service(environment.ports, request, environment.settings)
                return action(TaskSession(manifest, environment, request, service, conn_id))
            finally:
                environment.close()
        except DponeError as error:
            raise_for(error, self.task_log)
