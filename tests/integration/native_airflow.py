"""An Airflow environment for ``dag.test()`` of the native transfer example DAGs (a helper module, not a conftest).

One temporary AIRFLOW_HOME with a SQLite metadata database migrated once per session (the migrated file is cached per
Airflow version in the temp directory), no example DAGs, and a DAGs folder holding the example DAG files and their
manifests: ``dag.test()`` syncs the bundle of ``[core] dags_folder`` before it runs. Variables are only set where
nobody set them before (``setdefault``), so a suite-wide Airflow environment that is already in place wins and both
agree on one database and one DAGs folder.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "dags_examples"

_HOME = Path(tempfile.mkdtemp(prefix="dpone-native-airflow-"))
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(_HOME / "dags"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "False")
os.environ.setdefault("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{_HOME / 'airflow.db'}")
os.environ.setdefault("AIRFLOW__LOGGING__BASE_LOG_FOLDER", str(_HOME / "logs"))
os.environ.setdefault("AIRFLOW_HOME", str(_HOME))
DAGS_FOLDER = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])


def _database() -> Path:
    return Path(os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].removeprefix("sqlite:///"))


def _schema_cache() -> Path:
    from airflow import __version__ as airflow_version

    return Path(tempfile.gettempdir()) / f"dpone-airflow-{airflow_version}-schema.db"


@pytest.fixture(scope="session")
def native_airflow_db() -> Iterator[Path]:
    """Bind Airflow's ORM to the session's SQLite database, created (or copied from the cache) once."""
    from airflow import settings

    database, cache = _database(), _schema_cache()
    database.parent.mkdir(parents=True, exist_ok=True)
    if cache.exists() and not database.exists():
        shutil.copyfile(cache, database)
    settings.configure_vars()
    settings.reconfigure_orm()
    if not cache.exists():
        from airflow.utils import db

        db.initdb()
        settings.dispose_orm()
        partial = cache.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(database, partial)
        partial.replace(cache)
        settings.reconfigure_orm()
    yield database
    settings.dispose_orm()


@pytest.fixture(scope="session")
def native_dags_folder(native_airflow_db: Path) -> Path:
    """The DAGs folder with copies of the native transfer example DAGs and the manifests they read."""
    DAGS_FOLDER.mkdir(parents=True, exist_ok=True)
    shutil.copytree(EXAMPLES / "manifests", DAGS_FOLDER / "manifests", dirs_exist_ok=True)
    for name in ("clickhouse_to_postgres_raw_snapshot.py", "clickhouse_to_mssql_raw_snapshot.py"):
        shutil.copyfile(EXAMPLES / name, DAGS_FOLDER / name)
    return DAGS_FOLDER


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
