"""How a :class:`DponeError` becomes an Airflow task outcome, for every operator: retry, or fail without retry.

The registry decides (``ErrorCode.retryable``, printed in docs/errors.md); this module only maps that decision onto
Airflow. A retryable code raises :class:`DponeRetryableError` (an ``AirflowException``: Airflow retries while the task
has retries left, and every entry point resumes by observation). A terminal code raises :class:`DponeTerminalError`
(an ``AirflowFailException``), so Airflow does not spend retries on what only a human can fix.

The task log gets exactly one line per failure, and the exception message is the registry's one line
(``CODE: cause [detail]. Next: action``). Details are already sanitized (opaque ids, counts, phases, digests).
"""

from __future__ import annotations

from typing import Any, NoReturn, Protocol

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_dpone.contracts.errors import DponeError


class Log(Protocol):
    """The part of a task logger (stdlib or structlog) the operators use."""

    def info(self, event: Any, *args: Any, **kw: Any) -> Any: ...

    def warning(self, event: Any, *args: Any, **kw: Any) -> Any: ...

    def error(self, event: Any, *args: Any, **kw: Any) -> Any: ...


class DponeRetryableError(AirflowException):
    """A transient failure: Airflow retries the task (if it has retries left); the retry resumes by observation."""


class DponeTerminalError(AirflowFailException):
    """A failure no retry can fix: the task fails at once, whatever its retries."""


def airflow_failure(error: DponeError) -> DponeRetryableError | DponeTerminalError:
    """The Airflow exception for ``error``, as its registered code says (the one classification of every operator)."""
    line = error.render()
    return DponeRetryableError(line) if error.retryable else DponeTerminalError(line)


def raise_for(error: DponeError, log: Log) -> NoReturn:
    """Log one line with the code and the outcome, and raise the matching Airflow exception (no chained traceback)."""
    failure = airflow_failure(error)
    if isinstance(failure, DponeRetryableError):
        log.warning("%s (retryable)", failure)
    else:
        log.error("%s (terminal: no retry)", failure)
    raise failure from None
