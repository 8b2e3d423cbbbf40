"""The ``[dpone]`` section is registered with Airflow: the real ``airflow config`` CLI lists and reads every option.

The CLI runs in a subprocess with a temporary AIRFLOW_HOME (no inherited ``AIRFLOW__*`` setting) and ``PYTHONPATH``
pointing at the code under test. Each registered default is the value the code falls back to, and every option the
code reads is registered.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import airflow_provider_dpone
from airflow_provider_dpone.provider_info import CONFIG, get_provider_info

pytestmark = pytest.mark.integration

PACKAGE_ROOT = Path(airflow_provider_dpone.__file__).resolve().parents[1]
AIRFLOW = Path(sys.executable).parent / "airflow"
OPTIONS = CONFIG["dpone"]["options"]


def airflow_config(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    return subprocess.run(
        [str(AIRFLOW), "config", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={
            **clean,
            **env,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "PYTHONPATH": str(PACKAGE_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        },
        check=False,
    )


def test_airflow_config_lists_every_option_with_its_description_and_example(tmp_path: Path) -> None:
    listed = airflow_config(
        tmp_path, "list", "--section", "dpone", "--include-descriptions", "--include-examples", "--show-values"
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert listed.stdout.lstrip().startswith("[dpone]")
    for name, option in OPTIONS.items():
        assert option["description"] in listed.stdout
        assert f"# Example: {name} = {option['example']}" in listed.stdout
        shown = f"# {name} = " if option["default"] is None else f"\n{name} = "
        assert shown in listed.stdout, name


def test_airflow_config_shows_every_default_and_get_value_reads_the_environment(tmp_path: Path) -> None:
    """Every registered default as Airflow's own CLI resolves it (one ``list --show-values`` reads them all through
    the same ``conf`` lookup ``get-value`` uses), and ``get-value`` reads an ``AIRFLOW__DPONE__*`` override."""
    home = tmp_path / "home"
    expected = {
        "single_worker": "False",
        "ddl_task_timeout_seconds": "120",
        "replica_sync_timeout_seconds": "30.0",
        "void_skew_margin_seconds": "60",
        "progress_heartbeat_seconds": "300.0",
        "external_replication_admission": "True",
        "allow_unverified_tls": "False",
        "extraction_timeout_seconds": "3600",
    }
    assert set(expected) == {name for name, option in OPTIONS.items() if option["default"] is not None}
    listed = airflow_config(home, "list", "--section", "dpone", "--show-values")
    assert listed.returncode == 0, listed.stderr[-2000:]
    shown = dict(re.findall(r"^(\w+) = (.*)$", listed.stdout, flags=re.MULTILINE))
    assert shown == expected, listed.stdout
    changed = airflow_config(
        home, "get-value", "dpone", "progress_heartbeat_seconds", AIRFLOW__DPONE__PROGRESS_HEARTBEAT_SECONDS="30"
    )
    assert changed.returncode == 0 and changed.stdout.strip() == "30", changed.stderr[-1000:]


def test_registered_defaults_are_the_code_fallbacks() -> None:
    from airflow_provider_dpone.cluster.clickhouse.artifact_source import EXTRACTION_SECONDS
    from airflow_provider_dpone.cluster.clickhouse.sql_cluster_ddl import DEFAULT_TASK_TIMEOUT_SECONDS
    from airflow_provider_dpone.cluster.protocol.context import ProtocolSettings
    from airflow_provider_dpone.triggers.ddl_queue import DEFAULT_HEARTBEAT_SECONDS

    defaults = ProtocolSettings()
    assert int(OPTIONS["ddl_task_timeout_seconds"]["default"]) == DEFAULT_TASK_TIMEOUT_SECONDS
    assert float(OPTIONS["progress_heartbeat_seconds"]["default"]) == DEFAULT_HEARTBEAT_SECONDS
    assert float(OPTIONS["replica_sync_timeout_seconds"]["default"]) == defaults.replica_sync_timeout_seconds
    assert int(OPTIONS["void_skew_margin_seconds"]["default"]) * 1000 == defaults.void_skew_margin_ms
    assert (OPTIONS["external_replication_admission"]["default"] == "True") is defaults.external_admission
    assert OPTIONS["artifact_base"]["default"] is None  # unset is refused unless single_worker says one machine
    assert OPTIONS["single_worker"]["default"] == "False"
    assert int(OPTIONS["extraction_timeout_seconds"]["default"]) == EXTRACTION_SECONDS
    assert OPTIONS["allow_unverified_tls"]["default"] == "False"  # secure by default: verify: false is refused
    assert get_provider_info()["config"] == CONFIG


def test_every_option_the_code_reads_is_registered() -> None:
    read = set()
    for path in Path(airflow_provider_dpone.__file__).parent.rglob("*.py"):
        read |= set(re.findall(r"""conf\.get\w*\(\s*["']dpone["'],\s*["'](\w+)["']""", path.read_text()))
    assert read == set(OPTIONS)
