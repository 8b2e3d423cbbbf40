"""``bench/synthetic_receipt.py`` (``make synthetic-receipt``) on a fresh embedded cluster: every fault fired, the
service shows no duplicate, no divergent member and no false success, and the naive retry of the same lost response
duplicates the member's rows; the receipt names its scope, its commit and the digest of its fixture."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_dpone.core.canonical import canonical_json

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ROWS = 300


def test_the_receipt_of_the_local_synthetic_profile(tmp_path: Path) -> None:
    out = tmp_path / "synthetic-receipt.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "synthetic_receipt.py"), "--rows", str(ROWS), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    receipt = json.loads(out.read_text(encoding="utf-8"))
    assert (receipt["scope"], receipt["live_certification"]) == ("local_synthetic", "UNVERIFIED")
    assert len(receipt["commit"]) == 40
    assert receipt["fixture_sha256"] == hashlib.sha256(canonical_json(receipt["fixture"]).encode()).hexdigest()
    names = [scenario["name"] for scenario in receipt["scenarios"]]
    assert names == receipt["fixture"]["scenarios"] and len(names) == 5
    for scenario in receipt["scenarios"]:
        fired = scenario["fault_fired"] if scenario["name"] != "replay_after_completion" else True
        assert scenario["outcome"] == "completed" and fired, scenario
        assert (scenario["duplicate_rows"], scenario["divergent_members"], scenario["false_successes"]) == (0, 0, 0)
    assert receipt["totals"] == {"duplicate_rows": 0, "false_successes": 0, "divergent_members": 0}
    (naive,) = receipt["baseline"]
    assert naive["fault_fired"] and naive["duplicate_rows"] == ROWS
    assert (naive["divergent_members"], naive["false_successes"]) == (1, 1)
