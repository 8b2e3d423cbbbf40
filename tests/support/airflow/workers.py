"""A worker machine for the tests that run task tries in processes of their own (``python -m
tests.support.airflow.worker_try``), as a Celery worker runs them; a try can end the process mid-task (``stage-then-die``),
which is a killed task. The cluster is any object with ``connection_json()``: the embedded cluster or the compose one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.cluster.replica_checks import authority_record

REPO = Path(__file__).resolve().parents[3]


class Worker:
    """One worker machine: its own host name (its home's name), home directory and settings; each call a process."""

    def __init__(
        self,
        home: Path,
        cluster: Any,
        manifest: dict[str, Any],
        connections: dict[str, str] | None = None,
        **settings: str,
    ) -> None:
        home.mkdir(parents=True)
        self.home = home
        self.host = f"{home.name}.workers.example"
        env = {name: value for name, value in os.environ.items() if not name.startswith("AIRFLOW")}
        env.update(
            {
                "AIRFLOW_HOME": str(home),
                "AIRFLOW_CONFIG": str(home / "airflow.cfg"),
                "AIRFLOW__CORE__HOSTNAME_CALLABLE": "tests.support.airflow.worker_try.hostname",
                "DPONE_WORKER_HOSTNAME": self.host,
                "AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT": json.dumps(cluster.connection_json()),
                "DPONE_WORKER_MANIFEST": json.dumps(manifest),
                "PYTHONPATH": str(REPO),
            }
        )
        env.update({f"AIRFLOW_CONN_{conn_id.upper()}": value for conn_id, value in (connections or {}).items()})
        env.update({f"AIRFLOW__DPONE__{name.upper()}": value for name, value in settings.items()})
        self.env = env

    def run(self, *steps: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-m", "tests.support.airflow.worker_try", *steps],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        assert {line["host"] for line in lines} <= {self.host}, lines  # each try ran as this worker's machine
        outcomes = [line["outcome"] for line in lines]
        if done.returncode == 3:  # the worker died where told to
            outcomes.append("died")
        assert done.returncode in (0, 3), done.stderr[-2000:]
        return outcomes


def kill_mid_stage_then_retry_elsewhere(home: Path, cluster: Any, manifest: dict[str, Any]) -> None:
    """A worker process dies (``os._exit``) as its first member load is about to be sent; the retry on another worker
    (one shared artifact store) resumes from the authority, left ``STAGING``, and stages and publishes.

    The caller reads the verdict on the published table from every server (the route's own)."""
    shared = f"file://{home}/shared-mount/artifacts"
    first = Worker(home / "worker-a", cluster, manifest, artifact_base=shared)
    second = Worker(home / "worker-b", cluster, manifest, artifact_base=shared)
    assert first.run("fence", "stage-then-die") == ["LOCKED", "died"]
    record = authority_record(cluster, manifest["sink"]["database"])
    assert record is not None and record.phase.value == "STAGING"
    assert second.run("stage", "publish") == ["STAGED", "COMMITTED"]
