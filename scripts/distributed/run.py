"""``make test-distributed``: the example DAGs on a Celery deployment of two workers, each SIGKILLed mid-task.

Opt-in (not part of ``make test``): it builds its own environment and runs for about a quarter of an hour, more than
the 20-minute CI budget allows beside the suite. What it builds, from PyPI and Debian packages only (no Docker):

- ``build/distributed/venv``: Airflow with the Celery provider, installed as docs/several-workers.md section 5 says
  (the page's requirement, with Airflow's constraints file; where that file cannot be fetched, the versions the
  project's own environment resolved plus ``celery<5.7``, said so in the summary), and this checkout's provider;
- PostgreSQL (``scripts/ci/postgres.sh``'s binaries) as the metadata database and as the transfer target, Redis
  (``redis-server`` from Debian) as the Celery broker, moto's S3 server as the two stores, the embedded ClickHouse
  cluster (``python -m dpone_embedded up``);
- an api-server, a scheduler, a dag-processor and a triggerer (``tests/support/airflow/airflow_deployment.py``), and two
  Celery workers, each with its own home, host name and ``worker_log_server_port``.

Every setting the page lists is taken from the page itself (:func:`page_settings`): the ``[dpone]`` block verbatim
(its bucket is created in the S3 server, its connection id is defined with the page's ``endpoint_url`` extra), and
every ``[section] key`` the page says components must share or set is set (a smoke test in ``make test`` holds the two
together). Then, one after the other, the external example is killed mid-stage, the internal one mid-publish and the
PostgreSQL one mid-transfer: the worker running the task is SIGKILLed (every process of it, task runners included)
while the embedded server holds the response of the task's statement; the run must complete, the retry on the other
worker; then every member equals the source, no row is duplicated, and nothing is left over (no candidate or staging
table, no store object besides the retained ones). A summary (time, kills, invariants) ends the output; exit 0 only
when every invariant held. A piece that cannot be built here is named and the exit is 2, never a pass.

"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "several-workers.md"
BUILD = REPO / "build" / "distributed"
VENV = BUILD / "venv"
EXAMPLE_FILES = (
    "clickhouse_external_full_refresh.py",
    "clickhouse_internal_full_refresh.py",
    "clickhouse_to_postgres_raw_snapshot.py",
    "full_refresh_demo.py",
    "transfer_demo.py",
)
HEARTBEAT_TIMEOUT = 60
"""``[scheduler] task_instance_heartbeat_timeout``: the recovery time after a lost worker (page section 4); long
enough that a live task on a loaded machine is not declared lost."""
API_TIMEOUT = 60
"""``[workers] execution_api_timeout``: on a loaded machine the API server answers a task's start after the default."""
HOLD_SECONDS = 240.0
"""How long the embedded server holds the response the killed task waits for (longer than the kill takes)."""
WORKERS = ("worker-a", "worker-b")


@dataclass(frozen=True)
class Kill:
    """One example run whose worker is SIGKILLed while a server holds the response its task waits for."""

    name: str
    dag_id: str
    task_id: str
    held_on: str
    """``member`` (the first member) or ``coordinator``: the server that holds the response."""
    statement: str
    """Regular expression of the statement whose response is held (it has taken effect when the worker dies); armed
    before the run starts, so it matches only the task's own statement: no other task of the DAG sends one like it."""
    database: str | None
    """The publication's database, whose members are checked; ``None``: the PostgreSQL transfer."""


KILLS = (
    Kill("external example, killed mid-stage", "clickhouse_external_full_refresh", "stage", "member",
         r"^\s*INSERT INTO .* FORMAT Native", "analytics"),
    Kill("internal example, killed mid-publish", "clickhouse_internal_full_refresh", "publish", "coordinator",
         r"^\s*(EXCHANGE TABLES|RENAME TABLE) .* ON CLUSTER", "analytics_replicated"),
    Kill("PostgreSQL example, killed mid-transfer", "clickhouse_to_postgres_raw_snapshot", "transfer", "coordinator",
         r"^\s*SELECT (?!count\(\)).* FROM `events`\.`raw_events`", None),
)  # fmt: skip


