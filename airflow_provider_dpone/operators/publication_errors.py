"""How a protocol failure becomes an Airflow task outcome: retry, or fail without retry.

Every entry point of the service is a same-operation retry by construction (it re-reads the authority and resumes),
so a *transient* failure is left to Airflow's retries: an unanswered read, an unacknowledged write whose outcome a
retry resolves by observation, a lost race for the authority row, a phase the upstream task has not reached yet.
A *terminal* failure is one no retry can fix without a human: another operation holds the target, the inventory
drifted, the authority or a physical object is not what the operation bound, the artifact is unusable, the manifest
is inadmissible. Those fail with :class:`AirflowFailException`, so Airflow does not spend retries on them.

The task log gets exactly one line per failure, starting with the stable code; the exception message is the same
line. Details are already sanitized by the protocol (opaque ids, counts, phases, digests).
"""

from __future__ import annotations

from typing import Final, NoReturn

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.operators.publication_report import Log

RETRYABLE_CODES: Final[frozenset[str]] = frozenset(
    {
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_CONFLICT",
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_OUTCOME_UNKNOWN",
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_UNAVAILABLE",
        "DPONE_CLICKHOUSE_CLUSTER_MEMBER_OUTCOME_UNKNOWN",
        "DPONE_CLICKHOUSE_CLUSTER_MEMBER_MUTATION_REJECTED",
        "DPONE_CLICKHOUSE_CLUSTER_DDL_QUEUE_UNAVAILABLE",
        "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE",
        "DPONE_CLICKHOUSE_CLUSTER_PHASE_NOT_READY",
        "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING",
        "DPONE_CLICKHOUSE_CLUSTER_REPLICA_NOT_CONVERGED",
        "DPONE_ARTIFACT_EXTRACTION_FAILED",
        "DPONE_ARTIFACT_STORE_FAILED",
        "DPONE_ARTIFACT_DIGEST_FAILED",
        "DPONE_CLICKHOUSE_MUTATION_REPLAY_REFUSED",
    }
)
"""Codes a retry of the same task can resolve; every other code is terminal for the task."""


class DponeRetryableError(AirflowException):
    """A transient failure: Airflow retries the task (if it has retries left); the retry resumes by observation."""


class DponeTerminalError(AirflowFailException):
    """A failure no retry can fix: the task fails at once, whatever its retries."""


def is_retryable(error: DponeError) -> bool:
    return error.code in RETRYABLE_CODES


def raise_for(error: DponeError, log: Log) -> NoReturn:
    """Log one line with the code and raise the matching Airflow exception (without the chained traceback)."""
    detail = f" [{error.detail}]" if error.detail else ""
    line = f"{error.code}{detail}: {error.error.cause}. Next: {error.error.action}"
    if is_retryable(error):
        log.warning("%s (retryable)", line)
        raise DponeRetryableError(line) from None
    log.error("%s (terminal: no retry)", line)
    raise DponeTerminalError(line) from None
