"""The Airflow test environment of the integration suite: one temporary AIRFLOW_HOME, one migrated SQLite metadata
database per session, no example DAGs, and a DAGs folder that holds only the DAG files under test.

``dag.test()`` syncs the DAG bundle of ``[core] dags_folder`` to the metadata database before it runs, so the DAG
under test must live inside that folder. The example DAG (and its manifests) are copied there; tests import that copy
and run it with ``dag.test()`` (tasks run in-process on the in-memory task objects, so a test may swap the operators'
``ports_factory`` seam before running).

Airflow reads most configuration at call time from ``AIRFLOW__*`` variables, but computes the database engine when it
is first imported; this module sets the variables before the first import where it can, and re-binds the ORM to the
session database either way. Creating the schema takes ~10 s; the result is cached per Airflow version in the temp
directory, so later sessions copy a file instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "dags_examples"

_HOME = Path(tempfile.mkdtemp(prefix="dpone-airflow-home-"))
DAGS_FOLDER = _HOME / "dags"
DAGS_FOLDER.mkdir()
_DB = _HOME / "airflow.db"

os.environ.update(
    {
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_DB}",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(_HOME / "logs"),
        "AIRFLOW__DPONE__ARTIFACT_BASE": f"file://{_HOME / 'artifacts'}",
    }
)
os.environ.setdefault("AIRFLOW_HOME", str(_HOME))


def _schema_cache() -> Path:
    from airflow import __version__ as airflow_version

    return Path(tempfile.gettempdir()) / f"dpone-airflow-{airflow_version}-schema.db"


@pytest.fixture(scope="session")
def airflow_db() -> Iterator[Path]:
    """Bind Airflow's ORM to the session's SQLite database, created (or copied from the cache) once."""
    from airflow import settings

    cache = _schema_cache()
    if cache.exists() and not _DB.exists():
        shutil.copyfile(cache, _DB)
    settings.configure_vars()
    settings.reconfigure_orm()
    if not cache.exists():
        from airflow.utils import db

        db.initdb()
        settings.dispose_orm()
        partial = cache.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(_DB, partial)
        partial.replace(cache)
        settings.reconfigure_orm()
    yield _DB
    settings.dispose_orm()


@pytest.fixture(scope="session")
def dags_folder(airflow_db: Path) -> Path:
    """The session's DAGs folder with a copy of the example DAG and its manifests."""
    shutil.copytree(EXAMPLES / "manifests", DAGS_FOLDER / "manifests", dirs_exist_ok=True)
    for dag_file in EXAMPLES.glob("*.py"):
        shutil.copyfile(dag_file, DAGS_FOLDER / dag_file.name)
    return DAGS_FOLDER
