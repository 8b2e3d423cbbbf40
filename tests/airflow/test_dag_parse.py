"""Parsing a DAG file loads no ClickHouse client, no database driver, no aiohttp and no OpenLineage: those load when a
task runs (or when the OpenLineage listener asks for facets).

Each example DAG file is imported in a fresh interpreter (as a DAG processor does), and the test reads that
interpreter's ``sys.modules``. The parse-time benchmark is ``bench/dag_parse.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = REPO / "dags_examples"
# the DAG files (the folder also holds their shared demo module, which defines no DAG)
EXAMPLES = sorted(path for path in EXAMPLES_DIR.glob("*.py") if "with DAG(" in path.read_text(encoding="utf-8"))
CLIENT_MODULES = ("clickhouse_connect", "aiohttp", "pymssql", "psycopg", "chdb", "openlineage")

_PROBE = """
import json, runpy, sys
namespace = runpy.run_path(sys.argv[1], run_name="dag_parse_probe")
dags = sorted(value.dag_id for value in namespace.values() if type(value).__name__ == "DAG")
print(json.dumps({"dags": dags, "loaded": sorted(m.split(".")[0] for m in sys.modules)}))
"""


def parse_in_fresh_interpreter(path: Path) -> dict[str, list[str]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(EXAMPLES_DIR)]))
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(path)], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_examples_are_found() -> None:
    assert {path.name for path in EXAMPLES} >= {
        "clickhouse_external_full_refresh.py",
        "clickhouse_internal_full_refresh.py",
        "clickhouse_to_mssql_raw_snapshot.py",
        "clickhouse_to_postgres_raw_snapshot.py",
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.stem)
def test_parsing_an_example_dag_loads_no_client_or_driver(path: Path) -> None:
    parsed = parse_in_fresh_interpreter(path)
    assert parsed["dags"], f"{path.name} defined no DAG"
    assert "airflow_provider_dpone" in parsed["loaded"]
    assert not set(CLIENT_MODULES) & set(parsed["loaded"])


def test_the_probe_sees_a_client_module_when_a_dag_file_loads_one(tmp_path: Path) -> None:
    """The probe is not blind: a DAG file that imports the ClickHouse client is reported."""
    dag_file = tmp_path / "eager.py"
    (tmp_path / "eager.py").write_text(
        "import datetime as dt\nimport clickhouse_connect\nfrom airflow.sdk import DAG\n"
        "dag = DAG(dag_id='eager', schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))\n"
    )
    parsed = parse_in_fresh_interpreter(dag_file)
    assert parsed["dags"] == ["eager"]
    assert "clickhouse_connect" in parsed["loaded"]
