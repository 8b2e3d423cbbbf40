"""The full refresh of one ClickHouse cluster table as Airflow tasks: what every task rebuilds, the shared operator
base, and the two pre-publication steps (``DponeFenceOperator``, ``DponeStageOperator``); publish and cleanup are in
:mod:`~airflow_provider_dpone.operators.publish_cleanup`.

Each try of each task starts from nothing it did not re-derive. It re-reads the manifest (a file path, inline YAML
text, a mapping or a model), runs static admission again, and derives the :class:`PublicationRequest` from the manifest, the
DAG id and the DAG run id, never from an upstream task's XCom and never from the try number: every try of every task
of one DAG run, and a clear of the whole run, arrive at the same ``operation_id``, while a new DAG run
derives a new one. It then gets a fresh environment from the ports factory (the hook builds it) and a fresh
:class:`PublicationService`, which re-reads the authority itself, so an Airflow retry, a clear of one task or a clear
of the whole run is a same-operation retry that resumes wherever the authority says.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.sdk import BaseOperator, Context

from airflow_provider_dpone.admission import require_admissible
from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
from airflow_provider_dpone.cluster.protocol.service import (
    Begun,
    PublicationService,
    begin,
    bound_columns,
    publication_service,
)
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest import (
    ClusterPublicationManifest,
    ManifestInput,
    normalized_plan_digest,
    read_manifest_input,
)
from airflow_provider_dpone.hooks.publication import (
    AcceptanceReaderFactory,
    PortsFactory,
    PublicationEnvironment,
    declared_table,
    with_acceptance_reader,
    with_alert_metrics,
)
from airflow_provider_dpone.operators.lineage import Moved
from airflow_provider_dpone.operators.reporting import (
    TaskLog,
    XCom,
    fence_xcom,
    log_members,
    log_transition,
    raise_for,
    short,
    stage_xcom,
)

if TYPE_CHECKING:
    import jinja2

T = TypeVar("T")


# --- what every task rebuilds ----------------------------------------------------------------------------------------


def read_manifest(manifest: ManifestInput, *, base_dir: Path | None = None) -> ClusterPublicationManifest:
    """The cluster publication manifest (:func:`read_manifest_input` of the cluster route); relative paths resolve
    against ``base_dir``."""
    return read_manifest_input(manifest, kind=ClusterPublicationManifest, base_dir=base_dir)


def cluster_name(manifest: ClusterPublicationManifest) -> str:
    cluster = manifest.cluster
    if cluster is None:  # static admission refuses this; kept for the type checker
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_REQUIRED", "physical_design.storage.clickhouse.cluster")
    return cluster.name


def build_request(manifest: ClusterPublicationManifest, *, dag_id: str, run_id: str) -> PublicationRequest:
    """The request every task of one DAG run rebuilds identically (never from the try number), once per task try."""
    bound = manifest.load.max_source_bytes
    if bound is None:  # static admission refuses this; kept for the type checker
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_SOURCE_BYTES_UNBOUNDED", "load.max_source_bytes")
    assert manifest.cluster is not None  # cluster_name() refuses a manifest without one
    return PublicationRequest(
        cluster=cluster_name(manifest),
        replication_mode=manifest.cluster.replication_mode.value,
        database=manifest.sink.database,
        target=manifest.sink.table,
        dag_id=dag_id,
        run_id=run_id,
        normalized_plan_digest=normalized_plan_digest(manifest),
        table=declared_table(manifest),
        max_source_bytes=bound,
        max_source_rows=manifest.load.max_source_rows,
        quality=manifest.quality_policy,
    )


def asset_uri(manifest: ClusterPublicationManifest) -> str:
    """The Airflow Asset URI of the published table: cluster, database and table; never a host."""
    return f"clickhouse-cluster://{cluster_name(manifest)}/{manifest.sink.database}/{manifest.sink.table}"


Columns = tuple[tuple[str, str], ...]


def resolve_columns(
    environment: PublicationEnvironment, request: PublicationRequest, *, stages: bool, fences: bool = False
) -> tuple[Columns | None, Begun | None]:
    """The source's typed columns this task needs (``None``: none), and the admission and authority read taken to
    resolve them, for the task's entry point to start from (``None``: none).

    The stage task resolves them: the columns this operation bound (:func:`bound_columns`), else the source's
    (metadata only, after runtime admission passed); its source extracts exactly those. The fence task describes the
    source (metadata only) when the quality policy observes columns, so that a selection the table cannot answer is
    refused before the fence is written, and also only after runtime admission passed (a cluster whose mode does not
    match is refused before the source is touched). No other task touches the source: the fence runs before any
    source I/O, and publish and cleanup do not depend on the source at all.
    """
    if not stages:
        if fences and request.quality is not None and request.quality.observes_columns:
            begun = begin(environment.ports, request, environment.settings)
            return environment.columns(), begun
        return None, None
    columns, begun = bound_columns(environment.ports, request, environment.settings)
    return (environment.columns() if columns is None else columns), begun


# --- the operators ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskSession:
    """One task try's view: the admitted manifest, its environment, the request and the service."""

    manifest: ClusterPublicationManifest
    environment: PublicationEnvironment
    request: PublicationRequest
    service: PublicationService
    conn_id: str
    begun: Begun | None = None
    """The admission and authority read this try already took (to resolve the columns), for its entry point to start
    from instead of admitting again."""
    columns: Columns | None = None
    """The source's typed columns, where this task needs them (stage; fence with a column-observing policy)."""


