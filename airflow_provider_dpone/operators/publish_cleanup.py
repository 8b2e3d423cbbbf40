"""``DponePublishOperator`` and ``DponeCleanupOperator``: one fenced ``ON CLUSTER`` DDL each, waited for safely.

Both call their dispatching entry point once per try (``publish`` / ``cleanup``): it dispatches the one DDL from
STAGED / COMMITTED, or resumes the bound one; it never re-dispatches a DDL that may have reached the queue. While the
bound entry is still running on some member the task waits:

* deferrable: the initiator answers after at most :data:`DEFERRABLE_DDL_TASK_TIMEOUT_SECONDS`, and a task whose entry
  is still unfinished defers at once to :class:`ClusterDDLQueueTrigger`, which polls only that entry. On the event
  the task resumes in a new process, re-reads the authority and calls the read-only reconcile
  (``reconcile_publication`` / ``reconcile_cleanup``); the event and XCom are never trusted. Still in progress ->
  defer again, at most ``max_deferrals`` times, then a retryable failure (the retry resumes the same entry).
* not deferrable: the initiator waits up to ``[dpone] ddl_task_timeout_seconds``; then the task polls the same
  read-only reconcile in-process for at most ``timeout_seconds``, then fails retryably.

Both waits start short and grow to ``poll_interval`` seconds between polls
(:func:`~airflow_provider_dpone.triggers.ddl_queue.poll_delay`).

``deferrable`` defaults to ``[operators] default_deferrable`` (``False`` when unset), as in every official provider.

Nothing is ever re-dispatched: a bound permit that never reached the queue fails closed (``DISPATCH_UNPROVEN``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Final, Literal, NoReturn, TypeVar

from airflow.sdk import Asset, Context, conf
from airflow.sdk.bases.xcom import BaseXCom

from airflow_provider_dpone.cluster.protocol.after_commit import ChangedAfterCommitError
from airflow_provider_dpone.cluster.protocol.results import CleanupResult, InProgress, PublishResult
from airflow_provider_dpone.cluster.values.publication_receipts import PublicationReceipt
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest import ClusterPublicationManifest, ManifestInput
from airflow_provider_dpone.operators.full_refresh import (
    DponePublicationOperator,
    TaskSession,
    asset_uri,
    read_manifest,
)
from airflow_provider_dpone.operators.lineage import Moved
from airflow_provider_dpone.operators.reporting import (
    XCom,
    in_progress_line,
    log_receipt,
    log_transition,
    receipt_xcom,
    short,
)
from airflow_provider_dpone.triggers.ddl_queue import (
    ClusterDDLQueueTrigger,
    ProgressGate,
    poll_delay,
    polls_within,
    progress_heartbeat_seconds,
)

Result = PublishResult | CleanupResult
T = TypeVar("T")


DEFERRABLE_DDL_TASK_TIMEOUT_SECONDS: Final[int] = 1
"""The initiator's wait (``distributed_ddl_task_timeout``) for a deferrable task's ``ON CLUSTER`` DDL.

Long enough for healthy hosts to finish a metadata-only statement, so the common case commits without a deferral;
short enough that an entry a host has not finished frees the worker at once. Not 0: the reconcile that follows the
dispatch would then nearly always run while the hosts execute the entry, and nearly every deferrable publication
would defer once for a statement the hosts finish within a second.
"""


def publication_asset(manifest: ManifestInput) -> Asset:
    """The Airflow Asset a committed publication of ``manifest`` updates (cluster, database, table; no host)."""
    return Asset(uri=asset_uri(read_manifest(manifest)))


def _templated(value: Any) -> bool:
    """Whether a manifest input holds a Jinja expression or statement in any of its strings."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(_templated(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_templated(item) for item in value)
    return False