class CannotRunError(Exception):
    """A piece of the deployment cannot be built on this machine: named, and the run exits 2."""


# --- the page ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PageSettings:
    """What docs/several-workers.md tells a deployment to set, read from the page's own blocks."""

    dpone: dict[str, str]
    """The ``[dpone]`` ini block: setting -> value, verbatim."""
    endpoint_extra_key: str
    """The connection extra that gives an S3-compatible endpoint."""
    shared: frozenset[tuple[str, str]]
    """Every ``[section] key`` the page names as set on components."""
    requirement: str
    """The Airflow requirement of the install block, ``${AIRFLOW_VERSION}`` substituted."""
    constraints_url: str
    """Airflow's constraints file for this Python, from the install block."""


def page_settings(text: str, python_version: str = f"{sys.version_info[0]}.{sys.version_info[1]}") -> PageSettings:
    blocks = re.findall(r"```(\w*)\n(.*?)```", text, re.DOTALL)
    ini = "".join(body for lang, body in blocks if lang == "ini" and "[dpone]" in body)
    dpone = dict(re.findall(r"^(\w+) = (\S+)$", ini, re.MULTILINE))
    install = "".join(body for lang, body in blocks if lang == "bash" and "--constraint" in body)
    version = re.search(r"AIRFLOW_VERSION=([\d.]+)", install)
    requirement = re.search(r'pip install "(apache-airflow\[[^"]+\]==\$\{AIRFLOW_VERSION\})"', install)
    url = re.search(r'--constraint "([^"]+)"', install)
    extra = re.search(r'\{"(\w+)": "https?://', text)
    if not (dpone and version and requirement and url and extra):
        raise CannotRunError(f"{PAGE.relative_to(REPO)} no longer holds the blocks this script reads")

    def substituted(value: str) -> str:
        return value.replace("${AIRFLOW_VERSION}", version.group(1)).replace("${PYTHON_VERSION}", python_version)

    shared = frozenset(re.findall(r"`\[(\w+)\] (\w+)`", text))
    return PageSettings(dpone, extra.group(1), shared, substituted(requirement.group(1)), substituted(url.group(1)))


def store_location(url: str) -> tuple[str, str, str]:
    """``s3://<conn_id>@<bucket>/<prefix>`` -> (conn_id, bucket, prefix)."""
    match = re.fullmatch(r"s3://(\w+)@([\w.-]+)/(.+)", url)
    if match is None:
        raise CannotRunError(f"the page's store URL {url!r} is not s3://<conn_id>@<bucket>/<prefix>")
    return match.group(1), match.group(2), match.group(3)


def airflow_variable(section: str, key: str) -> str:
    return f"AIRFLOW__{section.upper()}__{key.upper()}"


# --- the environment ---------------------------------------------------------------------------------------------


