"""``DponeNativeTransferOperator``: one ClickHouse table (or one fixed UTC window) into SQL Server or PostgreSQL.

The task runs the native transfer route once per try:

* the operation id is derived from dag_id + run_id + target table + normalized plan (never the try number), so an
  Airflow retry or a clear of the run is the same operation: it resumes from the journal. After source EOF that
  resume is source-free (it completes from the durable stage); a failure before EOF was settled by the failing try,
  and the next try re-extracts as a new invocation (``native_transfer.reextract_required``);
* a failure's code decides the outcome, as for every operator (:mod:`~airflow_provider_dpone.operators.reporting`):
  retryable codes let Airflow retry, terminal codes fail without retry, each as the coded block of short lines (the
  code and a few words of the cause first, the detail, the cause and the next action below);
* XCom gets redacted evidence only: ids, counts, digests, phase names. Never hosts, credentials, SQL, values or rows;
* the log shows the phases and each chunk's progress (rows, bytes);
* the source table is the task's Airflow Asset inlet (:func:`source_asset`), so the Asset graph shows what it reads.

Stage and journal live under ``stage_base`` (``s3://<conn_id>@bucket/prefix`` in production; see
:func:`~airflow_provider_dpone.hooks.stage_store.stage_base` for the default).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from airflow.sdk import Asset, BaseOperator, Context

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.operators.reporting import TaskLog, raise_for

if TYPE_CHECKING:  # the route's modules are imported when a task runs, never when a DAG file is parsed
    from airflow_provider_dpone.core.manifest import ManifestInput
    from airflow_provider_dpone.core.manifest.transfer import NativeTransferManifest
    from airflow_provider_dpone.hooks.native_transfer import OperationIdentity
    from airflow_provider_dpone.operators.lineage import Moved
    from airflow_provider_dpone.transfer.ports import JournalStore, SnapshotSourceConnector, TransferTarget
    from airflow_provider_dpone.transfer.route.route import NativeTransferRoute, RouteResult

ConnectorFactory = Callable[["NativeTransferManifest"], "SnapshotSourceConnector"]
ManifestTargetFactory = Callable[["NativeTransferManifest"], "TransferTarget"]


DEFAULT_LEASE_MINUTES: Final = 5.0


def retries_outlast_lease(retries: int, retry_delay: object, lease_minutes: float) -> bool:
    """True when the last retry starts after a dead writer's lease expired (no retries: nothing to spend)."""
    if retries <= 0:
        return True
    seconds = retry_delay.total_seconds() if isinstance(retry_delay, dt.timedelta) else float(str(retry_delay))
    return retries * seconds > lease_minutes * 60


def source_asset(manifest: ManifestInput) -> Asset | None:
    """The Asset of the transfer's source table, ``clickhouse-connection://<connection id>/<database>/<table>``: it
    names the Airflow connection, never a host. ``None`` when the manifest cannot be read when the DAG is parsed
    (a templated path or text is read when the task runs)."""
    from airflow_provider_dpone.core.manifest import NativeTransferManifest, read_manifest_input

    try:
        source = read_manifest_input(manifest, kind=NativeTransferManifest).source
    except DponeError:
        return None
    return Asset(uri=f"clickhouse-connection://{source.connection_id}/{source.database}/{source.table}")