class _WaitingOperator(DponePublicationOperator):
    """Publish and cleanup: one dispatching entry point, one read-only reconcile, and a bounded wait between them.

    :param deferrable: wait for an unfinished DDL in the triggerer instead of the worker (default:
        ``[operators] default_deferrable``, ``False`` when unset).
    :param poll_interval: the longest wait between queue polls (trigger) or reconciles (in-process); the first
        waits are shorter.
    :param timeout_seconds: bound of one wait (one deferral, or the in-process loop) before a retryable failure.
    :param max_deferrals: deferrals per try before a retryable failure (the retry resumes the same entry).
    """

    stage_name: Literal["publication", "cleanup"]

    def __init__(
        self,
        *,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float = 5.0,
        timeout_seconds: float = 3600.0,
        max_deferrals: int = 3,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if poll_interval < 0 or timeout_seconds <= 0 or max_deferrals < 1:
            raise ValueError("poll_interval >= 0, timeout_seconds > 0 and max_deferrals >= 1")
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.timeout_seconds = timeout_seconds
        self.max_deferrals = max_deferrals

    # --- per-operator hooks ---------------------------------------------------------------------------------------

    def _dispatching(self, session: TaskSession) -> Result:
        raise NotImplementedError

    def _reconcile(self, session: TaskSession) -> Result:
        raise NotImplementedError

    def _finished(self, context: Context, session: TaskSession, receipt: PublicationReceipt) -> XCom:
        log_receipt(self.task_log, receipt)
        return receipt_xcom(receipt)

    # --- entry points ---------------------------------------------------------------------------------------------

    def execute(self, context: Context) -> XCom:
        self._log_wait_mode()

        def first(session: TaskSession) -> XCom:
            result = self._dispatching(session)
            log_transition(self.task_log, result.phase_before, result.phase, session.request.operation_id)
            return self._settle(context, session, result, round_=0)

        return self._run(context, first)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> XCom:
        """Resume after the trigger's event: re-read the authority and reconcile (read-only)."""
        event = event or {}
        round_ = int(event.get("round", 0)) + 1
        self.task_log.info(
            "woken by the queue trigger: %s, %s of %s hosts finished, %s failed (entry %s)",
            event.get("status", "unknown"),
            event.get("finished", "?"),
            event.get("expected_hosts", "?"),
            event.get("failed", "?"),
            event.get("entry") or "not observed",
        )

        def resume(session: TaskSession) -> XCom:
            result = self._reconcile(session)
            log_transition(self.task_log, result.phase_before, result.phase, session.request.operation_id)
            return self._settle(context, session, result, round_=round_)

        return self._run(context, resume)

    # --- waiting --------------------------------------------------------------------------------------------------

    def _ddl_task_timeout_seconds(self) -> int | None:
        return DEFERRABLE_DDL_TASK_TIMEOUT_SECONDS if self.deferrable else None

    def _log_wait_mode(self) -> None:
        """One line at the start of the task: where an unfinished DDL will be waited for, and why."""
        if self.deferrable:
            self.task_log.info(
                "deferrable=True: the initiator answers within %d s, then an unfinished ON CLUSTER DDL "
                "is waited for in the triggerer (up to %d deferrals)",
                DEFERRABLE_DDL_TASK_TIMEOUT_SECONDS,
                self.max_deferrals,
            )
        else:
            self.task_log.info(
                "deferrable=False: the initiator waits up to [dpone] ddl_task_timeout_seconds, then an "
                "unfinished ON CLUSTER DDL is polled in the worker at most %.1f s apart for at most %.0f s "
                "(set deferrable=True, or [operators] default_deferrable = true, to free the worker)",
                self.poll_interval,
                self.timeout_seconds,
            )

    def _settle(self, context: Context, session: TaskSession, result: Result, *, round_: int) -> XCom:
        if not isinstance(result, InProgress):
            return self._finished(context, session, result.receipt)
        progress = ProgressGate(progress_heartbeat_seconds())
        if progress.due(in_progress_line(result)):
            self.task_log.info("%s", in_progress_line(result))
        if self.deferrable and result.correlation_token is not None:
            if round_ >= self.max_deferrals:
                raise DponeError(
                    "DPONE_CLICKHOUSE_CLUSTER_DDL_WAIT_EXHAUSTED",
                    f"{self.stage_name} epoch {result.epoch} still in progress after {round_} deferrals",
                )
            self._defer(session, result, round_)
        return self._poll_in_process(context, session, result, progress)

    def _defer(self, session: TaskSession, progress: InProgress, round_: int) -> NoReturn:
        assert progress.correlation_token is not None
        attempts = polls_within(self.timeout_seconds, self.poll_interval)
        trigger = ClusterDDLQueueTrigger(
            conn_id=session.conn_id,
            cluster=session.request.cluster,
            correlation_token=progress.correlation_token,
            expected_hosts=progress.member_count,
            entry=progress.entry,
            stage=self.stage_name,
            round=round_,
            poll_interval=self.poll_interval,
            max_attempts=attempts,
            heartbeat_seconds=progress_heartbeat_seconds(),
        )
        self.task_log.info("deferring to the DDL queue trigger (round %d)", round_ + 1)
        self.defer(
            trigger=trigger,
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout_seconds + 60 * max(self.poll_interval, 1)),
        )

    def _poll_in_process(self, context: Context, session: TaskSession, result: Result, progress: ProgressGate) -> XCom:
        """Reconcile every ``poll_interval`` until the entry finishes; log the waiting line when it changes, and again
        as a heartbeat every ``[dpone] progress_heartbeat_seconds``."""
        deadline = time.monotonic() + self.timeout_seconds
        polls = 1  # the dispatching call's own reconcile
        while isinstance(result, InProgress):
            if time.monotonic() >= deadline:
                raise DponeError(
                    "DPONE_CLICKHOUSE_CLUSTER_DDL_WAIT_EXHAUSTED",
                    f"{self.stage_name} epoch {result.epoch} still in progress after {self.timeout_seconds:.0f} s",
                )
            time.sleep(poll_delay(polls, self.poll_interval))
            polls += 1
            result = self._reconcile(session)
            if isinstance(result, InProgress) and progress.due(in_progress_line(result)):
                self.task_log.info("%s", in_progress_line(result))
        return self._finished(context, session, result.receipt)


