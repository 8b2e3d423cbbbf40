"""Entry point of one cluster process: ``python -m dpone_embedded.server SPEC --http-fd N ...``.

The launcher binds the process's listening HTTP socket and its reserved native port and hands both over as
inherited file descriptors, so ports are chosen without races and a restart reuses them. The process starts its
engine first and serves HTTP only afterwards: a successful ``/ping`` means the engine is ready. A member also runs
its DDL worker; every process runs a replication worker for the replicas it holds. With an owner pid, the process exits when its owner is gone, so a crashed test run leaves nothing
behind.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import os
import select
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from dpone_embedded.ddl import DdlWorker
from dpone_embedded.engine import Engine
from dpone_embedded.handler import EndpointContext, EndpointServer
from dpone_embedded.layout import ProcessSpec
from dpone_embedded.replica_worker import ReplicationWorker
from dpone_embedded.replicas import Replication
from dpone_embedded.store import Store


def _watch_owner(owner_pid: int) -> None:
    """Exit once the owner has ended: a pidfd turns readable then (Linux 5.3+); elsewhere the owner is polled."""
    try:
        descriptor = os.pidfd_open(owner_pid)
    except ProcessLookupError:
        os._exit(0)
    except (AttributeError, OSError):
        descriptor = -1
    if descriptor >= 0:
        select.select([descriptor], [], [])
        os._exit(0)
    while True:
        time.sleep(0.5)
        try:
            os.kill(owner_pid, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            continue


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dpone_embedded.server")
    parser.add_argument("spec", type=Path)
    parser.add_argument("--http-fd", type=int, required=True)
    parser.add_argument("--native-fd", type=int, required=True)
    args = parser.parse_args(argv)
    spec = ProcessSpec.read(args.spec)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # stacks into the process log, for diagnosis
    native = socket.socket(fileno=args.native_fd)  # held, never listened on: reserves the port system.clusters names
    http = socket.socket(fileno=args.http_fd)
    if spec.owner_pid:
        threading.Thread(target=_watch_owner, args=(spec.owner_pid,), daemon=True, name="owner-watch").start()
    engine = Engine(spec.data_dir, spec.config_file, spec.spool_dir)
    store = Store(spec.state_db, reuse_connections=True)
    replication = Replication(spec, engine, store)
    context = EndpointContext(spec, engine, store, replication)
    worker = DdlWorker(spec, engine, store, replication) if spec.role == "member" else None
    if worker is not None:
        worker.start()
    replicator = ReplicationWorker(replication)
    replicator.start()
    tls = (spec.tls_cert_file, spec.tls_key_file) if spec.tls and spec.role == "member" else None
    server = EndpointServer(http, context, tls)

    def stop(signum: int, frame: object) -> None:
        replicator.stop()
        if worker is not None:
            worker.stop()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"{spec.name} serving {'HTTPS' if tls else 'HTTP'} on {spec.host}:{spec.http_port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        native.close()
        replicator.join(timeout=5)
        if worker is not None:
            worker.join(timeout=5)
        with contextlib.suppress(Exception):
            engine.close()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
