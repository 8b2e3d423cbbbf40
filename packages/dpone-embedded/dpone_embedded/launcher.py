"""Starting, stopping, killing and restarting the processes of an embedded cluster.

Ports are chosen per cluster, never fixed: the launcher binds each process's HTTP socket (listening) and native
socket (reserved) on free loopback ports picked at random below the kernel's ephemeral range (so a killed process's
port cannot be taken by some outgoing connection before its restart), writes every process's spec with the ports it
got, then spawns the processes with the sockets as inherited descriptors. A restart binds the same ports again. ``cluster.json`` in
the cluster directory records the topology and the pids, so ``status``/``down`` and other processes can find them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dpone_embedded
from dpone_embedded.layout import CLUSTER_FILE, COORDINATOR, HOST, REPLICATION_DIR, ProcessSpec
from dpone_embedded.replication import ReplicationLog
from dpone_embedded.store import Store
from dpone_embedded.topology import TOPOLOGY, ClusterTopology

READY_TIMEOUT = 60.0


class LaunchError(RuntimeError):
    """A cluster process did not come up; the message carries the tail of its log."""


def package_root() -> str:
    """The directory that contains the ``dpone_embedded`` package this code was imported from."""
    return str(Path(dpone_embedded.__file__).resolve().parent.parent)


def _bind(port: int, listen: bool = True) -> socket.socket:
    """Bind (and for HTTP, listen on) ``port``. Only listening sockets use ``SO_REUSEADDR`` (to rebind over
    TIME_WAIT on a restart); the reserved native port is bound exclusively, so no two processes share it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if listen:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        if listen:
            sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _rebind(port: int, listen: bool, patience: float = 10.0) -> socket.socket:
    """Bind a restarted process's own port again, waiting briefly if the old socket is still being torn down."""
    deadline = time.monotonic() + patience
    while True:
        try:
            return _bind(port, listen)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _bind_again_or_free(port: int, listen: bool) -> socket.socket:
    if port:
        with contextlib.suppress(OSError):
            return _bind(port, listen)
    return _bind_free(listen)


def _previous_ports(directory: Path) -> dict[str, tuple[int, int]]:
    try:
        return {name: (spec.http_port, spec.native_port) for name, spec in specs_of(directory).items()}
    except (FileNotFoundError, KeyError, ValueError, TypeError):
        return {}


def _port_pool() -> range:
    """Ports to pick from: below the kernel's ephemeral range, so that while a killed process is down no outgoing
    connection can be handed its port, and the restart gets the same port back."""
    try:
        low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(10000, low) if low - 10000 >= 4096 else range(high + 1, 65536)


def _bind_free(listen: bool) -> socket.socket:
    """A socket on a currently free, randomly chosen port of :func:`_port_pool`."""
    pool = _port_pool()
    for _ in range(500):
        try:
            return _bind(random.choice(pool), listen)
        except OSError:
            continue
    return _bind(0, listen)


def plan(
    directory: Path,
    members: int,
    internal_replication: bool,
    *,
    password: str,
    owner_pid: int,
    topology: ClusterTopology = TOPOLOGY,
    tls: tuple[str, str] | None = None,
) -> tuple[list[ProcessSpec], dict[str, tuple[socket.socket, socket.socket]]]:
    """Bind every process's sockets and build the specs that name them.

    A directory that held a cluster before gets its processes' previous ports back where they are still free, so
    a cluster brought down and up again keeps its connection.
    """
    names = [COORDINATOR] + [slot.name for slot in topology.slots(members)]
    previous = _previous_ports(directory)
    sockets = {
        name: (
            _bind_again_or_free(previous.get(name, (0, 0))[0], True),
            _bind_again_or_free(previous.get(name, (0, 0))[1], False),
        )
        for name in names
    }
    replicas = [(HOST, sockets[slot.name][1].getsockname()[1]) for slot in topology.slots(members)]
    clusters = {topology.external_cluster: replicas, topology.internal_cluster: replicas}
    default_cluster = topology.cluster_name(internal_replication)
    specs = [
        ProcessSpec(
            name=COORDINATOR,
            role="coordinator",
            cluster_dir=str(directory),
            http_port=sockets[COORDINATOR][0].getsockname()[1],
            native_port=sockets[COORDINATOR][1].getsockname()[1],
            user=topology.user,
            password=password,
            owner_pid=owner_pid,
            clusters=clusters,
            default_cluster=default_cluster,
        )
    ]
    for slot in topology.slots(members):
        specs.append(
            ProcessSpec(
                name=slot.name,
                role="member",
                cluster_dir=str(directory),
                http_port=sockets[slot.name][0].getsockname()[1],
                native_port=sockets[slot.name][1].getsockname()[1],
                shard_num=slot.shard_num,
                replica_num=slot.replica_num,
                user=topology.user,
                password=password,
                owner_pid=owner_pid,
                clusters=clusters,
                default_cluster=default_cluster,
                tls_cert_file=tls[0] if tls else "",
                tls_key_file=tls[1] if tls else "",
            )
        )
    return specs, sockets


