"""The hostile-input corpus of ``dpone check``: every input gets exit 2 and a stable code, never a traceback.

Explicit YAML tags (a ``!!set`` would make the plan digest depend on ``PYTHONHASHSEED``), integers past any manifest
need (and past Python's own conversion limit), version spellings that are not the integer 1, and a manifest path that
is not a regular file (a FIFO would block the reader forever).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_dpone.cli import EXIT_INVALID_INPUT, run
from tests.support.manifest_samples import EXAMPLES

pytestmark = pytest.mark.unit

EXAMPLE = (EXAMPLES / "clickhouse_external_full_refresh.yaml").read_text(encoding="utf-8")
HUGE = "9" * 5000

CORPUS: dict[str, tuple[str, str, str]] = {
    # name: (pattern, replacement, code)
    "int_tag_hex": (r"max_source_bytes: \d+", "max_source_bytes: !!int 0x10", "DPONE_MANIFEST_YAML_INVALID"),
    "bool_tag": (r"max_source_bytes: \d+", "max_source_bytes: !!bool maybe", "DPONE_MANIFEST_YAML_INVALID"),
    "set_tag": (r"order_by: \[id\]", "order_by: !!set {id: null, name: null}", "DPONE_MANIFEST_YAML_INVALID"),
    "timestamp_tag": (
        r"max_source_bytes: \d+",
        "max_source_bytes: !!timestamp 2001-12-14",
        "DPONE_MANIFEST_YAML_INVALID",
    ),
    "str_tag": (r"table: target_table", "table: !!str target_table", "DPONE_MANIFEST_YAML_INVALID"),
    "binary_tag": (r"table: target_table", "table: !!binary aGVsbG8=", "DPONE_MANIFEST_YAML_INVALID"),
    "python_tag": (r"table: target_table", "table: !!python/name:os.system", "DPONE_MANIFEST_YAML_INVALID"),
    "custom_tag": (r"table: target_table", "table: !local target_table", "DPONE_MANIFEST_YAML_INVALID"),
    "huge_int": (r"max_source_bytes: \d+", f"max_source_bytes: {HUGE}", "DPONE_MANIFEST_YAML_INVALID"),
    "huge_version": (r"(?m)^version: 1", f"version: {HUGE}", "DPONE_MANIFEST_YAML_INVALID"),
    "version_true": (r"(?m)^version: 1", "version: true", "DPONE_MANIFEST_FIELD_INVALID"),
    "version_underscore": (r"(?m)^version: 1", "version: 1_000", "DPONE_MANIFEST_FIELD_INVALID"),
    "version_padded": (r"(?m)^version: 1", 'version: " 5"', "DPONE_MANIFEST_FIELD_INVALID"),
    "version_text": (r"(?m)^version: 1", 'version: "1"', "DPONE_MANIFEST_FIELD_INVALID"),
    "version_float": (r"(?m)^version: 1", "version: 1.0", "DPONE_MANIFEST_FIELD_INVALID"),
}


def _check(path: Path | str) -> tuple[int, str, dict[str, object]]:
    out, err = io.StringIO(), io.StringIO()
    code = run("check", str(path), out, err)
    return code, out.getvalue(), json.loads(err.getvalue())


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_hostile_manifest_text_exits_2_with_a_code(name: str, tmp_path: Path) -> None:
    pattern, replacement, expected = CORPUS[name]
    text, count = re.subn(pattern, replacement, EXAMPLE, count=1)
    assert count == 1, "the corpus edits the example"
    path = tmp_path / "manifest.yaml"
    path.write_text(text, encoding="utf-8")
    code, out, document = _check(path)
    assert (code, out) == (EXIT_INVALID_INPUT, "")
    errors = document["errors"]
    assert isinstance(errors, list) and errors[0]["code"] == expected
    assert HUGE not in json.dumps(document) and "os.system" not in json.dumps(document)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_manifest_path_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "manifest.yaml"
    os.mkfifo(fifo)
    result = subprocess.run(  # a blocking open would hang: the timeout turns that into a failure
        [sys.executable, "-m", "airflow_provider_dpone.cli", "check", str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == EXIT_INVALID_INPUT and "Traceback" not in result.stderr
    assert json.loads(result.stderr)["errors"][0]["code"] == "DPONE_MANIFEST_UNREADABLE"


@pytest.mark.parametrize("path", ["/dev/null", "."])
def test_a_device_or_a_directory_is_not_a_manifest(path: str) -> None:
    code, _, document = _check(path)
    assert code == EXIT_INVALID_INPUT and document["errors"][0]["code"] == "DPONE_MANIFEST_UNREADABLE"  # type: ignore[index]


def test_the_plan_digest_of_the_example_does_not_depend_on_the_hash_seed() -> None:
    digests = set()
    for seed in ("0", "1", "12345"):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "airflow_provider_dpone.cli",
                "plan",
                str(EXAMPLES / "clickhouse_external_full_refresh.yaml"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        digests.add(json.dumps(json.loads(result.stdout), sort_keys=True))
    assert len(digests) == 1