class DponePublicationOperator(BaseOperator):
    """Base of the full-refresh operators (``fence >> stage >> publish >> cleanup``), the same in both replication
    modes: the admitted manifest's ``replication_mode`` (default ``internal``) selects the protocol, and the live
    ``system.clusters`` inventory must report the matching ``internal_replication`` flag; nothing falls back.

    :param manifest: the cluster publication manifest: a ``.yaml`` path (relative paths resolve against the DAG
        file's folder), inline YAML text, a mapping or a loaded model. Every task of the DAG must get the same manifest. Templated:
        Jinja renders the path or inline text, or every string of a mapping (not the content of a manifest file).
        With durable quality replay a manifest that rendering changes is refused
        (``DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED``; seed 002: templates are unsupported).
    :param dpone_clickhouse_conn_id: the ``dpone_clickhouse`` connection of the cluster's coordinator; default: the
        manifest's ``sink.connection_id``. Templated.
    :param ports_factory: builds the protocol's ports and the extraction (default: the ClickHouse adapters built by
        :meth:`~airflow_provider_dpone.hooks.clickhouse.DponeClickHouseHook.publication_environment`). A seam for
        tests and alternative deployments; see :mod:`airflow_provider_dpone.hooks.publication`.
    :param target_acceptance_reader: keyword-only; with ``durable_quality_replay`` and target metrics, builds the
        bounded reader of the target observations from the admitted sink connection (default: a worker process per
        read, see ``docs/quality-replay.md``). A plain function, like ``ports_factory``.
    """

    template_fields: Sequence[str] = ("manifest", "dpone_clickhouse_conn_id")
    ui_color = "#fff3c4"

    stages: bool = False
    """Whether the task's entry point stages (the one whose source the typed columns come with)."""
    fences: bool = False
    """Whether the task's entry point fences (it describes the source only to admit a column-observing policy)."""

    def __init__(
        self,
        *,
        manifest: ManifestInput,
        dpone_clickhouse_conn_id: str | None = None,
        ports_factory: PortsFactory | None = None,
        target_acceptance_reader: AcceptanceReaderFactory | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.manifest = manifest
        self._manifest_as_written = copy.deepcopy(manifest)
        """Before Jinja renders ``manifest``: a durable quality replay refuses a manifest rendering changed."""
        self.dpone_clickhouse_conn_id = dpone_clickhouse_conn_id
        self.ports_factory = ports_factory
        self.target_acceptance_reader = target_acceptance_reader

    def render_template_fields(self, context: Context, jinja_env: jinja2.Environment | None = None) -> None:
        """Keep the manifest as it stands just before Jinja renders it (whatever set it), then render."""
        self._manifest_as_written = copy.deepcopy(self.manifest)
        super().render_template_fields(context, jinja_env)

    @property
    def task_log(self) -> TaskLog:
        """The task's log in the one line format of every operator."""
        return TaskLog(self.log, self.task_id)

    def _base_dir(self, context: Context) -> Path | None:
        dag = context.get("dag")
        fileloc = getattr(dag, "fileloc", None)
        return Path(fileloc).parent if fileloc else None

    def _ddl_task_timeout_seconds(self) -> int | None:
        """The initiator's wait for this task's ``ON CLUSTER`` DDL; ``None``: the deployment's configured bound."""
        return None

    def _run(self, context: Context, action: Callable[[TaskSession], T]) -> T:
        """Build a fresh session, run ``action``; map a :class:`DponeError` to retry or terminal failure."""
        try:
            manifest = read_manifest(self.manifest, base_dir=self._base_dir(context))
            require_admissible(manifest)
            if manifest.quality_policy is not None and self.manifest != self._manifest_as_written:
                raise DponeError(
                    "DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED",
                    "the manifest is templated (Jinja changed it): durable quality replay binds a configuration that "
                    "must not depend on the run's template context; pass the manifest without templates",
                )
            conn_id = self.dpone_clickhouse_conn_id or manifest.sink.connection_id
            if self.ports_factory is None:  # the hook (and with it every client) only when a task runs
                from airflow_provider_dpone.hooks.clickhouse import hook_environment

                factory: PortsFactory = hook_environment
            else:
                factory = self.ports_factory
            environment = factory(manifest, conn_id, ddl_task_timeout_seconds=self._ddl_task_timeout_seconds())
            close = environment.close
            environment = with_alert_metrics(environment)
            try:
                if self.target_acceptance_reader is not None:
                    environment = with_acceptance_reader(environment, self.target_acceptance_reader)
                dag_run = context["dag_run"]
                request = build_request(manifest, dag_id=dag_run.dag_id, run_id=dag_run.run_id)
                columns, begun = resolve_columns(environment, request, stages=self.stages, fences=self.fences)
                service = publication_service(environment.ports, request, environment.settings)
                return action(TaskSession(manifest, environment, request, service, conn_id, begun, columns))
            finally:
                close()
        except DponeError as error:
            raise_for(error, self.task_log)


class DponeFenceOperator(DponePublicationOperator):
    """Fence the target in the Keeper authority before any source data is read (phase LOCKED), or resume this run's
    fence. With a durable quality policy that observes columns, the source query is described first (metadata only):
    a selected column the result does not have, or a policy the deployment cannot observe, fails here with
    ``DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED`` before anything is written.

    Another unresolved operation on the same target (an earlier DAG run that has not completed, or was not aborted)
    fails this task without retry: there is no lease stealing. A cluster whose ``internal_replication`` flag does not
    match the manifest's ``replication_mode`` fails here, before any source I/O (``REPLICATION_MODE_MISMATCH``).
    Pushes ``operation_id``, ``target_key``, ``phase`` and ``replication_mode``.
    """

    fences = True

    def execute(self, context: Context) -> XCom:
        return self._run(context, self._fence)

    def _fence(self, session: TaskSession) -> XCom:
        result = session.service.fence(session.columns)
        log_transition(self.task_log, result.phase_before, result.phase, result.operation_id)
        self.task_log.info("target %s held by operation %s", short(result.target_key), result.operation_id)
        return fence_xcom(result)


class DponeStageOperator(DponePublicationOperator):
    """Seal the artifact (once per operation) and stage it until every member holds exactly it (READY, then STAGED).

    External mode: one candidate per member, each loaded directly. Internal mode: one replicated candidate created
    ``ON CLUSTER``, loaded once through one replica, then a bounded wait until every replica has caught up and holds
    exactly the artifact's content; a replica still behind after the bound fails the try retryably
    (``REPLICA_NOT_CONVERGED``) and the retry waits again. A retry never re-extracts once an artifact is bound and
    never appends to an ambiguous candidate: it observes and resumes, rebuilding only the exact owned candidate.
    Pushes the mode, the record schema, the generation id, the artifact digest and size, per-member stage, rows and
    rebuilds (opaque member ids) and, internal mode, the replica the load went through.
    """

    stages = True
    _lineage: tuple[ClusterPublicationManifest, Moved] | None = None

    def execute(self, context: Context) -> XCom:
        return self._run(context, self._stage)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage: the source tables (and query) this try sealed into the artifact, with its rows and bytes."""
        from airflow_provider_dpone.operators.lineage import publication_lineage

        return None if self._lineage is None else publication_lineage(*self._lineage, published=False)

    def _stage(self, session: TaskSession) -> XCom:
        from airflow_provider_dpone.operators.progress import task_progress

        ports = dataclasses.replace(session.environment.ports, progress=task_progress(self.task_log))
        service = publication_service(ports, session.request, session.environment.settings, begun=session.begun)
        assert session.columns is not None  # resolved for every stage task
        result = service.stage(session.environment.source(session.request, session.columns))
        log_transition(self.task_log, result.phase_before, result.phase, result.operation_id)
        log_members(self.task_log, result)
        self.task_log.info(
            "generation %s: %d members READY",
            (result.generation_id or "-")[:16],
            result.ready_members,
        )
        if result.artifact is not None:
            self._lineage = (session.manifest, Moved(result.artifact.row_count, result.artifact.byte_size))
        return stage_xcom(result)
