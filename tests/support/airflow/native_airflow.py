"""The native transfer example DAGs in the integration suite's Airflow environment (a helper module, not a conftest).

The environment (temporary AIRFLOW_HOME, SQLite metadata database migrated once per session, no example DAGs) is
``tests/support/airflow/airflow_env.py``, bound by the conftest's session fixture ``airflow_db``; ``dag.test()`` syncs the
bundle of ``[core] dags_folder`` before it runs, so the DAG files and their manifests are copied there.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.support.airflow.airflow_env import copy_examples, load_dag_file


@pytest.fixture(scope="session")
def native_dags_folder(airflow_db: Path) -> Path:
    """The DAGs folder with copies of the native transfer example DAGs, their demo scaffolding and manifests."""
    return copy_examples(
        ("clickhouse_to_postgres_raw_snapshot.py", "clickhouse_to_mssql_raw_snapshot.py", "transfer_demo.py")
    )


def load_dag_module(folder: Path, file_name: str) -> ModuleType:
    """Import a DAG file from ``folder`` once (the copy that ``dag.test()`` syncs)."""
    return load_dag_file("dpone_native_example_" + file_name.removesuffix(".py"), folder / file_name)
