"""P3 trial qualification of the transfer benchmark (``bench/native_transfer.py``: ``qualify``), as seed 003 states it:
only trials with before/after endpoint-authority agreement are admitted, and admitted trials must agree on the stable
workload values (EOF rows and typed workload digest)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench() -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        import native_transfer

        return native_transfer
    finally:
        sys.path.remove(str(BENCH))


def trial(agreement: bool | None, rows: int = 10, digest: str = "a" * 64) -> dict[str, Any]:
    return {"rows": rows, "workload_digest": digest, "endpoint_authority_agreement": agreement}


def test_a_trial_with_observed_drift_is_excluded(bench: Any) -> None:
    qualification = bench.qualify([trial(True), trial(False), trial(None), trial(True)])
    assert qualification["admitted"] == [0, 3] and sorted(qualification["excluded"]) == [1, 2]
    assert qualification["repeatable"]


def test_admitted_trials_must_agree_on_the_stable_workload(bench: Any) -> None:
    differing = bench.qualify([trial(True), trial(True, digest="b" * 64)])
    assert not differing["repeatable"] and len(differing["workload"]) == 2
    assert not bench.qualify([trial(True), trial(True, rows=11)])["repeatable"]
    drifted = bench.qualify([trial(True), trial(False, digest="b" * 64)])  # the drifted trial does not count
    assert drifted["repeatable"] and drifted["workload"] == [{"rows": 10, "workload_digest": "a" * 64}]


def test_only_admitted_trials_are_measured(bench: Any) -> None:
    results = {"ours_s": [1.0, 9.0, 1.2], "phases": [[1], [2], [3]], "note": "kept"}
    qualification = bench.qualify([trial(True), trial(False), trial(True)])
    assert bench._admitted_only(results, qualification) == {"ours_s": [1.0, 1.2], "phases": [[1], [3]], "note": "kept"}
    with pytest.raises(SystemExit, match="no qualified measurement"):
        bench._admitted_only(results, bench.qualify([trial(False), trial(False)]))
    with pytest.raises(SystemExit, match="no qualified measurement"):
        bench._admitted_only(results, bench.qualify([trial(True), trial(True, rows=3)]))


def test_a_bench_worker_measures_its_qualified_trials_end_to_end(bench: Any, postgres_server: Any) -> None:
    """The worker as ``bench/native_transfer.py`` starts it (a subprocess, the in-process engine as the source, a
    real PostgreSQL target): every trial of an unchanging source is admitted with one stable workload, and only
    admitted trials are measured."""
    import json
    import subprocess

    command = [sys.executable, str(BENCH / "native_transfer.py"), "--worker", "narrow", postgres_server.dsn]
    command += ["--rows", "400", "--trials", "2", "--chunk-rows", "100", "--source", "chdb"]
    done = subprocess.run(command, env=bench.worker_env(), capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    qualification = result["qualification"]
    assert qualification["excluded"] == {} and qualification["repeatable"] is True
    [workload] = qualification["workload"]
    assert workload["rows"] == 400 and len(workload["workload_digest"]) == 64
    assert len(result["ours_s"]) == len(qualification["admitted"]) >= 2
