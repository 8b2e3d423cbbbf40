"""``DponeAbortOperator``: abort one full-refresh operation before publication, as a task of a maintenance DAG.

Seed 000 §6.7: only LOCKED, STAGING and STAGED may be aborted (once a publication permit exists the DDL may have
reached a member: ``ABORT_AFTER_PUBLICATION``); exactly the candidates the operation owns are dropped, member by
member and by UUID, a foreign table under the candidate name stops the abort untouched; then ABORTED, which is
terminal, never success, and lets the next run take the target.

The operation is named by the DAG run that started it (its DAG id and run id) together with the same manifest: the
operation id is derived from exactly those, as every task of that run derives it. ``operation_id`` (e.g. copied from
the failed run's log or XCom) is an optional guard: the task refuses to abort when it names another operation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from airflow.sdk import Context

from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.operators.full_refresh import DponePublicationOperator, TaskSession
from airflow_provider_dpone.operators.reporting import XCom, log_transition, raise_for

MISMATCH = "DPONE_CLICKHOUSE_CLUSTER_ABORT_OPERATION_MISMATCH"


@dataclass(frozen=True)
class _AbortedRun:
    """The DAG run whose operation is aborted, standing where the task's own run would."""

    dag_id: str
    run_id: str


class DponeAbortOperator(DponePublicationOperator):
    """Abort the operation of one full-refresh DAG run before publication, and free the target for the next run.

    :param manifest: the manifest of the full-refresh DAG (the same one: it enters the operation id). Templated.
    :param target_dag_id: the DAG id of the run to abort. Templated.
    :param target_run_id: the run id of the run to abort (e.g. ``{{ params.run_id }}``). Templated.
    :param operation_id: optional guard, the 64-hex operation id the run reported; the task fails with
        ``ABORT_OPERATION_MISMATCH`` (nothing touched) when the run and manifest derive another one. Templated.
    :param dpone_clickhouse_conn_id: as for the full-refresh operators. Templated.

    Idempotent: a retry after ABORTED reports ABORTED again. Pushes ``operation_id``, ``target_key`` and ``phase``.
    """

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
        aborted = {**context, "dag_run": _AbortedRun(self.target_dag_id.strip(), self.target_run_id.strip())}
        return self._run(cast(Context, aborted), self._abort)

    def _abort(self, session: TaskSession) -> XCom:
        request = session.request
        expected = (self.operation_id or "").strip()
        if expected and expected != request.operation_id:
            raise DponeError(MISMATCH, f"run derives {request.operation_id[:16]}, expected {expected[:16]}")
        result = session.service.abort()
        log_transition(self.task_log, result.phase_before, result.phase, result.operation_id)
        return {"operation_id": result.operation_id, "target_key": request.target_key, "phase": result.phase}