def spawn(spec: ProcessSpec, http: socket.socket, native: socket.socket) -> subprocess.Popen[bytes]:
    """Start one process with its sockets; the caller closes its own copies afterwards."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root(), env.get("PYTHONPATH", "")) if p)
    log = open(spec.log_file, "ab")  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dpone_embedded.server",
                str(spec.spec_file),
                "--http-fd",
                str(http.fileno()),
                "--native-fd",
                str(native.fileno()),
            ],
            pass_fds=(http.fileno(), native.fileno()),
            env=env,
            cwd=spec.root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        log.close()


def wait_ready(spec: ProcessSpec, process: subprocess.Popen[bytes] | None, deadline: float) -> None:
    tls = spec.tls and spec.role == "member"
    url = f"{'https' if tls else 'http'}://{spec.host}:{spec.http_port}/ping"
    # readiness only (a local probe of our own process): the certificate is the client's to verify
    unverified = ssl._create_unverified_context() if tls else None  # noqa: S323
    while True:
        if process is not None and process.poll() is not None:
            raise LaunchError(f"{spec.name} exited with {process.returncode}: {log_tail(spec)}")
        try:
            with urllib.request.urlopen(url, timeout=1.0, context=unverified) as response:  # noqa: S310 - http(s) only
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise LaunchError(f"{spec.name} not ready after {READY_TIMEOUT:.0f}s: {log_tail(spec)}")
        time.sleep(0.05)


def log_tail(spec: ProcessSpec, lines: int = 20) -> str:
    try:
        return "\n".join(spec.log_file.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def alive(pid: int, spec: ProcessSpec | None = None) -> bool:
    """Whether ``pid`` is a running process of this cluster (its command line names the spec file)."""
    if pid <= 0:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":
        return False
    return spec is None or str(spec.spec_file).encode() in cmdline


def terminate(pid: int, spec: ProcessSpec, *, hard: bool, timeout: float = 10.0) -> None:
    """Stop one process: SIGKILL when ``hard`` (a crash), else SIGTERM with SIGKILL as the fallback."""
    if not alive(pid, spec):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL if hard else signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive(pid, spec):
        _reap(pid)
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout
        time.sleep(0.02)
    _reap(pid)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


# -- cluster.json -------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def locked_state(directory: Path) -> Iterator[dict[str, Any]]:
    """Read-modify-write ``cluster.json`` under an exclusive lock (the test process and the CLI may both edit it)."""
    directory = Path(directory)
    with open(directory / (CLUSTER_FILE + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = directory / CLUSTER_FILE
        state = json.loads(path.read_text()) if path.exists() else {}
        yield state
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(state, indent=2, sort_keys=True))
        temporary.replace(path)


def read_state(directory: Path) -> dict[str, Any]:
    path = Path(directory) / CLUSTER_FILE
    if not path.exists():
        raise FileNotFoundError(f"no embedded cluster in {directory} (missing {CLUSTER_FILE})")
    state: dict[str, Any] = json.loads(path.read_text())
    return state


def start_processes(
    directory: Path,
    members: int,
    internal_replication: bool,
    *,
    password: str = "",
    owner_pid: int = 0,
    topology: ClusterTopology = TOPOLOGY,
    tls: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """Create the cluster in ``directory`` and return once every process answers ``/ping`` (members over HTTPS with
    ``tls``: certificate and key files)."""
    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    if (directory / CLUSTER_FILE).exists() and any_alive(directory):
        raise LaunchError(f"an embedded cluster is already running in {directory}")
    store = Store(directory / "state.sqlite")
    store.initialize()
    ReplicationLog(store, directory / REPLICATION_DIR).initialize()
    specs, sockets = plan(
        directory, members, internal_replication, password=password, owner_pid=owner_pid, topology=topology, tls=tls
    )
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for spec in specs:
            spec.write()
        for spec in specs:
            http, native = sockets[spec.name]
            processes[spec.name] = spawn(spec, http, native)
        for http, native in sockets.values():
            http.close()
            native.close()
        deadline = time.monotonic() + READY_TIMEOUT
        for spec in specs:
            wait_ready(spec, processes[spec.name], deadline)
    except BaseException:
        for spec in specs:
            if spec.name in processes:
                terminate(processes[spec.name].pid, spec, hard=True)
        for http, native in sockets.values():
            http.close()
            native.close()
        raise
    with locked_state(directory) as state:
        state.clear()
        state.update(
            {
                "cluster": topology.cluster_name(internal_replication),
                "internal_replication": internal_replication,
                "members": members,
                "owner_pid": owner_pid,
                "processes": {spec.name: str(spec.spec_file) for spec in specs},
                "pids": {name: process.pid for name, process in processes.items()},
                "killed": [],
            }
        )
        return dict(state)


def specs_of(directory: Path) -> dict[str, ProcessSpec]:
    state = read_state(directory)
    return {name: ProcessSpec.read(Path(path)) for name, path in state["processes"].items()}


def any_alive(directory: Path) -> bool:
    try:
        state = read_state(directory)
        specs = specs_of(directory)
    except (FileNotFoundError, KeyError, ValueError):
        return False
    return any(alive(int(state["pids"].get(name, 0)), spec) for name, spec in specs.items())


def stopped(directory: Path) -> list[str]:
    """Names of the processes that are not running (killed, or crashed)."""
    state = read_state(directory)
    return [name for name, spec in specs_of(directory).items() if not alive(int(state["pids"].get(name, 0)), spec)]


def kill(directory: Path, name: str) -> None:
    """Crash one process (SIGKILL): no shutdown, like a host losing power."""
    specs = specs_of(directory)
    with locked_state(directory) as state:
        terminate(int(state["pids"].get(name, 0)), specs[name], hard=True)
        if name not in state["killed"]:
            state["killed"].append(name)


def restart(directory: Path, name: str) -> int:
    """Start a stopped (or running: it is killed first) process again on its ports; returns its new pid."""
    specs = specs_of(directory)
    spec = specs[name]
    with locked_state(directory) as state:
        terminate(int(state["pids"].get(name, 0)), spec, hard=True)
        http, native = _rebind(spec.http_port, listen=True), _rebind(spec.native_port, listen=False)
        try:
            process = spawn(spec, http, native)
        finally:
            http.close()
            native.close()
        wait_ready(spec, process, time.monotonic() + READY_TIMEOUT)
        state["pids"][name] = process.pid
        state["killed"] = [k for k in state["killed"] if k != name]
        return process.pid


def stop_all(directory: Path) -> list[str]:
    """Stop every process of the cluster (gracefully, then forcibly); returns the names that were running."""
    state = read_state(directory)
    specs = specs_of(directory)
    stopped = []
    for name, spec in specs.items():
        pid = int(state["pids"].get(name, 0))
        if alive(pid, spec):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            stopped.append(name)
    for name, spec in specs.items():
        terminate(int(state["pids"].get(name, 0)), spec, hard=False, timeout=10.0)
    return stopped
