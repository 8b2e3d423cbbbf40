"""The bounded acceptance reader: each observation runs in a worker process killed when its budget ends.

:class:`SubprocessAcceptanceReader` implements :class:`~airflow_provider_dpone.cluster.ports.AcceptanceReader`. Per
read it starts ``python -m airflow_provider_dpone.cluster.clickhouse.acceptance_worker`` with:

* an environment reduced to :data:`WORKER_ENVIRONMENT` (no ``AIRFLOW_CONN_*``, no ``AIRFLOW__*``, nothing that could
  carry a secret), no argument but the module, a new session (so the kill reaches it alone), stderr discarded;
* one request frame on its stdin, a pipe only this process holds: each read member's connection with its credentials,
  the typed plan, the remaining budget and a fresh nonce.

It waits for the one answer frame until the budget's monotonic deadline, then kills the worker: whatever read is in
flight -- a guard's metadata read or the aggregate read -- is interrupted (the server's ``max_execution_time`` bounds
the aggregate read too). A killed worker, a cancellation of the task
(any exception while waiting kills the worker before it propagates), an answer after the deadline, a frame that is
not exactly one well-formed answer for this nonce, or counts that are not strict non-negative integers are
:class:`ReadIncompleteError`; a worker that could not ask the member is :class:`UnavailableError`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, Final

from pydantic import ValidationError

from airflow_provider_dpone.cluster.ports import ReadIncompleteError
from airflow_provider_dpone.cluster.values.inventory import AdmittedMember
from airflow_provider_dpone.cluster.values.quality_read import Observation, TargetReadPlan
from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection
from airflow_provider_dpone.core.errors import UnavailableError

WORKER_MODULE: Final[str] = "airflow_provider_dpone.cluster.clickhouse.acceptance_worker"
WORKER_ENVIRONMENT: Final[tuple[str, ...]] = (
    "PATH",
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "SYSTEMROOT",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)
"""The only variables a worker inherits: how to start Python and verify TLS, nothing else."""
MAX_ANSWER_BYTES: Final[int] = 1 << 20


def worker_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    source = os.environ if environ is None else environ
    return {name: source[name] for name in WORKER_ENVIRONMENT if name in source}


def request_frame(
    connections: dict[str, ResolvedConnection], plan: TargetReadPlan, budget_ms: int, nonce: str
) -> bytes:
    """The one request a worker receives on its stdin (the only place the credentials travel)."""
    members = {
        member_id: {
            "host": connection.host,
            "port": connection.port,
            "username": connection.username,
            "password": connection.password,
            "options": connection.options.model_dump(mode="json"),
            "unverified_tls_allowed": connection.unverified_tls_allowed,
        }
        for member_id, connection in connections.items()
    }
    frame = {"nonce": nonce, "budget_ms": budget_ms, "plan": plan.model_dump(mode="json"), "members": members}
    return json.dumps(frame, separators=(",", ":")).encode("utf-8")


def parse_answer(raw: bytes, nonce: str, plan: TargetReadPlan) -> Observation:
    """The observation of exactly one answer frame for ``nonce`` that answers ``plan``; anything else is not
    success."""
    try:
        frame: Any = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ReadIncompleteError("no well-formed answer frame") from None
    if not isinstance(frame, dict) or frame.get("nonce") != nonce:
        raise ReadIncompleteError("the answer frame belongs to another request")
    if set(frame) == {"nonce", "failure", "detail"}:
        detail = str(frame["detail"])[:80]
        if frame["failure"] == "unavailable":
            raise UnavailableError(f"the worker could not ask the member ({detail})")
        raise ReadIncompleteError(f"the read did not complete ({detail})")
    if set(frame) != {"nonce", "observation"}:
        raise ReadIncompleteError("the answer frame has unexpected fields")
    try:
        observation = Observation.model_validate(frame["observation"])
    except ValidationError:
        raise ReadIncompleteError("the facts or counts are malformed (counts: strict non-negative integers)") from None
    if not observation.answers(plan):
        raise ReadIncompleteError("the answer misses replicas, columns or metrics of the plan")
    return observation


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()


class SubprocessAcceptanceReader:
    """Bounded reads in worker processes, over each member's direct connection (``connections``)."""

    def __init__(
        self, connections: Callable[[AdmittedMember], ResolvedConnection], *, python: str = sys.executable
    ) -> None:
        self._connections = connections
        self._python = python

    def observe(self, members: tuple[AdmittedMember, ...], plan: TargetReadPlan, *, budget_ms: int) -> Observation:
        if budget_ms <= 0:
            raise ReadIncompleteError("no budget left")
        deadline = time.monotonic() + budget_ms / 1000
        nonce = secrets.token_hex(16)
        connections = {member.member_id: self._connections(member) for member in members}
        frame = request_frame(connections, plan, budget_ms, nonce)
        process = subprocess.Popen(
            [self._python, "-m", WORKER_MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=worker_environment(),
            close_fds=True,
            start_new_session=True,
        )
        try:
            answer, _ = process.communicate(frame, timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _kill(process)
            raise ReadIncompleteError(f"no answer within {budget_ms} ms: the worker was killed") from None
        except BaseException:
            _kill(process)  # cancellation: the read in flight ends with the task
            raise
        if time.monotonic() > deadline:
            raise ReadIncompleteError("the answer came after the deadline")
        if process.returncode != 0 or len(answer) > MAX_ANSWER_BYTES:
            raise ReadIncompleteError(f"the worker ended without one answer (exit {process.returncode})")
        return parse_answer(answer, nonce, plan)
