"""Session fixtures of the integration suite on the Airflow test environment of ``tests/integration/airflow_env.py``
(imported first, so its ``AIRFLOW__*`` variables are set before Airflow is): the migrated metadata database and a
DAGs folder holding every example DAG. Tests import that copy and run it with ``dag.test()`` (tasks run in-process on
the in-memory task objects, so a test may swap the operators' ``ports_factory`` seam before running).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.airflow_env import EXAMPLES, bind_session_database, copy_examples


@pytest.fixture(scope="session")
def airflow_db() -> Iterator[Path]:
    """Bind Airflow's ORM to the session's SQLite database, created (or copied from the cache) once."""
    yield from bind_session_database()


@pytest.fixture(scope="session")
def dags_folder(airflow_db: Path) -> Path:
    """The session's DAGs folder with a copy of every example DAG and its manifests."""
    return copy_examples(dag_file.name for dag_file in EXAMPLES.glob("*.py"))


@pytest.fixture
def alert_metrics(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The Airflow metrics the provider's alerts increment during the test (``Stats.incr`` names, in order)."""
    from airflow_provider_dpone.hooks import alerts

    counted: list[str] = []

    class Stats:
        @staticmethod
        def incr(stat: str) -> None:
            counted.append(stat)

    monkeypatch.setattr(alerts, "Stats", Stats)
    return counted
