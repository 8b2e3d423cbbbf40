"""The maintenance operators of a full refresh, each a task of a maintenance DAG that acts on one stopped DAG run.

``DponeAbortOperator``: only LOCKED, STAGING and STAGED may be aborted (once a publication permit
exists the DDL may have reached a member: ``ABORT_AFTER_PUBLICATION``); the record is first fenced ABORTING (a
concurrent publish try loses its permit write), then exactly the candidates the operation owns are dropped, member by
member and by UUID, a foreign table under the candidate name stops the abort untouched; then ABORTED, which is
terminal, never success, and lets the next run take the target. An abort that stopped half way resumes from ABORTING.

``DponeVoidPermitOperator``: a run stopped with ``DISPATCH_UNPROVEN`` holds its target until its
permit is voided with proof that the first request can no longer execute: the coordinator restarted later than the
permit time plus the dispatch deadline, the send timeout and the clock-skew margin, no queue entry carries the
permit's token, and every member shows exactly the pre-dispatch UUIDs. The proof is recorded in the authority and the
operation returns to the phase its step is dispatched from; clearing the stopped task then takes a new permit. Any
missing proof fails the task with a ``VOID_*`` code that names it, and nothing changes.

``DponeReleaseOperator``: a run whose publish stopped after its swap (``PUBLISHED_CONTENT_DIVERGENT``,
``PUBLICATION_FOREIGN_UUID``, ``PUBLICATION_MIXED``) holds its target for good: abort is refused once the DDL ran.
After the operator restored the predecessor on every member (``decision="restored"``) or made every member serve
the content they accept (``decision="accepted"`` with its ``accepted_row_count``), the task checks every member
against that decision, and one authority CAS records it (RELEASED), which frees the target for a new DAG run. A
mismatch fails the task with a ``RELEASE_*`` code and changes nothing.

The operation is named by the DAG run that started it (its DAG id and run id) together with the same manifest: the
operation id is derived from exactly those, as every task of that run derives it. ``operation_id`` (e.g. copied from
the failed run's log or XCom) is an optional guard: the task refuses to act when it names another operation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from airflow.sdk import Context

from airflow_provider_dpone.cluster.protocol.service import publication_service
from airflow_provider_dpone.cluster.values.authority.release import ReleaseDecision
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.operators.full_refresh import DponePublicationOperator, TaskSession
from airflow_provider_dpone.operators.reporting import XCom, log_transition, raise_for

OPERATION_MISMATCH = "DPONE_CLICKHOUSE_CLUSTER_ABORT_OPERATION_MISMATCH"


@dataclass(frozen=True)
class _TargetRun:
    """The DAG run whose operation is acted on, standing where the task's own run would."""

    dag_id: str
    run_id: str


