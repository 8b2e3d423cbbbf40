"""Task tries of an example manifest (either route) in a worker process of its own, as a Celery worker runs them.

``python -m tests.support.airflow.worker_try STEP...`` with the manifest (JSON) in ``DPONE_WORKER_MANIFEST`` and the
worker's own ``AIRFLOW_HOME`` and ``[dpone]`` settings in its environment. Each step (``fence``, ``stage``,
``stage-then-die``, ``publish``) is one task try over the hook's real adapters, built the way the operators build
them; ``stage-then-die`` ends the process (``os._exit``) when the first member load is about to be sent: the worker
died after the seal. Prints one JSON line per step: the phase reached, or the stable code it failed with, and the
host name Airflow reports for the try. A worker is another machine: with ``DPONE_WORKER_HOSTNAME`` set, the socket
layer and Airflow's ``[core] hostname_callable`` (pointed at :func:`hostname`) both answer that name.
"""

from __future__ import annotations

import json
import os
import socket
import sys


def hostname() -> str:
    """This worker machine's name (``[core] hostname_callable``)."""
    return os.environ["DPONE_WORKER_HOSTNAME"]


def run(step: str) -> str:
    from airflow_provider_dpone.cluster.protocol.results import InProgress
    from airflow_provider_dpone.cluster.protocol.service import publication_service
    from airflow_provider_dpone.hooks.clickhouse import hook_environment
    from airflow_provider_dpone.operators.full_refresh import build_request, read_manifest, resolve_columns

    if step == "stage-then-die":
        from airflow_provider_dpone.cluster.clickhouse.member_session import ClickHouseMemberSession

        ClickHouseMemberSession.load = lambda *args, **kwargs: os._exit(3)  # type: ignore[method-assign]
    manifest = read_manifest(json.loads(os.environ["DPONE_WORKER_MANIFEST"]))
    environment = hook_environment(manifest, manifest.sink.connection_id, ddl_task_timeout_seconds=10)
    try:
        ids = {"dag_id": "multi_worker", "run_id": "manual__1"}
        request = build_request(manifest, **ids)
        columns, begun = resolve_columns(environment, request, stages=step.startswith("stage"))
        service = publication_service(environment.ports, request, environment.settings, begun=begun)
        if step == "fence":
            return service.fence(columns).phase
        if step.startswith("stage"):
            assert columns is not None
            return service.stage(environment.source(request, columns)).phase
        result = service.publish()
        while isinstance(result, InProgress):
            result = service.reconcile_publication()
        return "COMMITTED"
    finally:
        environment.close()


def main(steps: list[str]) -> None:
    if "DPONE_WORKER_HOSTNAME" in os.environ:
        socket.gethostname = hostname
        socket.getfqdn = lambda name="": hostname()
    from airflow.sdk.api.client import get_hostname

    from airflow_provider_dpone.core.errors import DponeError

    for step in steps:
        try:
            outcome = run(step)
        except DponeError as error:
            outcome = error.code
        print(json.dumps({"step": step, "outcome": outcome, "host": get_hostname()}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
