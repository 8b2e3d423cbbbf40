"""Benchmark of DAG-file parse time: each example DAG file against a DAG file with one ``EmptyOperator``.

Run: ``.venv/bin/python bench/dag_parse.py [--repeat 7]``. Every measurement is a fresh interpreter that imports one
DAG file (``runpy.run_path``, as a DAG processor does); the files are measured round-robin in the same run, so a
shared machine's load falls on all of them alike. Two figures per file, medians over the repetitions:

* ``cold``: the interpreter imports Airflow and the DAG file (what ``python dag.py`` or a DAG processor without
  pre-imports pays); the ratio against the EmptyOperator file is the one the aim (<= 1.2x) is about;
* ``warm``: ``airflow.sdk`` is imported first and only the DAG file's own import is timed (a DAG processor that forks
  from a parent which already imported Airflow): the provider's own import cost, in milliseconds.

Each probe also reports which client or driver modules (clickhouse_connect, aiohttp, pymssql, psycopg, chdb) the
import loaded (and whether OpenLineage was): parsing must load none. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = REPO / "dags_examples"
# the DAG files (the folder also holds their shared demo module, which defines no DAG)
EXAMPLES = sorted(path for path in EXAMPLES_DIR.glob("*.py") if "with DAG(" in path.read_text(encoding="utf-8"))
HEAVY = ("clickhouse_connect", "aiohttp", "pymssql", "psycopg", "chdb", "openlineage")

BASELINE = """
import datetime as dt
from airflow.sdk import DAG
from airflow.providers.standard.operators.empty import EmptyOperator

with DAG(dag_id="empty_baseline", schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) as dag:
    EmptyOperator(task_id="nothing")
"""

PROBE = """
import json, runpy, sys, time
warm = sys.argv[2] == "warm"
start = time.perf_counter()
if warm:
    import airflow.sdk
    start = time.perf_counter()
runpy.run_path(sys.argv[1], run_name="dag_parse_probe")
elapsed = time.perf_counter() - start
print(json.dumps({"seconds": elapsed, "heavy": [m for m in sys.argv[3].split(",") if m in sys.modules]}))
"""


def probe(path: Path, mode: str, env: dict[str, str]) -> dict[str, object]:
    """Import ``path`` in a fresh interpreter; its import time and the heavy modules it loaded."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(path), mode, ",".join(HEAVY)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{path.name} failed to import:\n{done.stderr[-2000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dpone-dag-parse-") as home:
        baseline = Path(home) / "empty_baseline.py"
        baseline.write_text(BASELINE)
        env = {key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW__")}
        env.update(
            AIRFLOW_HOME=home,
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            PYTHONPATH=os.pathsep.join([str(REPO), str(EXAMPLES_DIR)]),
        )
        files = [baseline, *EXAMPLES]
        times: dict[tuple[str, str], list[float]] = {(f.name, m): [] for f in files for m in ("cold", "warm")}
        heavy: dict[str, set[str]] = {f.name: set() for f in files}
        for _ in range(args.repeat):
            for mode in ("cold", "warm"):
                for path in files:
                    result = probe(path, mode, env)
                    times[(path.name, mode)].append(float(result["seconds"]))  # type: ignore[arg-type]
                    heavy[path.name].update(result["heavy"])  # type: ignore[arg-type]

    def median(name: str, mode: str) -> float:
        return statistics.median(times[(name, mode)])

    report: dict[str, object] = {
        "repeat": args.repeat,
        "baseline_cold_s": round(median(baseline.name, "cold"), 3),
        "baseline_warm_ms": round(1000 * median(baseline.name, "warm"), 1),
        "examples": {
            path.name: {
                "cold_s": round(median(path.name, "cold"), 3),
                "cold_ratio": round(median(path.name, "cold") / median(baseline.name, "cold"), 3),
                "warm_ms": round(1000 * median(path.name, "warm"), 1),
                "warm_extra_ms": round(1000 * (median(path.name, "warm") - median(baseline.name, "warm")), 1),
                "client_modules_loaded": sorted(heavy[path.name]),
            }
            for path in EXAMPLES
        },
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