class _TargetRunOperator(DponePublicationOperator):
    """Acts on the operation of another DAG run (``target_dag_id``, ``target_run_id``, the same manifest)."""

    template_fields: Sequence[str] = (
        "manifest",
        "dpone_clickhouse_conn_id",
        "target_dag_id",
        "target_run_id",
        "operation_id",
    )
    ui_color = "#f4c7c3"

    def __init__(
        self, *, target_dag_id: str, target_run_id: str, operation_id: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.target_dag_id = target_dag_id
        self.target_run_id = target_run_id
        self.operation_id = operation_id

    def execute(self, context: Context) -> XCom:
        if not (isinstance(self.target_dag_id, str) and self.target_dag_id.strip()) or not (
            isinstance(self.target_run_id, str) and self.target_run_id.strip()
        ):
            raise_for(
                DponeError("DPONE_CLICKHOUSE_CLUSTER_REQUEST_INVALID", "target_dag_id, target_run_id"), self.task_log
            )
        target = {**context, "dag_run": _TargetRun(self.target_dag_id.strip(), self.target_run_id.strip())}
        return self._run(cast(Context, target), self._guarded)

    def _guarded(self, session: TaskSession) -> XCom:
        request = session.request
        expected = (self.operation_id or "").strip()
        if expected and expected != request.operation_id:
            raise DponeError(OPERATION_MISMATCH, f"run derives {request.operation_id}, expected {expected[:16]}")
        return self._act(session)

    def _act(self, session: TaskSession) -> XCom:
        raise NotImplementedError


class DponeAbortOperator(_TargetRunOperator):
    """Abort the operation of one full-refresh DAG run before publication, and free the target for the next run.

    :param manifest: the manifest of the full-refresh DAG (the same one: it enters the operation id). Templated.
    :param target_dag_id: the DAG id of the run to abort. Templated.
    :param target_run_id: the run id of the run to abort (e.g. ``{{ params.run_id }}``). Templated.
    :param operation_id: optional guard, the 64-hex operation id the run reported; the task fails with
        ``ABORT_OPERATION_MISMATCH`` (nothing touched) when the run and manifest derive another one. Templated.
    :param dpone_clickhouse_conn_id: as for the full-refresh operators. Templated.

    Idempotent: a retry after ABORTED reports ABORTED again. Pushes ``operation_id``, ``target_key`` and ``phase``.
    """

    def _act(self, session: TaskSession) -> XCom:
        result = session.service.abort()
        log_transition(self.task_log, result.phase_before, result.phase, result.operation_id)
        return {"operation_id": result.operation_id, "target_key": session.request.target_key, "phase": result.phase}


class DponeVoidPermitOperator(_TargetRunOperator):
    """Void the unproven dispatch permit of one full-refresh DAG run, with recorded proof that it can never run.

    Run it after the coordinator was restarted later than the permit time plus the margins (the runbook's steps);
    then clear the stopped task of the run: it dispatches again under a new permit. Both replication modes: the
    permit may be the publication's, the cleanup's, or (internal mode) the candidate's create or rebuild drop.

    :param manifest: the manifest of the full-refresh DAG (the same one: it enters the operation id). Templated.
    :param target_dag_id: the DAG id of the stopped run. Templated.
    :param target_run_id: the run id of the stopped run. Templated.
    :param operation_id: optional guard, as for :class:`DponeAbortOperator`. Templated.
    :param skew_margin_seconds: the clock skew allowed between workers and the coordinator (default: ``[dpone]
        void_skew_margin_seconds``, 60). Never lower it below the real skew of your clocks.
    :param dpone_clickhouse_conn_id: as for the full-refresh operators; its connect and send/receive timeouts are
        the send timeout the proof counts. Templated.
    :param retired_server_uuid: only when the coordinator the permit was pinned to lost its data directory and was
        recreated on the same host with a new ``serverUUID()`` (the void otherwise stops with ``VOID_SERVER_DIFFERS``
        for ever): the pinned UUID the detail names, stating that no process can answer with it again. The proof
        then accepts the new identity on the same host (runbook: a recreated coordinator). Empty means none.
        Templated.

    Idempotent: a retry after a void (no permit taken since) reports the same void. Pushes ``operation_id``,
    ``target_key``, ``phase``, ``step``, ``epoch``, ``correlation_token``, ``server_started_at_ms`` and ``server_uuid``.
    """

    template_fields: Sequence[str] = (*_TargetRunOperator.template_fields, "retired_server_uuid")
    ui_color = "#fbe3c2"

    def __init__(
        self, *, skew_margin_seconds: int | None = None, retired_server_uuid: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.retired_server_uuid = retired_server_uuid
        if skew_margin_seconds is not None and (
            isinstance(skew_margin_seconds, bool)
            or not isinstance(skew_margin_seconds, int)
            or skew_margin_seconds <= 0
        ):
            raise ValueError("skew_margin_seconds must be a positive integer")
        self.skew_margin_seconds = skew_margin_seconds

    def _act(self, session: TaskSession) -> XCom:
        settings = session.environment.settings
        if self.skew_margin_seconds is not None:
            settings = dataclasses.replace(settings, void_skew_margin_ms=self.skew_margin_seconds * 1000)
        service = publication_service(session.environment.ports, session.request, settings)
        result = service.void_permit(retired_server_uuid=self.retired_server_uuid or None)
        log_transition(self.task_log, result.phase_before, result.phase, result.operation_id)
        return {
            "operation_id": result.operation_id,
            "target_key": session.request.target_key,
            "phase": result.phase,
            "step": result.step,
            "epoch": result.epoch,
            "correlation_token": result.correlation_token,
            "server_started_at_ms": result.server_started_at_ms,
            "server_uuid": result.server_uuid,
        }


class DponeReleaseOperator(_TargetRunOperator):
    """Release the operation of one full-refresh DAG run whose publication stopped after its swap, by the operator's
    recorded decision, and free the target for the next run (the runbook's steps come first).

    :param manifest: the manifest of the full-refresh DAG (the same one: it enters the operation id). Templated.
    :param target_dag_id: the DAG id of the stopped run. Templated.
    :param target_run_id: the run id of the stopped run. Templated.
    :param operation_id: optional guard, as for :class:`DponeAbortOperator`. Templated.
    :param decision: ``restored`` (every member was swapped back: the predecessor serves again, with the content it
        had) or ``accepted`` (every member serves the same content, which is accepted as published). Templated.
    :param accepted_row_count: for ``accepted`` only: the row count the operator saw on every member's target (the
        task refuses when a member holds another). Templated (a whole number as text is read as that number).
    :param dpone_clickhouse_conn_id: as for the full-refresh operators. Templated.

    Idempotent: a retry after RELEASED reports the same release. Pushes ``operation_id``, ``target_key``, ``phase``,
    ``decision``, ``stopped_by``, ``accepted_row_count`` and ``target_digests`` (each member's target content digest
    by opaque member id).
    """

    template_fields: Sequence[str] = (*_TargetRunOperator.template_fields, "decision", "accepted_row_count")
    ui_color = "#d9ead3"

    def __init__(self, *, decision: str, accepted_row_count: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.decision = decision
        self.accepted_row_count = accepted_row_count

    def _act(self, session: TaskSession) -> XCom:
        decision = str(self.decision).strip()
        if decision not in ("restored", "accepted"):
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_REQUEST_INVALID", "decision: restored or accepted")
        result = session.service.release(
            cast(ReleaseDecision, decision), accepted_row_count=_row_count(self.accepted_row_count)
        )
        log_transition(self.task_log, result.phase_before, result.phase, result.operation_id)
        return {
            "operation_id": result.operation_id,
            "target_key": session.request.target_key,
            "phase": result.phase,
            "decision": result.decision,
            "stopped_by": result.stopped_by,
            "accepted_row_count": result.accepted_row_count,
            "target_digests": result.target_digests,
        }


def _row_count(value: int | str | None) -> int | None:
    """The declared row count: a non-negative whole number, as a number or its text (an empty text is none)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_REQUEST_INVALID", "accepted_row_count")
    text = str(value).strip()
    if not text.isdigit():
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_REQUEST_INVALID", "accepted_row_count: a whole number")
    return int(text)