class DponeNativeTransferOperator(BaseOperator):
    """Move one ClickHouse table into the manifest's SQL Server or PostgreSQL table.

    :param manifest: a ``.yaml`` path, inline YAML text, a mapping, or a loaded :class:`NativeTransferManifest`.
        Templated: Jinja renders the path or inline text, or every string of a mapping (not the content of a manifest
        file).
    :param stage_base: ``ObjectStoragePath`` URL of the durable stage and journal (``s3://...`` in production).
        Templated.
    :param lease_minutes: writer lease; a crashed try's custody is taken over only after it expires. Rule: the
        retries must outlast it (``retries * retry_delay > lease_minutes``), or a worker killed before EOF spends
        every retry on ``native_transfer.custody_held``; the defaults (5 minutes, and the examples' 3 retries 2 minutes
        apart) keep it, and a task that breaks it is logged with a warning when it is built.
    :param inlets: Airflow inlets (default: the source table as :func:`source_asset`).
    :param connector_factory: optional source connector builder (default: the manifest's ClickHouse connection).
    :param target_factory: optional target adapter builder (default: the manifest's SQL Server/PostgreSQL connection).
    """

    template_fields: Sequence[str] = ("manifest", "stage_base")
    ui_color = "#e8f1fb"
    _lineage: tuple[NativeTransferManifest, Moved] | None = None

    def __init__(
        self,
        *,
        manifest: ManifestInput,
        stage_base: str | None = None,
        lease_minutes: float = DEFAULT_LEASE_MINUTES,
        connector_factory: ConnectorFactory | None = None,
        target_factory: ManifestTargetFactory | None = None,
        inlets: Any = None,
        **kwargs: Any,
    ) -> None:
        if inlets is None:
            asset = source_asset(manifest)
            inlets = [] if asset is None else [asset]
        super().__init__(inlets=inlets, **kwargs)
        self.manifest = manifest
        self.stage_base = stage_base
        self.lease_minutes = lease_minutes
        if not retries_outlast_lease(int(self.retries or 0), self.retry_delay, lease_minutes):
            self.log.warning(
                "native transfer %s: retries x retry_delay does not outlast the %s-minute writer lease: a worker "
                "killed before EOF would spend every retry on native_transfer.custody_held",
                self.task_id,
                lease_minutes,
            )
        self.connector_factory = connector_factory
        self.target_factory = target_factory

    @property
    def task_log(self) -> TaskLog:
        """The task's log in the one line format of every operator."""
        return TaskLog(self.log, self.task_id)

    # -- wiring --------------------------------------------------------------------------------------------------
    def _manifest(self) -> NativeTransferManifest:
        from airflow_provider_dpone.admission import require_admissible
        from airflow_provider_dpone.core.manifest import NativeTransferManifest, read_manifest_input

        manifest = read_manifest_input(self.manifest, kind=NativeTransferManifest)
        require_admissible(manifest)
        return manifest

    def build_route(
        self, manifest: NativeTransferManifest, identity: OperationIdentity, base: str
    ) -> tuple[NativeTransferRoute, JournalStore]:
        """The hook's route of this try, with the operator's factories (if given) and its progress log."""
        from airflow_provider_dpone.hooks.native_transfer import DponeNativeTransferHook
        from airflow_provider_dpone.operators.progress import task_progress

        connector_factory, target_factory = self.connector_factory, self.target_factory
        return DponeNativeTransferHook(manifest).route(
            identity,
            base,
            lease=dt.timedelta(minutes=self.lease_minutes),
            connector=None if connector_factory is None else connector_factory(manifest),
            target=None if target_factory is None else lambda: target_factory(manifest),
            progress=task_progress(self.task_log),
        )

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage: the ClickHouse source table and the SQL Server or PostgreSQL target, with the rows moved."""
        from airflow_provider_dpone.operators.lineage import transfer_lineage

        return None if self._lineage is None else transfer_lineage(*self._lineage)

    # -- execution -----------------------------------------------------------------------------------------------
    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_dpone.hooks.native_transfer import DponeNativeTransferHook, OperationIdentity
        from airflow_provider_dpone.hooks.stage_store import require_create_once, stage_base
        from airflow_provider_dpone.operators.lineage import Moved

        try:
            manifest = self._manifest()
            if self.target_factory is None:
                DponeNativeTransferHook(manifest).require_target_connection()
            base = require_create_once(stage_base(self.stage_base))
        except DponeError as error:
            raise_for(error, self.task_log)
        dag_run = context["dag_run"]
        identity = OperationIdentity(manifest, dag_run.dag_id, dag_run.run_id)
        self.task_log.info(
            "native transfer: operation %s, plan %s, sink %s",
            identity.operation_id,
            identity.plan_digest,
            manifest.sink.type,
        )
        route, journal = self.build_route(manifest, identity, base)
        settled_before = self._settled_invocation(journal)
        try:
            result = route.run()
        except DponeError as error:
            raise_for(self._settled(error, journal, settled_before), self.task_log)
        evidence = self.evidence(manifest, identity, result, journal)
        self._lineage = (manifest, Moved(result.rows))
        self.task_log.info(
            "native transfer succeeded: %d rows, workload digest %s", result.rows, result.workload_digest
        )
        return evidence

    @staticmethod
    def _settled_invocation(journal: JournalStore) -> str | None:
        """The invocation the journal shows settled before EOF (the last one), or None."""
        from airflow_provider_dpone.transfer.route.inspection import summarize
        from airflow_provider_dpone.transfer.route.states import RouteState

        try:
            summary = summarize(journal)
        except Exception:  # noqa: BLE001 - an unreadable journal must not replace the primary error
            return None
        return summary.invocation_id if summary.state is RouteState.REEXTRACT_REQUIRED else None

    def _settled(self, error: DponeError, journal: JournalStore, settled_before: str | None) -> DponeError:
        """``error``, or ``reextract_required`` when THIS try's failing invocation was settled before EOF.

        An invocation an earlier try settled is not this try's: then this try failed for its own reason (``error``).
        """
        if not error.retryable:
            return error
        settled = self._settled_invocation(journal)
        if settled is None or settled == settled_before:
            return error
        return DponeError(
            "native_transfer.reextract_required", f"invocation {settled} settled before EOF after {error.code}"
        )

    @staticmethod
    def evidence(
        manifest: NativeTransferManifest, identity: OperationIdentity, result: RouteResult, journal: JournalStore
    ) -> dict[str, Any]:
        """Redacted evidence for XCom: ids, counts, digests and phases only."""
        from airflow_provider_dpone.transfer.route.inspection import summarize

        snapshot = manifest.source.options.native_transfer.source_snapshot
        return {
            "kind": "dpone.native-transfer-result.v1",
            "route": f"native_transfer_{manifest.sink.type}",
            "source_snapshot": None if snapshot is None else snapshot.mode.value,
            "replica_scope": None if snapshot is None else snapshot.replica_scope.value,
            "normalized_plan_digest": identity.plan_digest,
            "operation_id": result.operation_id,
            "invocation_id": result.invocation_id,
            "rows": result.rows,
            "workload_digest": result.workload_digest,
            "publication_id": result.publication_id,
            "resumed_from": result.resumed_from.value,
            "settled_invocations": list(result.settled_invocations),
            "source_connections": result.source_connections,
            "endpoint_authority_agreement": result.endpoint_authority_agreement,
            "stage_retired": result.stage_retired,
            **summarize(journal).evidence(),
        }
