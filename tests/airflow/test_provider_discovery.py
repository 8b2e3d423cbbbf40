"""Airflow discovers the provider: the real ``airflow providers`` CLI lists it, its hook, form behaviour and fields.

The CLI runs in subprocesses with a temporary AIRFLOW_HOME and ``PYTHONPATH`` pointing at the directory that holds
the ``airflow_provider_dpone`` under test, so the entry point (registered by the installed distribution) resolves to
this code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import airflow_provider_dpone
from airflow_provider_dpone import __version__
from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
from airflow_provider_dpone.provider_info import HOOK_CLASS, UI_FIELD_BEHAVIOUR, get_provider_info

pytestmark = pytest.mark.integration

PACKAGE_ROOT = str(Path(airflow_provider_dpone.__file__).resolve().parents[1])
AIRFLOW = Path(sys.executable).parent / "airflow"
COMMANDS = ("list", "hooks", "behaviours", "widgets")


@pytest.fixture(scope="module")
def providers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Run the four ``airflow providers`` commands concurrently and parse their JSON output."""
    if not AIRFLOW.exists():
        pytest.fail(f"the airflow CLI is not installed next to {sys.executable}")
    home = tmp_path_factory.mktemp("airflow_home")
    inherited = {k: v for k, v in os.environ.items() if k != "AIRFLOW__CORE__UNIT_TEST_MODE"}
    env = {
        **inherited,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "PYTHONPATH": PACKAGE_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    running = {
        command: subprocess.Popen(
            [str(AIRFLOW), "providers", command, "-o", "json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for command in COMMANDS
    }
    results: dict[str, list[dict[str, Any]]] = {}
    for command, process in running.items():
        out, err = process.communicate(timeout=180)
        assert process.returncode == 0, f"airflow providers {command} failed: {err[-2000:]}"
        results[command] = json.loads(out)
    return results


def test_provider_is_listed(providers: dict[str, list[dict[str, Any]]]) -> None:
    entry = next(p for p in providers["list"] if p["package_name"] == "airflow-provider-dpone")
    assert entry["version"] == __version__


def test_hook_is_registered_for_the_connection_type(providers: dict[str, list[dict[str, Any]]]) -> None:
    hooks = [h for h in providers["hooks"] if h.get("connection_type") == "dpone_clickhouse"]
    assert len(hooks) == 1
    assert hooks[0]["class"] == HOOK_CLASS
    assert hooks[0]["package_name"] == "airflow-provider-dpone"
    assert hooks[0]["conn_id_attribute_name"] == "dpone_clickhouse_conn_id"


def test_connection_type_has_form_behaviour(providers: dict[str, list[dict[str, Any]]]) -> None:
    assert {"field_behaviours": "dpone_clickhouse"} in providers["behaviours"]


def test_connection_form_fields_come_from_the_options_model(providers: dict[str, list[dict[str, Any]]]) -> None:
    prefix = "extra__dpone_clickhouse__"
    widgets = {
        w["connection_parameter_name"].removeprefix(prefix)
        for w in providers["widgets"]
        if w["connection_parameter_name"].startswith(prefix)
    }
    assert widgets == set(ClickHouseConnectionOptions.model_fields)


def test_hook_is_importable_with_matching_form_behaviour() -> None:
    from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

    assert f"{DponeClickHouseHook.__module__}.{DponeClickHouseHook.__qualname__}" == HOOK_CLASS
    assert DponeClickHouseHook.conn_type == "dpone_clickhouse"
    behaviour = DponeClickHouseHook.get_ui_field_behaviour()
    assert behaviour["hidden_fields"] == UI_FIELD_BEHAVIOUR["hidden-fields"]
    assert behaviour["relabeling"] == UI_FIELD_BEHAVIOUR["relabeling"]
    connection_type = get_provider_info()["connection-types"][0]
    assert connection_type["ui-field-behaviour"] == UI_FIELD_BEHAVIOUR
    assert connection_type["hook-class-name"] == HOOK_CLASS