def build_venv(settings: PageSettings) -> str:
    """Create ``build/distributed/venv`` when absent; return which constraints it was installed with."""
    marker = VENV / ".installed"
    if marker.exists():
        return marker.read_text()
    uv = REPO / ".venv" / "bin" / "uv"
    if not uv.exists():
        raise CannotRunError("the project's environment is missing: run `make install` first")
    constraints = BUILD / "constraints.txt"
    BUILD.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(settings.constraints_url, timeout=20) as response:  # noqa: S310 -- the page's URL
            constraints.write_bytes(response.read())
        used = f"Airflow's constraints file ({settings.constraints_url})"
    except OSError as exc:
        frozen = subprocess.run(
            [str(uv), "pip", "freeze", "--python", str(REPO / ".venv" / "bin" / "python")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        pins = [line for line in frozen if "==" in line and not line.startswith(("airflow-provider-dpone", "dpone-"))]
        constraints.write_text("\n".join([*pins, "celery<5.7"]) + "\n")
        used = (
            f"FALLBACK: Airflow's constraints file is unreachable here ({exc.__class__.__name__}); "
            "the project's resolved versions plus celery<5.7"
        )
    shutil.rmtree(VENV, ignore_errors=True)
    subprocess.run([str(uv), "venv", "-q", str(VENV), "--python", str(REPO / ".venv" / "bin" / "python")], check=True)
    subprocess.run(
        [str(uv), "pip", "install", "-q", "-c", str(constraints), settings.requirement,
         "-e", f"{REPO}[embedded,postgres,test]", str(REPO / "packages" / "dpone-embedded")],
        env={**os.environ, "VIRTUAL_ENV": str(VENV)},
        check=True,
    )  # fmt: skip
    marker.write_text(used)
    return used


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_port(port: int, what: str, within: float = 30) -> None:
    end = time.monotonic() + within
    while time.monotonic() < end:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.2)
    raise CannotRunError(f"{what} did not open port {port}")


@contextlib.contextmanager
def process(argv: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """A background process in its own group, stopped (SIGTERM, then SIGKILL) on exit."""
    with log.open("ab") as out:
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        yield child
    finally:
        stop_group(child)


def stop_group(child: subprocess.Popen[bytes], grace: float = 10) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=10)


def deployment_environment(
    settings: PageSettings, *, database: str, result_backend: str, broker: str, connections: dict[str, str]
) -> dict[str, str]:
    """What every component gets on top of ``airflow_deployment``'s environment (which makes the Fernet key, the JWT
    secret and ``execution_api_server_url`` one per deployment): Celery, the metadata database, the recovery time,
    the page's ``[dpone]`` block verbatim and the connections."""
    return {
        airflow_variable("core", "executor"): "CeleryExecutor",
        airflow_variable("core", "parallelism"): "8",
        airflow_variable("database", "sql_alchemy_conn"): database,
        airflow_variable("celery", "broker_url"): broker,
        airflow_variable("celery", "result_backend"): result_backend,
        airflow_variable("scheduler", "task_instance_heartbeat_timeout"): str(HEARTBEAT_TIMEOUT),
        airflow_variable("scheduler", "task_instance_heartbeat_timeout_detection_interval"): "5",
        airflow_variable("workers", "execution_api_timeout"): str(API_TIMEOUT),
        airflow_variable("dpone", "single_worker"): "False",
        **{airflow_variable("dpone", key): value for key, value in settings.dpone.items()},
        **{f"AIRFLOW_CONN_{conn_id.upper()}": value for conn_id, value in connections.items()},
        "PYTHONPATH": str(REPO),
    }


def worker_environment(shared: dict[str, str], name: str, home: Path, log_port: int) -> dict[str, str]:
    """One worker machine: the shared environment, its own home, host name and ``worker_log_server_port``."""
    return {
        **shared,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW_CONFIG": str(home / "airflow.cfg"),
        airflow_variable("logging", "worker_log_server_port"): str(log_port),
        airflow_variable("core", "hostname_callable"): "tests.support.airflow.worker_try.hostname",
        "DPONE_WORKER_HOSTNAME": name,
    }


# --- the run -----------------------------------------------------------------------------------------------------


@dataclass
class Worker:
    name: str
    home: Path
    env: dict[str, str]
    log_port: int
    child: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.home / "worker.log"
        with log.open("ab") as out:
            self.child = subprocess.Popen(
                [sys.executable, "-m", "airflow", "celery", "worker", "--concurrency", "2",
                 "--celery-hostname", f"{self.name}@%h"],
                env=self.env, cwd=self.home, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def kill(self) -> list[int]:
        """SIGKILL every process of the worker machine at once, as a lost host: the Celery worker, its pool, the
        task supervisors and the task runners (which Airflow puts in process groups of their own, so a signal to
        the worker's group alone would leave them running). Returns the pids killed."""
        assert self.child is not None
        pids = machine_pids(self.child.pid)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.child.wait(timeout=30)
        self.child = None
        return pids

    def stop(self) -> None:
        if self.child is not None:
            leftovers = machine_pids(self.child.pid)
            stop_group(self.child)
            for pid in leftovers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.child = None


def machine_pids(root: int) -> list[int]:
    """``root`` and every process descended from it (whatever its process group)."""
    import psutil

    try:
        parent = psutil.Process(root)
        return [root, *(child.pid for child in parent.children(recursive=True))]
    except psutil.NoSuchProcess:
        return []


def alive(pids: list[int]) -> list[int]:
    import psutil

    return [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


@dataclass
class Outcome:
    name: str
    killed: str = ""
    recovered_on: str = ""
    seconds: float = 0.0
    invariants: dict[str, bool] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    @property
    def passed(self) -> bool:
        return not self.error and bool(self.invariants) and all(self.invariants.values())


class Distributed:
    def __init__(self, run_dir: Path, settings: PageSettings) -> None:
        self.run_dir = run_dir
        self.settings = settings
        self.stack = contextlib.ExitStack()
        self.workers: dict[str, Worker] = {}
        self.airflow: Any = None
        self.cluster: Any = None
        self.pg: Any = None
        self.s3: Any = None
        self.bucket = ""

    # --- building ---

    def build(self) -> None:
        from tests.support.airflow.airflow_deployment import AirflowDeployment, Deadline
        from tests.support.fixtures.postgres import find_postgres_bin, throwaway_cluster

        redis = shutil.which("redis-server")
        if redis is None:
            raise CannotRunError("redis-server is not installed: apt-get install -y redis-server")
        if find_postgres_bin() is None:
            raise CannotRunError("PostgreSQL binaries are not installed: bash scripts/ci/postgres.sh")
        try:
            import airflow.providers.celery  # noqa: F401
        except ImportError as exc:
            raise CannotRunError(f"the Celery provider does not import: {exc}") from None
        import psycopg

        self.pg = self.stack.enter_context(throwaway_cluster())
        with psycopg.connect(self.pg.dsn, autocommit=True) as connection:
            for database in ("airflow", "target"):
                connection.execute(f"CREATE DATABASE {database}")
        credentials = f"{self.pg.user}:{self.pg.password}@{self.pg.host}:{self.pg.port}"

        redis_port = free_port()
        self.stack.enter_context(
            process(
                [redis, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                self.run_dir / "redis.log",
            )
        )
        wait_port(redis_port, "redis-server")

        s3_port = free_port()
        fake_aws = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        self.stack.enter_context(
            process([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(s3_port)],
                    self.run_dir / "s3.log", env={**os.environ, **fake_aws})
        )  # fmt: skip
        wait_port(s3_port, "moto's S3 server")
        endpoint = f"http://127.0.0.1:{s3_port}"
        locations = {store_location(url) for url in self.settings.dpone.values() if url.startswith("s3://")}
        if len({(conn, bucket) for conn, bucket, _ in locations}) != 1:
            raise CannotRunError("the page's two stores name different connections or buckets")
        ((conn_id, self.bucket, _),) = {(conn, bucket, "") for conn, bucket, _ in locations}
        import boto3

        self.s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **_boto_keys(fake_aws))
        self.s3.create_bucket(Bucket=self.bucket)
        s3_connection = {
            "conn_type": "aws",
            "login": "testing",
            "password": "testing",
            "extra": {self.settings.endpoint_extra_key: endpoint, "region_name": "us-east-1"},
        }

        cluster_dir = self.run_dir / "cluster"
        up = subprocess.run(
            [sys.executable, "-m", "dpone_embedded", "up", "--dir", str(cluster_dir), "--members", "3"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        self.stack.callback(
            subprocess.run, [sys.executable, "-m", "dpone_embedded", "down", "--dir", str(cluster_dir)],
            capture_output=True, timeout=120, check=False,
        )  # fmt: skip
        if up.returncode != 0:
            raise CannotRunError(f"the embedded cluster did not start: {up.stderr[-1500:]}")
        from dpone_embedded import EmbeddedCluster

        self.cluster = EmbeddedCluster.attach(cluster_dir)

        extra_env = deployment_environment(
            self.settings,
            database=f"postgresql+psycopg2://{credentials}/airflow",
            result_backend=f"db+postgresql://{credentials}/airflow",
            broker=f"redis://127.0.0.1:{redis_port}/0",
            connections={
                "dpone_clickhouse_default": json.dumps(self.cluster.connection_json()),
                "postgres_default": f"postgresql://{credentials}/target",
                conn_id: json.dumps(s3_connection),
            },
        )
        extra_env.update(fake_aws)
        self.airflow = AirflowDeployment.prepare(self.run_dir / "airflow", extra_env)
        dags = self.airflow.home / "dags"
        for name in EXAMPLE_FILES:
            shutil.copyfile(REPO / "dags_examples" / name, dags / name)
        shutil.copytree(REPO / "dags_examples" / "manifests", dags / "manifests")
        self.airflow.migrate(None)
        self.stack.callback(self.airflow.stop)
        self.airflow.start(Deadline(300), within=240)
        for name in WORKERS:
            home = self.run_dir / name
            home.mkdir()
            port = free_port()
            env = worker_environment(self.airflow.env, name, home, port)
            self.workers[name] = Worker(name, home, env, port)
            self.stack.callback(self.workers[name].stop)
            self.workers[name].start()
        for worker in self.workers.values():
            wait_port(worker.log_port, f"{worker.name}'s log server", within=180)

    # --- one scenario ---

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.airflow.api(method, path, **kwargs)

    def wait(self, what: str, probe: Callable[[], Any], within: float, interval: float = 1.0) -> Any:
        import httpx

        end = time.monotonic() + within
        while True:
            try:
                value = probe()
            except httpx.TransportError:  # a loaded API server that answers late: ask again, within the budget
                value = None
            if value:
                return value
            if time.monotonic() > end:
                raise AssertionError(f"timed out after {within:.0f} s waiting for {what}")
            time.sleep(interval)

    def task(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")
        return found

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")["state"])

    def scenario(self, kill: Kill) -> Outcome:
        outcome = Outcome(kill.name)
        dag_id, task_id = kill.dag_id, kill.task_id
        held_on = self.cluster.members[0] if kill.held_on == "member" else self.cluster.coordinator
        started = time.monotonic()
        try:
            self.wait(f"{dag_id} to be parsed", lambda: self.api("GET", "/dags", params={"dag_id_pattern": dag_id})
                      ["dags"], within=240)  # fmt: skip
            errors = self.api("GET", "/importErrors")
            if errors["total_entries"]:
                raise AssertionError(f"import errors: {errors['import_errors']}")
            self.cluster.faults.delay_response(held_on, HOLD_SECONDS, match=kill.statement)
            run_id = self.api("POST", f"/dags/{dag_id}/dagRuns", json={"logical_date": None})["dag_run_id"]
            self.wait(
                f"{task_id} to run into the held response",
                lambda: self.task(dag_id, run_id, task_id)["state"] == "running" and not _delays(self.cluster),
                600,
            )
            host = self.task(dag_id, run_id, task_id)["hostname"]
            victim = self.workers[host]
            time.sleep(1)
            killed = victim.kill()
            outcome.killed = f"{victim.name} (SIGKILL to its {len(killed)} processes) during {task_id} try 1"
            time.sleep(1)
            outcome.invariants["every process of the killed worker is gone"] = len(killed) >= 3 and not alive(killed)
            print(f"[distributed] {kill.name}: killed {outcome.killed}", flush=True)
            state = self.wait(
                "the run to finish",
                lambda: (s := self.run_state(dag_id, run_id)) in ("success", "failed") and s,
                HEARTBEAT_TIMEOUT + 600,
                interval=2,
            )
            instance = self.task(dag_id, run_id, task_id)
            outcome.recovered_on = f"{instance['hostname']} (try {instance['try_number']}, {instance['state']})"
            outcome.invariants["run succeeded"] = state == "success"
            outcome.invariants["retry ran on the other worker"] = (
                instance["hostname"] in self.workers and instance["hostname"] != victim.name
            )
            outcome.invariants["the task succeeded in a later try"] = (
                instance["state"] == "success" and instance["try_number"] >= 2
            )
            victim.start()  # the machine comes back for the next scenario
            wait_port(victim.log_port, f"{victim.name}'s log server", within=180)
            verified = self.verify_transfer() if kill.database is None else self.verify_publication(kill.database)
            outcome.invariants.update(verified)
        except Exception as exc:  # noqa: BLE001 -- the summary names every failure
            outcome.error = f"{exc.__class__.__name__}: {str(exc)[:1500]}"
        finally:
            with contextlib.suppress(Exception):
                self.cluster.faults.reset()
            outcome.seconds = time.monotonic() - started
        return outcome

    # --- the invariants, read directly from the servers ---

    def members_equal_source(self, database: str, table: str) -> dict[str, bool]:
        from tests.support.airflow.embedded_example import member_rows, member_tables, table_content

        source = table_content(self.cluster, self.cluster.coordinator, database, "source_table")
        contents = [table_content(self.cluster, member, database, table) for member in self.cluster.members]
        counted = member_rows(self.cluster, database, table)  # the server's count() and uniqExact(id)
        tables = member_tables(self.cluster, database)
        return {
            f"every member equals the source ({source[0]} rows)": source[0] > 0 and all(c == source for c in contents),
            "no duplicate row on any member": all(c is not None and c[0] == c[1] == source[0] for c in counted),
            "no candidate or staging table left on any member": all(
                t == ["__dpone_cluster_publication_authority", table] for t in tables
            ),
        }

    def store_clean(self, prefix_setting: str, retained: Callable[[str], bool]) -> dict[str, bool]:
        _, bucket, prefix = store_location(self.settings.dpone[prefix_setting])
        keys = _keys(self.s3, bucket, prefix)
        stray = [key for key in keys if not retained(key.removeprefix(prefix).lstrip("/"))]
        return {
            f"{prefix_setting}: {len(keys)} objects, all retained ones (stray: {stray[:5]})": not stray and bool(keys)
        }

    def verify_publication(self, database: str) -> dict[str, bool]:
        result = self.members_equal_source(database, "target_table")
        result.update(
            self.store_clean(
                "artifact_base", lambda key: re.fullmatch(r"sha256/[0-9a-f]{2}/[0-9a-f]{64}\.native", key) is not None
            )
        )
        return result

    def verify_transfer(self) -> dict[str, bool]:
        import psycopg

        from airflow_provider_dpone.transfer.targets.postgres.statements import RECEIPT_TABLE

        client = self.cluster.client(self.cluster.coordinator)
        try:
            source = sorted(
                tuple(row)
                for row in client.query(
                    "SELECT id, ver, is_deleted, payload, toString(event_time), toString(amount) FROM events.raw_events"
                ).result_rows
            )
        finally:
            client.close()
        dsn = self.pg.dsn.replace("dbname=postgres", "dbname=target")
        with psycopg.connect(dsn) as connection:
            target = sorted(
                (int(r[0]), int(r[1]), int(r[2]), r[3], r[4], r[5])
                for r in connection.execute(
                    "SELECT id, ver, is_deleted, payload, to_char(event_time AT TIME ZONE 'UTC', "
                    "'YYYY-MM-DD HH24:MI:SS.MS'), amount::text FROM public.raw_events"
                ).fetchall()
            )
            tables = sorted(
                f"{schema}.{table}"
                for schema, table in connection.execute(
                    "SELECT table_schema, table_name FROM information_schema.tables "
                    "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
                ).fetchall()
            )
        # a ClickHouse String lands in bytea: compare bytes (the ClickHouse client hands out text, encoded back here)
        normalized = sorted((*row[:3], _bytes(row[3]), row[4], _decimal(row[5])) for row in target)
        expected = sorted((*row[:3], _bytes(row[3]), row[4], _decimal(row[5])) for row in source)
        differing = next((pair for pair in zip(expected, normalized, strict=False) if pair[0] != pair[1]), None)

        def retained(key: str) -> bool:
            return not key.startswith("_dpone_create_once_probe") and not key.endswith((".tmp", ".partial"))

        result = {
            f"the PostgreSQL target equals the source's raw rows ({len(source)}; first difference: {differing})": bool(
                source
            )
            and normalized == expected,
            "no duplicate row in the target": len(target) == len(source),
            f"no staging table left in PostgreSQL (tables: {tables})": tables
            == sorted(["public.raw_events", f"public.{RECEIPT_TABLE}"]),
        }
        result.update(self.store_clean("native_transfer_base", retained))
        return result


def _boto_keys(fake: dict[str, str]) -> dict[str, str]:
    return {"aws_access_key_id": fake["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": fake["AWS_SECRET_ACCESS_KEY"]}


def _delays(cluster: Any) -> list[dict[str, Any]]:
    return [fault for fault in cluster.faults.armed() if fault.get("kind") == "delay"]


def _bytes(value: str | bytes | memoryview | None) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return bytes(value) if isinstance(value, memoryview) else value.encode()


def _decimal(text: str | None) -> str | None:
    """A decimal's text without trailing zeros (ClickHouse and PostgreSQL print scale differently)."""
    if text is None:
        return None
    from decimal import Decimal

    return format(Decimal(text).normalize(), "f")


def _keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.extend(item["Key"] for item in page.get("Contents", []))
    return keys


def scenarios(run: Distributed, only: str | None = None) -> list[Outcome]:
    outcomes = []
    for kill in (kill for kill in KILLS if only in (None, kill.task_id)):
        outcome = run.scenario(kill)
        print(f"[distributed] {kill.name}: {'PASS' if outcome.passed else 'FAIL'} {outcome.error}", flush=True)
        outcomes.append(outcome)
    return outcomes


def summary(outcomes: list[Outcome], seconds: float, constraints: str) -> str:
    lines = [
        "",
        "=== make test-distributed: summary ===",
        f"time: {seconds:.0f} s; kills: {sum(1 for o in outcomes if o.killed)}; constraints: {constraints}",
    ]
    for outcome in outcomes:
        lines.append(f"- {outcome.name}: {'PASS' if outcome.passed else 'FAIL'} ({outcome.seconds:.0f} s)")
        lines.append(f"    killed: {outcome.killed or '-'}; last try on: {outcome.recovered_on or '-'}")
        lines.extend(f"    [{'ok' if held else 'FAILED'}] {text}" for text, held in outcome.invariants.items())
        if outcome.error:
            lines.append(f"    error: {outcome.error}")
    verdict = "PASS" if outcomes and all(o.passed for o in outcomes) else "FAIL"
    lines.append(f"verdict: {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the run directory (logs, homes) after the run")
    parser.add_argument("--only", choices=[kill.task_id for kill in KILLS], help="run the one kill of this task")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        settings = page_settings(PAGE.read_text())
        constraints = build_venv(settings)
        if Path(sys.prefix).resolve() != VENV.resolve():
            python = str(VENV / "bin" / "python")
            os.execv(python, [python, __file__, *(argv if argv is not None else sys.argv[1:])])  # noqa: S606 -- ours
        sys.path.insert(0, str(REPO))
        run_dir = BUILD / "run"
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        run = Distributed(run_dir, settings)
        with run.stack:
            try:
                run.build()
            except CannotRunError:
                raise
            except Exception as exc:  # noqa: BLE001 -- a deployment that does not come up is a failure, named
                if run.airflow is not None:
                    print(run.airflow.tails(30))
                print(f"make test-distributed FAILED: the deployment did not come up: {exc}", file=sys.stderr)
                return 1
            print(f"[distributed] deployment up after {time.monotonic() - started:.0f} s", flush=True)
            outcomes = scenarios(run, args.only)
            if any(not o.passed for o in outcomes):
                print(run.airflow.tails(30))
    except CannotRunError as exc:
        print(f"make test-distributed CANNOT RUN here: {exc}", file=sys.stderr)
        return 2
    print(summary(outcomes, time.monotonic() - started, constraints))
    if not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
