"""What every operator tells the person reading its log, and how a :class:`DponeError` becomes an Airflow outcome.

One line format for every operator (:class:`TaskLog`): ``dpone <task_id>: <message>``, facts only (opaque ids,
digests, counts, phases), never a host, a credential, SQL values or rows.

The registry decides (``ErrorCode.retryable``, printed in docs/errors.md); this module only maps that decision onto
Airflow. A retryable code raises :class:`DponeRetryableError` (an ``AirflowException``: Airflow retries while the task
has retries left, and every entry point resumes by observation). A terminal code raises :class:`DponeTerminalError`
(an ``AirflowFailException``), so Airflow does not spend retries on what only a human can fix.

The task log gets exactly one line per failure (``dpone <task_id>: CODE: cause [detail]. Next: action (retryable)``),
and the exception message is the registry's one line. Details are already sanitized (opaque ids, counts, phases, digests).
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


class TaskLog:
    """The task's logger, writing every line as ``dpone <task_id>: <message>`` (lazy %-formatting, as logging's)."""

    def __init__(self, log: Log, task_id: str) -> None:
        self._log = log
        self._prefix = f"dpone {task_id.replace('%', '%%')}: "

    def info(self, message: str, *args: Any) -> None:
        self._log.info(self._prefix + message, *args)

    def warning(self, message: str, *args: Any) -> None:
        self._log.warning(self._prefix + message, *args)

    def error(self, message: str, *args: Any) -> None:
        self._log.error(self._prefix + message, *args)


class DponeRetryableError(AirflowException):
    """A transient failure: Airflow retries the task (if it has retries left); the retry resumes by observation."""


class DponeTerminalError(AirflowFailException):
    """A failure no retry can fix: the task fails at once, whatever its retries."""


def airflow_failure(error: DponeError) -> DponeRetryableError | DponeTerminalError:
    """The Airflow exception for ``error``, as its registered code says (the one classification of every operator)."""
    line = error.render()
    return DponeRetryableError(line) if error.retryable else DponeTerminalError(line)


def raise_for(error: DponeError, log: TaskLog) -> NoReturn:
    """Log one line with the code and the outcome, and raise the matching Airflow exception (no chained traceback)."""
    failure = airflow_failure(error)
    if isinstance(failure, DponeRetryableError):
        log.warning("%s (retryable)", failure)
    else:
        log.error("%s (terminal: no retry)", failure)
    raise failure from None
