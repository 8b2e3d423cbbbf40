"""Run the example DAG with real Airflow (``dag.test()`` on SQLite) against a chosen ports factory.

The DAG module is imported from the session's DAGs folder (the copy ``dag.test()`` syncs); tests swap the operators'
``ports_factory`` and their retry policy on the in-memory task objects, which are the ones ``dag.test()`` runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from airflow_provider_dpone.operators.publication_base import DponePublicationOperator
from airflow_provider_dpone.operators.publication_environment import PortsFactory
from airflow_provider_dpone.operators.publish_cleanup import _WaitingOperator
from tests.integration.airflow_env import load_dag_file

EXAMPLE_FILE = "clickhouse_external_full_refresh.py"
TASKS = ("fence", "stage", "publish", "cleanup")


def load_example(dags_folder: Path) -> ModuleType:
    return load_dag_file("dpone_example_external_full_refresh", dags_folder / EXAMPLE_FILE)


@dataclass
class RunOutcome:
    run: Any
    states: dict[str, str]
    tries: dict[str, int]
    xcom: dict[str, Any]

    @property
    def succeeded(self) -> bool:
        return all(self.states.get(task) == "success" for task in TASKS)


def configure(
    module: ModuleType,
    factory: PortsFactory | None,
    *,
    retries: int = 3,
    deferrable: bool = True,
    poll_interval: float = 0.0,
    manifest: Any = None,
) -> None:
    """Set every task's retry policy and ports factory, and the publication tasks' manifest (default: the DAG's own)."""
    for task in module.dag.tasks:
        task.retries = retries
        task.retry_delay = timedelta(0)
        if isinstance(task, DponePublicationOperator):
            task.ports_factory = factory
            task.manifest = module.manifest if manifest is None else manifest
        if isinstance(task, _WaitingOperator):
            task.deferrable = deferrable
            task.poll_interval = poll_interval


def run_example(
    module: ModuleType, *, logical_date: datetime | None = None, skip_demo_setup: bool = True
) -> RunOutcome:
    # run_after fixes the run id ("manual__<run_after>"): running the same logical date again replaces the run under
    # the same run id, which is what a clear of the whole run is to the protocol (a same-operation retry)
    run = module.dag.test(
        logical_date=logical_date,
        run_after=logical_date,
        mark_success_pattern="demo_setup" if skip_demo_setup else None,
    )
    states: dict[str, str] = {}
    tries: dict[str, int] = {}
    xcom: dict[str, Any] = {}
    for task_id in TASKS:
        instance = run.get_task_instance(task_id)
        if instance is None:
            continue
        states[task_id] = str(instance.state)
        tries[task_id] = instance.try_number
        xcom[task_id] = instance.xcom_pull(task_ids=task_id)
    return RunOutcome(run, states, tries, xcom)


def asset_events(run: Any, uri: str) -> list[dict[str, Any]]:
    """The Asset events of ``uri`` that this DAG run emitted (their ``extra``), from the metadata database."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(AssetEvent.extra, AssetEvent.source_task_id)
            .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
            .where(
                AssetModel.uri == uri, AssetEvent.source_run_id == run.run_id, AssetEvent.source_dag_id == run.dag_id
            )
        ).all()
    return [{"task": task_id, **(extra or {})} for extra, task_id in rows]
