"""The Airflow test environment of the integration suite (a helper module, shared by the conftest and the native
transfer DAG tests): the session's temporary AIRFLOW_HOME (``tests/support/airflow_home.py``), one migrated SQLite metadata
database per session, no example DAGs, and a DAGs folder that holds only the DAG files under test.

``dag.test()`` syncs the DAG bundle of ``[core] dags_folder`` to the metadata database before it runs, so the DAG
under test must live inside that folder: ``copy_examples`` puts example DAG files and their manifests there, and
``load_dag_file`` imports such a copy once per session.

Airflow reads most configuration at call time from ``AIRFLOW__*`` variables, but computes the database engine when it
is first imported; importing this module sets the variables before the first import where it can, and
``bind_session_database`` re-binds the ORM to the session database either way. Creating the schema takes ~10 s; the
result is cached per Airflow version in the temp directory, so later sessions copy a file instead.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType

from tests.support.airflow_home import HOME as _HOME

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "dags_examples"

DAGS_FOLDER = _HOME / "dags"
DAGS_FOLDER.mkdir(exist_ok=True)
DATABASE = _HOME / "airflow.db"

os.environ.update(
    {
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{DATABASE}",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(_HOME / "logs"),
        "AIRFLOW__DPONE__ARTIFACT_BASE": f"file://{_HOME / 'artifacts'}",
    }
)


def schema_cache() -> Path:
    from airflow import __version__ as airflow_version

    return Path(tempfile.gettempdir()) / f"dpone-airflow-{airflow_version}-schema.db"


def bind_session_database() -> Iterator[Path]:
    """Bind Airflow's ORM to the session's SQLite database, created (or copied from the cache) once; the body of the
    session fixture ``airflow_db`` (``yield from``), which disposes the ORM at teardown."""
    from airflow import settings

    cache = schema_cache()
    if cache.exists() and not DATABASE.exists():
        shutil.copyfile(cache, DATABASE)
    settings.configure_vars()
    settings.reconfigure_orm()
    if not cache.exists():
        from airflow.utils import db

        db.initdb()
        settings.dispose_orm()
        partial = cache.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(DATABASE, partial)
        partial.replace(cache)
        settings.reconfigure_orm()
    yield DATABASE
    settings.dispose_orm()


def copy_examples(file_names: Iterable[str]) -> Path:
    """Copy the named example DAG files and all example manifests into the session's DAGs folder; return the folder."""
    shutil.copytree(EXAMPLES / "manifests", DAGS_FOLDER / "manifests", dirs_exist_ok=True)
    for name in file_names:
        shutil.copyfile(EXAMPLES / name, DAGS_FOLDER / name)
    return DAGS_FOLDER


def load_dag_file(module_name: str, path: Path) -> ModuleType:
    """Import a DAG file once under ``module_name`` (the copy in the DAGs folder, the one ``dag.test()`` syncs): tests
    swap seams on its in-memory task objects, so every test of a session must get the same module."""
    if module_name in sys.modules:
        return sys.modules[module_name]
    if str(path.parent) not in sys.path:  # as Airflow's bundle DagBag does: DAG files import their sibling modules
        sys.path.append(str(path.parent))
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