class DponePublishOperator(_WaitingOperator):
    """Publish the staged generation with one fenced ``EXCHANGE``/``RENAME ... ON CLUSTER``; succeed only on COMMITTED.

    Declares the target as an Airflow Asset outlet (``clickhouse-cluster://<cluster>/<database>/<table>``) unless
    ``outlets`` is given or the manifest is templated (its table is known only when the task runs; pass ``outlets``): the asset event is emitted only when the task succeeds, which is only when every member
    exposes the new generation and the COMMITTED receipt is durable, and once per generation: a try whose generation
    Airflow's asset-event records already hold for this run (a cleared publish or run) has no outlets. Pushes the
    redacted commit receipt.

    Once COMMITTED, every member's target is observed again; the receipt's ``after_commit`` holds the look. A target
    written after the publication's check fails the task (``PUBLISHED_CHANGED_AFTER_COMMIT``, terminal, with the
    ``published_changed_after_commit`` alert) after the receipt is logged and pushed: COMMITTED stands, no asset event
    is emitted and downstream tasks do not run; a retry looks again and never publishes again.
    """

    stage_name = "publication"
    _lineage: tuple[ClusterPublicationManifest, Moved] | None = None

    def __init__(self, *, manifest: ManifestInput, outlets: Any = None, **kwargs: Any) -> None:
        if outlets is None:
            # a templated manifest names its table only when the task runs: no default outlet at parse time
            outlets = [] if _templated(manifest) else [publication_asset(manifest)]
        super().__init__(manifest=manifest, outlets=outlets, **kwargs)
        self.declared_outlets = list(self.outlets)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage: the source tables (and query), and the published cluster table with its committed rows."""
        from airflow_provider_dpone.operators.lineage import publication_lineage

        return None if self._lineage is None else publication_lineage(*self._lineage, published=True)

    def _dispatching(self, session: TaskSession) -> Result:
        return session.service.publish()

    def _reconcile(self, session: TaskSession) -> Result:
        return session.service.reconcile_publication()

    def _run(self, context: Context, action: Callable[[TaskSession], T]) -> T:
        """As every task, and a publication committed over a target that changed after its check fails only after
        its receipt (with the look after COMMITTED) is logged and pushed: the task is red, downstream does not run."""

        def looked(session: TaskSession) -> T:
            try:
                return action(session)
            except ChangedAfterCommitError as error:
                receipt = error.committed.receipt
                log_receipt(self.task_log, receipt)
                ti = context.get("ti")
                if ti is not None:
                    ti.xcom_push(key=BaseXCom.XCOM_RETURN_KEY, value=receipt_xcom(receipt))
                raise

        return super()._run(context, looked)

    def _finished(self, context: Context, session: TaskSession, receipt: PublicationReceipt) -> XCom:
        value = super()._finished(context, session, receipt)
        self._lineage = (session.manifest, Moved(receipt.row_count))
        extra: dict[str, Any] = {
            "operation_id": receipt.operation_id,
            "generation_id": receipt.generation_id,
            "row_count": receipt.row_count,
            "members": len(receipt.members),
        }
        # Airflow emits one event per outlet of a successful try: an outlet whose event for this generation Airflow
        # already records for this run (an earlier try succeeded, then the run or the task was cleared) is dropped
        # for this try, so each generation is announced once
        # (outside the task runner, e.g. a bare ``execute``, there are no outlet events and no records to read)
        outlet_events = context.get("outlet_events")
        if outlet_events is None:
            return value
        generation = receipt.generation_id
        announced = [outlet for outlet in self.declared_outlets if _announced(context, outlet, generation)]
        if announced:
            self.task_log.info("generation %s was announced by an earlier try", short(generation))
        self.outlets = [outlet for outlet in self.declared_outlets if outlet not in announced]
        for outlet in self.outlets:
            if isinstance(outlet, Asset):
                outlet_events[outlet].extra.update(extra)
        return value


def _announced(context: Context, outlet: Any, generation_id: str) -> bool:
    """Whether Airflow's own asset-event records hold this DAG run's event of ``outlet`` for ``generation_id``.

    Read through the task's execution API (the events of the asset since the run's ``run_after``, which precedes
    every try of the run), the same records the Assets view shows; never from XCom or the authority.
    """
    if not isinstance(outlet, Asset):
        return False
    from airflow.sdk.execution_time.context import InletEventsAccessor

    dag_run = context["dag_run"]
    events = InletEventsAccessor(asset_name=outlet.name, asset_uri=outlet.uri).after(dag_run.run_after.isoformat())
    return any(
        event.source_dag_id == dag_run.dag_id
        and event.source_run_id == dag_run.run_id
        and (event.extra or {}).get("generation_id") == generation_id
        for event in events
    )


class DponeCleanupOperator(_WaitingOperator):
    """Drop exactly the bound predecessor on every member (one fenced ``DROP ... ON CLUSTER``), then COMPLETED.

    Runs only after a commit; objects it cannot prove are the bound predecessor are retained. Pushes the receipt in
    phase COMPLETED.
    """

    stage_name = "cleanup"

    def _dispatching(self, session: TaskSession) -> Result:
        return session.service.cleanup()

    def _reconcile(self, session: TaskSession) -> Result:
        return session.service.reconcile_cleanup()
