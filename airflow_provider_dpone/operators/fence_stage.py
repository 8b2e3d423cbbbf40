"""``DponeFenceOperator`` and ``DponeStageOperator``: the two pre-publication steps of a full refresh, in both modes."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Context

from airflow_provider_dpone.contracts.manifest import ClusterPublicationManifest
from airflow_provider_dpone.operators.lineage import Moved
from airflow_provider_dpone.operators.publication_base import DponePublicationOperator, TaskSession
from airflow_provider_dpone.operators.publication_report import (
    XCom,
    fence_xcom,
    log_members,
    log_transition,
    observed_record,
    phase_of,
    stage_xcom,
)
from airflow_provider_dpone.operators.stage_progress import StageProgress
from airflow_provider_dpone.protocol.service import publication_service


class DponeFenceOperator(DponePublicationOperator):
    """Fence the target in the Keeper authority before any source I/O (phase LOCKED), or resume this run's fence.

    Another unresolved operation on the same target (an earlier DAG run that has not completed, or was not aborted)
    fails this task without retry: there is no lease stealing. A cluster whose ``internal_replication`` flag does not
    match the manifest's ``replication_mode`` fails here, before any source I/O (``REPLICATION_MODE_MISMATCH``).
    Pushes ``operation_id``, ``target_key``, ``phase`` and ``replication_mode``.
    """

    def execute(self, context: Context) -> XCom:
        return self._run(context, self._fence)

    def _fence(self, session: TaskSession) -> XCom:
        before = phase_of(observed_record(session.environment.ports.authority, session.request.target_key))
        result = session.service.fence()
        log_transition(self.task_log, before, result.phase, result.operation_id)
        self.task_log.info("target %s held by operation %s", result.target_key[:16], result.operation_id[:16])
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
        authority = session.environment.ports.authority
        before = phase_of(observed_record(authority, session.request.target_key))
        progress = StageProgress(session.environment.ports, self.task_log)
        service = publication_service(progress.ports, session.request, session.environment.settings)
        result = service.stage(session.environment.source(session.request))
        record = observed_record(authority, session.request.target_key)
        log_transition(self.task_log, before, result.phase, result.operation_id)
        log_members(self.task_log, record)
        self.task_log.info(
            "generation %s: %d members READY",
            (result.generation_id or "-")[:16],
            result.ready_members,
        )
        if record is not None and record.artifact is not None:
            self._lineage = (session.manifest, Moved(record.artifact.row_count, record.artifact.byte_size))
        return stage_xcom(result, record)


__all__ = ["DponeFenceOperator", "DponeStageOperator"]
