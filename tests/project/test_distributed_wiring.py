"""``make test-distributed`` is wired as docs/several-workers.md says, checked without starting anything.

The multi-worker suite (``scripts/distributed/run.py``) is opt-in: it builds a Celery deployment and runs for longer
than CI allows. What ``make test`` holds here is its wiring: the settings it deploys are the page's blocks as written
(the ``[dpone]`` stores verbatim, every ``[section] key`` the page says components set, the install requirement and
constraints file), every worker gets its own home, host name and log port while sharing the secrets, the Makefile
target runs the script outside ``make test``, and no outcome without invariants counts as a pass.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.airflow.airflow_deployment import _environment

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "distributed" / "run.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("distributed_run", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["distributed_run"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def page(script: ModuleType) -> str:
    text: str = script.PAGE.read_text()
    return text


def _environments(script: ModuleType, tmp_path: Path, page: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    settings = script.page_settings(page)
    extra = script.deployment_environment(
        settings,
        database="postgresql+psycopg2://u:p@127.0.0.1:1/airflow",
        result_backend="db+postgresql://u:p@127.0.0.1:1/airflow",
        broker="redis://127.0.0.1:2/0",
        connections={"aws_default": "{}"},
    )
    shared = _environment(tmp_path / "airflow", 8080, extra)
    workers = [
        script.worker_environment(shared, name, tmp_path / name, port)
        for name, port in zip(script.WORKERS, (9001, 9002), strict=True)
    ]
    return shared, workers


def test_the_stores_are_the_pages_block_verbatim_on_one_connection_and_bucket(
    script: ModuleType, page: str, tmp_path: Path
) -> None:
    settings = script.page_settings(page)
    (block,) = re.findall(r"```ini\n(.*?)```", page, re.DOTALL)
    assert set(settings.dpone) == {"artifact_base", "native_transfer_base"}
    for key, value in settings.dpone.items():
        assert f"\n{key} = {value}\n" in f"\n{block}"
    locations = {script.store_location(url)[:2] for url in settings.dpone.values()}
    assert len(locations) == 1, "both stores on one connection id and bucket, as the page shows"
    assert settings.endpoint_extra_key == "endpoint_url"
    shared, workers = _environments(script, tmp_path, page)
    for env in (shared, *workers):
        assert {key: env[f"AIRFLOW__DPONE__{key.upper()}"] for key in settings.dpone} == settings.dpone
        assert env["AIRFLOW__DPONE__SINGLE_WORKER"] == "False"
        assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")


def test_every_setting_the_page_names_is_set_shared_where_it_says_and_per_worker_where_it_says(
    script: ModuleType, page: str, tmp_path: Path
) -> None:
    settings = script.page_settings(page)
    named = {(section, key) for section, key in settings.shared if section != "dpone"}
    assert {
        ("core", "fernet_key"),
        ("api_auth", "jwt_secret"),
        ("core", "execution_api_server_url"),
        ("logging", "worker_log_server_port"),
        ("scheduler", "task_instance_heartbeat_timeout"),
    } <= named, "the page's settings (a page edit that drops one must drop it here too)"
    shared, (first, second) = _environments(script, tmp_path, page)
    per_worker = {("logging", "worker_log_server_port")}
    for section, key in named:
        variable = script.airflow_variable(section, key)
        assert variable in first and variable in second, (section, key)
        if (section, key) in per_worker:
            assert first[variable] != second[variable], (section, key)
        else:
            assert first[variable] == second[variable] == shared[variable], (section, key)
    assert first["AIRFLOW_HOME"] != second["AIRFLOW_HOME"]
    assert first["DPONE_WORKER_HOSTNAME"] != second["DPONE_WORKER_HOSTNAME"]
    heartbeat = script.airflow_variable("scheduler", "task_instance_heartbeat_timeout")
    assert int(shared[heartbeat]) == script.HEARTBEAT_TIMEOUT < 300, "recovery shortened, as section 4 advises"


def test_the_install_is_the_pages_requirement_and_constraints_file(script: ModuleType, page: str) -> None:
    settings = script.page_settings(page, python_version="3.11")
    extras = re.fullmatch(r"apache-airflow\[([a-z,]+)\]==(\d+\.\d+\.\d+)", settings.requirement)
    assert extras is not None, settings.requirement
    assert {"celery", "postgres", "amazon"} <= set(extras.group(1).split(","))
    assert settings.constraints_url == (
        f"https://raw.githubusercontent.com/apache/airflow/constraints-{extras.group(2)}/constraints-3.11.txt"
    )


def test_a_page_without_its_blocks_cannot_run_and_no_outcome_without_invariants_passes(script: ModuleType) -> None:
    with pytest.raises(script.CannotRunError):
        script.page_settings("# Several workers\n\nno blocks\n")
    assert "verdict: FAIL" in script.summary([], 1.0, "x")
    silent = script.Outcome("a scenario")
    assert not silent.passed
    held = script.Outcome("a scenario", invariants={"members equal": True})
    assert held.passed and "verdict: PASS" in script.summary([held], 1.0, "x")
    assert "verdict: FAIL" in script.summary([held, script.Outcome("b", invariants={"x": False})], 1.0, "x")


def test_the_make_target_runs_the_script_outside_make_test() -> None:
    makefile = (REPO / "Makefile").read_text()
    recipe = re.search(r"^test-distributed:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe is not None and "scripts/distributed/run.py" in recipe.group(1)
    test_rule = re.search(r"^test:(.*)$", makefile, re.MULTILINE)
    assert test_rule is not None and "distributed" not in test_rule.group(1)
    comment = makefile[: recipe.start()].rsplit("\n\n", 1)[-1]
    assert "20-minute CI" in comment and "opt-in" in comment


def test_each_kill_names_a_task_of_its_example(script: ModuleType) -> None:
    assert [kill.task_id for kill in script.KILLS] == ["stage", "publish", "transfer"]
    for kill in script.KILLS:
        dag = (REPO / "dags_examples" / f"{kill.dag_id}.py").read_text()
        assert f"{kill.dag_id}.py" in script.EXAMPLE_FILES
        assert f'"{kill.dag_id}"' in dag, "the DAG id, as the example declares it"
        assert f'task_id="{kill.task_id}"' in dag, kill
        assert kill.held_on in ("member", "coordinator")
        re.compile(kill.statement)
