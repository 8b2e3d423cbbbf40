"""The native transfer example DAGs in the integration suite's Airflow environment (a helper module, not a conftest).

The environment (temporary AIRFLOW_HOME, SQLite metadata database migrated once per session, no example DAGs) is
``tests/integration/airflow_env.py``, bound by the conftest's session fixture ``airflow_db``; ``dag.test()`` syncs the
bundle of ``[core] dags_folder`` before it runs, so the DAG files and their manifests are copied there.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.integration.airflow_env import copy_examples


@pytest.fixture(scope="session")
def native_dags_folder(airflow_db: Path) -> Path:
    """The DAGs folder with copies of the native transfer example DAGs and the manifests they read."""
    return copy_examples(("clickhouse_to_postgres_raw_snapshot.py", "clickhouse_to_mssql_raw_snapshot.py"))


def load_dag_module(folder: Path, file_name: str) -> ModuleType:
    """Import a DAG file from ``folder`` once (the copy that ``dag.test()`` syncs)."""
    name = "dpone_native_example_" + file_name.removesuffix(".py")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, folder / file_name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
