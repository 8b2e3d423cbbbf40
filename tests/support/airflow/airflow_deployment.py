"""A real Airflow 3 deployment for one test (a helper module): api-server, scheduler, dag-processor and triggerer.

Each component is its own ``python -m airflow`` process in its own process group, with LocalExecutor, on a temporary
AIRFLOW_HOME whose ``airflow.cfg`` Airflow generates itself, a SQLite metadata database and a DAGs folder the caller
fills. Only what the deployment needs to be fast and reachable is set, through ``AIRFLOW__*`` variables: short
heartbeats, one parsing process, unpaused DAGs, the execution API on a free local port, and SimpleAuthManager with
every user an admin (the REST API then hands out a bearer token without credentials). Secrets shared by the
components (JWT, Fernet for trigger kwargs) are generated per deployment and passed to all of them, so no component
depends on which one wrote ``airflow.cfg`` first.

Every component writes its output to ``<home>/component-logs/<name>.log``; ``tails`` gives their ends for a failure
message. ``stop`` ends each process group (SIGTERM, then SIGKILL), task processes included.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
from cryptography.fernet import Fernet

from tests.support.fixtures.postgres import free_port

COMPONENTS: dict[str, tuple[str, ...]] = {
    "api-server": ("--host", "127.0.0.1"),  # and --port, chosen per deployment
    # no log servers (fixed ports, every interface): the api-server reads task logs from the shared log folder
    "scheduler": ("--skip-serve-logs",),
    "dag-processor": (),
    "triggerer": ("--skip-serve-logs",),
}
T = TypeVar("T")


class Deadline:
    """One time budget shared by every wait of a test, so the sum of its waits is bounded too."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def wait_for(self, what: str, probe: Callable[[], T | None], *, within: float, interval: float = 0.5) -> T:
        """Poll ``probe`` until it returns a value other than ``None``/``False``; fail after ``within`` seconds (or
        when the overall budget runs out), naming ``what`` and the last value seen."""
        end = min(time.monotonic() + within, self.end)
        last: Any = None
        while True:
            last = probe()
            if last is not None and last is not False:
                return last
            if time.monotonic() >= end:
                raise AssertionError(f"timed out waiting for {what} (last seen: {last!r})")
            time.sleep(interval)


