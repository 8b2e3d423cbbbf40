"""``dpone check`` / ``dpone plan``: outputs, exit codes, redaction, and a hot path without Airflow or network."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import airflow_provider_dpone
from airflow_provider_dpone.cli import EXIT_BLOCKED, EXIT_INVALID_INPUT, EXIT_OK, main, run
from airflow_provider_dpone.core.manifest import load_manifest, normalized_plan, normalized_plan_digest
from tests.support.manifest_samples import EXAMPLES, cluster_of, external, storage_of, to_yaml, transfer

pytestmark = pytest.mark.unit

PACKAGE_ROOT = str(Path(airflow_provider_dpone.__file__).resolve().parents[1])


def _run(command: str, path: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(command, str(path), out, err)
    return code, out.getvalue(), err.getvalue()


def _write(tmp_path: Path, raw: dict[str, Any] | str) -> Path:
    path = tmp_path / "manifest.yaml"
    path.write_text(raw if isinstance(raw, str) else to_yaml(raw), encoding="utf-8")
    return path


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_check_prints_the_decision_of_every_example(example: Path) -> None:
    code, out, err = _run("check", example)
    assert (code, err) == (EXIT_OK, "")
    decision = json.loads(out)
    assert decision["runtime_admission_required"] is True and decision["no_fallback"] is True
    assert decision["selected"] is not None


def test_check_external_example_matches_the_seed_document() -> None:
    code, out, _ = _run("check", EXAMPLES / "clickhouse_external_full_refresh.yaml")
    assert code == EXIT_OK
    assert out == (
        "{\n"
        '  "requested": "cluster",\n'
        '  "selected": "cluster_external",\n'
        '  "replication_mode": "external",\n'
        '  "runtime_admission_required": true,\n'
        '  "no_fallback": true\n'
        "}\n"
    )


def test_plan_shows_decision_declared_selector_and_normalized_plan() -> None:
    path = EXAMPLES / "clickhouse_to_mssql_raw_snapshot.yaml"
    code, out, err = _run("plan", path)
    assert (code, err) == (EXIT_OK, "")
    document = json.loads(out)
    manifest = load_manifest(path)
    assert document["declared"] == {"source_snapshot": {"mode": "exact_raw_rows", "replica_scope": "single_server"}}
    assert document["decision"]["selected"] == "native_transfer_mssql"
    assert document["normalized_plan"] == normalized_plan(manifest)
    assert document["normalized_plan_digest"] == normalized_plan_digest(manifest)


def test_plan_shows_an_omitted_selector_as_null(tmp_path: Path) -> None:
    raw = transfer("postgres")
    raw["source"].pop("options")
    code, out, _ = _run("plan", _write(tmp_path, raw))
    assert code == EXIT_OK
    document = json.loads(out)
    assert document["declared"] == {"source_snapshot": None}
    assert document["decision"]["source_snapshot"] == "query_visible"


def test_plan_of_cluster_manifest_has_no_sql_and_no_declared_section() -> None:
    code, out, _ = _run("plan", EXAMPLES / "clickhouse_external_full_refresh.yaml")
    assert code == EXIT_OK
    document = json.loads(out)
    assert set(document) == {"decision", "normalized_plan", "normalized_plan_digest"}
    assert "SELECT" not in out and "source_table" not in out


def test_blocked_manifest_exits_3_with_every_blocker_on_stderr(tmp_path: Path) -> None:
    raw = external()
    cluster_of(raw)["ddl_scope"] = "local"
    storage_of(raw)["engine"] = "Distributed"
    for command in ("check", "plan"):
        code, out, err = _run(command, _write(tmp_path, raw))
        assert (code, out) == (EXIT_BLOCKED, "")
        document = json.loads(err)
        assert document["admissible"] is False
        assert [b["code"] for b in document["blockers"]] == [
            "DPONE_CLICKHOUSE_CLUSTER_DDL_SCOPE_REQUIRED",
            "DPONE_CLICKHOUSE_CLUSTER_DISTRIBUTED_TARGET",
        ]
        assert document["decision"]["selected"] is None and document["decision"]["no_fallback"] is True
        assert all(set(b) == {"code", "field", "cause", "detail", "action"} for b in document["blockers"])


def test_an_artifact_source_is_a_coded_blocker_of_check_and_plan(tmp_path: Path) -> None:
    raw = external()
    raw["source"] = {"type": "artifact", "sha256": "ab" * 32, "store_uri": "s3://bucket/dpone/artifacts"}
    for command in ("check", "plan"):
        code, out, err = _run(command, _write(tmp_path, raw))
        assert (code, out) == (EXIT_BLOCKED, "")
        document = json.loads(err)
        assert [(b["code"], b["field"]) for b in document["blockers"]] == [
            ("DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_SOURCE_UNSUPPORTED", "source.type")
        ]
        assert document["decision"]["selected"] is None


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("version: 1\nname: [\n", "DPONE_MANIFEST_YAML_INVALID"),
        ("- not\n- a mapping\n", "DPONE_MANIFEST_YAML_INVALID"),
        (to_yaml(external()) + "name: twice\n", "DPONE_MANIFEST_DUPLICATE_KEY"),
        (to_yaml(external()) + "fallback: local\n", "DPONE_MANIFEST_UNKNOWN_FIELD"),
        (
            to_yaml(external()).replace("max_source_bytes: 1048576", "max_source_bytes: lots"),
            "DPONE_MANIFEST_FIELD_INVALID",
        ),
        (to_yaml(external()).replace("version: 1\n", ""), "DPONE_MANIFEST_FIELD_MISSING"),
    ],
)
def test_invalid_input_exits_2_with_codes_on_stderr(tmp_path: Path, content: str, code: str) -> None:
    exit_code, out, err = _run("check", _write(tmp_path, content))
    assert (exit_code, out) == (EXIT_INVALID_INPUT, "")
    document = json.loads(err)
    assert document["admissible"] is False
    assert code in [error["code"] for error in document["errors"]]
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "hostile", ["evil`table", "evil\x00table", "e" * 300, "\u0435vil_table", "a'; DROP TABLE t; --"]
)
def test_hostile_names_never_reach_output(tmp_path: Path, hostile: str) -> None:
    raw = external()
    raw["sink"]["table"] = hostile
    raw["sink"][hostile] = "unknown key too"
    exit_code, out, err = _run("check", _write(tmp_path, raw))
    assert exit_code == EXIT_INVALID_INPUT
    assert hostile not in out + err
    assert hostile not in json.loads(err).__repr__()
    codes = {error["code"] for error in json.loads(err)["errors"]}
    assert "DPONE_IDENTIFIER_INVALID" in codes


def test_unreadable_file_exits_2_without_echoing_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "secret-dir" / "missing.yaml"
    exit_code, out, err = _run("plan", missing)
    assert (exit_code, out) == (EXIT_INVALID_INPUT, "")
    assert json.loads(err)["errors"][0]["code"] == "DPONE_MANIFEST_UNREADABLE"
    assert "secret-dir" not in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([], ["apply", "x.yaml"], ["check"], ["check", "--fallback", "x.yaml"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == EXIT_INVALID_INPUT
    capsys.readouterr()


def _subprocess(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": PACKAGE_ROOT}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_entry_point_runs_without_importing_airflow_or_network_clients() -> None:
    probe = (
        "import socket, sys\n"
        "def refuse(*args, **kwargs):\n"
        "    raise RuntimeError('network access attempted')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "from airflow_provider_dpone.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "loaded = sorted(m for m in ('airflow', 'clickhouse_connect', 'chdb', 'pymssql', 'psycopg')"
        " if m in sys.modules)\n"
        "print(loaded, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    result = _subprocess(probe, "check", str(EXAMPLES / "clickhouse_external_full_refresh.yaml"))
    assert result.returncode == EXIT_OK, result.stderr
    assert json.loads(result.stdout)["selected"] == "cluster_external"
    assert result.stderr.strip() == "[]"


def test_module_entry_point_and_help() -> None:
    result = _subprocess("import runpy; runpy.run_module('airflow_provider_dpone.cli', run_name='__main__')", "--help")
    assert result.returncode == 0
    assert "check" in result.stdout and "plan" in result.stdout and "Exit codes" in result.stdout