@dataclass
class AirflowDeployment:
    home: Path
    port: int
    env: dict[str, str]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    client: httpx.Client | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.home / "component-logs"

    @classmethod
    def prepare(cls, home: Path, extra_env: Mapping[str, str]) -> AirflowDeployment:
        """A home with an empty DAGs folder and the components' environment; nothing runs yet."""
        (home / "dags").mkdir(parents=True)
        port = free_port()
        deployment = cls(home=home, port=port, env=_environment(home, port, extra_env))
        deployment.log_dir.mkdir()
        return deployment

    def migrate(self, schema_cache: Path | None = None) -> None:
        """Create the metadata database (copied from ``schema_cache`` when it exists, so ``airflow db migrate`` only
        checks it) and let Airflow generate ``airflow.cfg``, before any component starts."""
        if schema_cache is not None and schema_cache.exists():
            shutil.copyfile(schema_cache, self.home / "airflow.db")
        self.run("db", "migrate")

    def run(self, *args: str, timeout: float = 120) -> None:
        """A one-shot ``airflow`` command in the deployment's environment (its output goes to the component logs)."""
        with (self.log_dir / f"{'-'.join(args)}.log").open("wb") as out:
            subprocess.run(
                [sys.executable, "-m", "airflow", *args],
                env=self.env,
                cwd=self.home,
                stdout=out,
                stderr=subprocess.STDOUT,
                check=True,
                timeout=timeout,
            )

    def start(self, deadline: Deadline, *, within: float = 90) -> None:
        """Start every component and wait until the api-server reports each healthy."""
        for name, fixed in COMPONENTS.items():
            args = [*fixed, "--port", str(self.port)] if name == "api-server" else list(fixed)
            with (self.log_dir / f"{name}.log").open("ab") as out:
                self.processes[name] = subprocess.Popen(
                    [sys.executable, "-m", "airflow", name, *args],
                    env=self.env,
                    cwd=self.home,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
        deadline.wait_for("every Airflow component to report healthy", self._healthy, within=within, interval=1)
        token = httpx.get(f"{self.url}/auth/token", timeout=10).raise_for_status().json()["access_token"]
        self.client = httpx.Client(
            base_url=f"{self.url}/api/v2", headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    def _healthy(self) -> dict[str, Any] | None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise AssertionError(f"airflow {name} exited with {process.returncode}")
        try:
            health = httpx.get(f"{self.url}/api/v2/monitor/health", timeout=5).json()
        except (httpx.HTTPError, ValueError):
            return None
        parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
        states = {part: (health.get(part) or {}).get("status") for part in parts}
        return health if all(state == "healthy" for state in states.values()) else None

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        """One REST call (public API v2); a non-2xx answer fails with its body."""
        assert self.client is not None, "start() first"
        response = self.client.request(method, path, **kwargs)
        if response.is_error:
            raise AssertionError(f"{method} {path}: HTTP {response.status_code}: {response.text[:2000]}")
        return response.json() if response.content else None

    def stop(self, *, grace: float = 15) -> None:
        """SIGTERM every component's process group, wait up to ``grace`` seconds, then SIGKILL what is left."""
        if self.client is not None:
            self.client.close()
        for process in self.processes.values():
            _signal_group(process, signal.SIGTERM)
        end = time.monotonic() + grace
        for process in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, end - time.monotonic()))
        for process in self.processes.values():
            _signal_group(process, signal.SIGKILL)  # stragglers of the group (task processes) too
            process.wait(timeout=10)

    @contextlib.contextmanager
    def explained(self) -> Iterator[None]:
        """Print the logs' tails when the body fails (the test's captured output shows them with the failure)."""
        try:
            yield
        except BaseException:
            print(self.tails())
            raise

    def log_line(self, component: str, *parts: str) -> str | None:
        """The first line of ``component``'s log that contains every one of ``parts``, or ``None``."""
        path = self.log_dir / f"{component}.log"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        return next((line for line in lines if all(part in line for part in parts)), None)

    def tails(self, lines: int = 40) -> str:
        """The last ``lines`` lines of every component log and task log, for a failure message."""
        parts = []
        for path in [*sorted(self.log_dir.glob("*.log")), *sorted((self.home / "logs").glob("dag_id=*/**/*.log*"))]:
            text = [_readable(line) for line in path.read_text(errors="replace").splitlines()[-lines:]]
            parts.append(f"----- {path.relative_to(self.home)} -----\n" + "\n".join(text))
        return "\n".join(parts)


def _readable(line: str) -> str:
    """A task-log line (JSON) as ``time level event``, with the error detail when there is one."""
    try:
        record = json.loads(line)
    except ValueError:
        return line
    if not isinstance(record, dict) or "event" not in record:
        return line
    text = f"{str(record.get('timestamp', ''))[11:23]} {record.get('level', '')} {record['event']}"
    return f"{text} {json.dumps(record['error_detail'])}" if record.get("error_detail") else text


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def _environment(home: Path, port: int, extra: Mapping[str, str]) -> dict[str, str]:
    """The components' environment: the caller's minus every Airflow variable, plus the deployment's settings."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("AIRFLOW")}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW_CONFIG": str(home / "airflow.cfg"),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
            "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "1",
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            # LocalExecutor: every task try runs on this machine, so a worker-local artifact store is declared safe
            "AIRFLOW__DPONE__SINGLE_WORKER": "True",
            # the file is in the folder before the processor starts; later re-parses would only cost CPU
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "300",
        }
    )
    env.update(extra)
    return env
