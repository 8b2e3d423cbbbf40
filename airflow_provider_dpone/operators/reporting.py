"""What the operators tell people and Airflow: the one log-line format, XCom values, progress, and outcomes.

One line format for every operator (:class:`TaskLog`): ``dpone <task_id>: <message>``. Log lines and XCom carry facts
only: operation id, target-key digest, phases before and after, generation id, counts, members and digests; never a
host, a credential, SQL, a path, a physical UUID or a row value. A line that names a member names it one way,
``member m<16 hex> (shard S, replica R)`` (:func:`~airflow_provider_dpone.cluster.values.inventory.member_label`), the position
read from the inventory the operation bound, as the Test button and the admission lines do. The facts come from what the protocol
returned (its results carry the phases and each member's progress) and from the progress facts it reports while it
works (:mod:`~airflow_provider_dpone.operators.progress` words those), so no task reads or wraps a port to report
them, and no later task trusts any of them: every task re-reads the authority.

Outcomes: the registry decides (``ErrorCode.retryable``, printed in docs/errors.md); :func:`raise_for` only maps that
decision onto Airflow. A retryable code raises :class:`DponeRetryableError` (an ``AirflowException``: Airflow retries
while the task has retries left, and every entry point resumes by observation). A terminal code raises
:class:`DponeTerminalError` (an ``AirflowFailException``), so Airflow does not spend retries on what only a human can
fix. A failure is a block of short lines, so a log view that cuts long lines hides none of it:
``dpone <task_id>: CODE: summary (retryable)``, then the detail ``  [detail]`` and the cause, indented, then
``dpone <task_id>: Next: action`` (:meth:`DponeError.lines`); the exception message is the same block, code first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowNotFoundException

from airflow_provider_dpone.core.errors import DponeError

if TYPE_CHECKING:  # the native transfer's DAG file imports this module: the publication's models load when used
    from airflow_provider_dpone.cluster.protocol.results import FenceResult, InProgress, StageResult
    from airflow_provider_dpone.cluster.values.publication_receipts import PublicationReceipt, QualityReceipt

XCom = dict[str, Any]
T = TypeVar("T")

# --- the log line and the outcome -----------------------------------------------------------------------------------


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
    """The Airflow exception for ``error``, as its registered code says (the one classification of every operator);
    its message is the error's block (:meth:`DponeError.lines`), the code first."""
    message = "\n".join(error.lines())
    return DponeRetryableError(message) if error.retryable else DponeTerminalError(message)


def raise_for(error: DponeError, log: TaskLog) -> NoReturn:
    """Log the failure's block, one log line per line (the code, the short cause and the outcome first; the detail,
    the cause and the advice below), and raise the matching Airflow exception (no chained traceback)."""
    failure = airflow_failure(error)
    first, *rest = error.lines()
    write = log.warning if isinstance(failure, DponeRetryableError) else log.error
    write("%s (%s)", first, "retryable" if error.retryable else "terminal: no retry")
    for line in rest:
        write("%s", line)
    raise failure from None


def on_coordinator(conn_id: str, task_id: str, step: Callable[[Any], T]) -> T:
    """Run ``step`` (an example DAG's demo setup) with a one-shot client of the connection's coordinator.

    Any failure is the provider's coded block, logged and raised as :func:`raise_for` does (refused credentials
    are terminal: no retry), never a driver traceback: an invalid or undefined connection, refused credentials, a
    coordinator that does not answer, or a refused statement (``DPONE_EXAMPLE_SETUP_REFUSED``).
    """
    import structlog

    from airflow_provider_dpone.cluster.clickhouse.catalog import COORDINATOR_UNREACHABLE, read_failure
    from airflow_provider_dpone.cluster.clickhouse.oneshot import classify, sanitized
    from airflow_provider_dpone.core.clickhouse.clients import Purpose, build_client, close_client
    from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

    log = TaskLog(structlog.get_logger("airflow.task"), task_id)  # the logger Airflow gives an operator
    client = None
    try:
        client = build_client(DponeClickHouseHook(conn_id).resolved(), Purpose.MUTATION)
        return step(client)
    except DponeError as error:
        raise_for(error, log)
    except AirflowNotFoundException:
        raise_for(DponeError("DPONE_CONNECTION_UNDEFINED", f"connection {conn_id}"), log)
    except Exception as error:  # noqa: BLE001 -- classified by type and server code only
        failure = read_failure(error, "demo setup statement", unanswered=COORDINATOR_UNREACHABLE)
        if isinstance(failure, DponeError):
            raise_for(failure, log)
        raise_for(DponeError("DPONE_EXAMPLE_SETUP_REFUSED", sanitized(classify(error))), log)
    finally:
        if client is not None:
            close_client(client)


# --- what a task reports ---------------------------------------------------------------------------------------------


def short(digest: str | None) -> str:
    """A digest shortened for log lines (XCom keeps full values; the operation id is logged in full by the fence and
    the receipt lines, where a user copies it for the maintenance DAGs' guard)."""
    return "-" if digest is None else digest[:16]


def log_transition(log: Log, before: str, after: str, operation_id: str) -> None:
    if before == after:
        log.info("operation %s resumed in phase %s", short(operation_id), after)
    else:
        log.info("operation %s phase %s -> %s", short(operation_id), before, after)


def log_members(log: Log, result: StageResult) -> None:
    """One line per member: stage, verified rows, bytes streamed from the sealed artifact, rebuilds; in internal
    mode also the replica the one load went through (the others received it by replication)."""
    artifact_bytes = result.artifact.byte_size if result.artifact is not None else 0
    loader = result.load_member_id
    for member in result.members:
        rows = "-" if member.row_count is None else str(member.row_count)
        if loader is not None:
            sent: object = artifact_bytes if member.member_id == loader else "0 (replicated)"
        else:
            sent = artifact_bytes if member.row_count is not None else "-"
        log.info(
            "member %s: stage %s rows %s bytes %s rebuilds %d",
            member.label,
            member.stage,
            rows,
            sent,
            member.rebuilds,
        )
    log_capsule(log, result.quality, {member.member_id: member.label for member in result.members})


def log_capsule(log: Log, quality: QualityReceipt | None, labels: Mapping[str, str]) -> None:
    """One line with the capsule's state, gates and (once observed) the target count of the one scanned replica,
    named by ``labels`` (each member's one name, from the result that carries the capsule)."""
    if quality is None:
        return
    gates = " ".join(f"{name}={'pass' if passed else 'FAIL'}" for name, passed in quality.gates)
    target = "-"
    if quality.target_row_count is not None and quality.target_member_id is not None:
        scanned = quality.target_member_id
        target = f"{quality.target_row_count} on member {labels.get(scanned, scanned)}"
    if quality.target_columns:
        target += f", null/distinct counts of {len(quality.target_columns)} columns"
    log.info(
        "quality capsule %s (%s, core %s): gates %s; target rows %s",
        quality.state,
        quality.schema_,
        short(quality.core_digest),
        gates,
        target,
    )


def fence_xcom(result: FenceResult) -> XCom:
    return {
        "operation_id": result.operation_id,
        "target_key": result.target_key,
        "phase": result.phase,
        "replication_mode": result.replication_mode,
    }


def stage_xcom(result: StageResult) -> XCom:
    value: XCom = {
        "operation_id": result.operation_id,
        "phase": result.phase,
        "replication_mode": result.replication_mode,
        "generation_id": result.generation_id,
        "ready_members": result.ready_members,
        "schema": result.schema,
    }
    if result.artifact is not None:
        value["artifact_sha256"] = result.artifact.sha256
        value["artifact_bytes"] = result.artifact.byte_size
        value["row_count"] = result.artifact.row_count
        value["members"] = [dataclasses.asdict(member) for member in result.members]
        if result.load_member_id is not None:
            value["load_member_id"] = result.load_member_id
    if result.quality is not None:
        value["quality"] = result.quality.model_dump(mode="json", by_alias=True)
    return value


def receipt_xcom(receipt: PublicationReceipt) -> XCom:
    value: XCom = receipt.model_dump(mode="json", by_alias=True)
    return value


def log_receipt(log: Log, receipt: PublicationReceipt) -> None:
    log.info(
        "%s generation %s: %d rows on %d members (operation %s, authority version %d)",
        receipt.phase,
        short(receipt.generation_id),
        receipt.row_count,
        len(receipt.members),
        receipt.operation_id,  # in full: the maintenance DAGs' guard is copied from here or the fence line
        receipt.authority_version,
    )
    labels = {member.member_id: member.label for member in receipt.members}
    for verified in receipt.members:
        log.info(
            "member %s: %s %d rows, content digest %s",
            verified.label,
            receipt.phase,
            verified.row_count,
            short(verified.content_digest),
        )
    log_capsule(log, getattr(receipt, "quality", None), labels)  # a v2 receipt's capsule
    look = receipt.after_commit
    if look is None:
        return
    if look.matched:
        log.info("looked again after COMMITTED: all %d members still hold the committed generation", len(look.members))
    for member in look.members:
        if not member.matched:
            log.warning(
                "member %s: looked again after COMMITTED: CHANGED (same table %s, same schema %s, %s rows, "
                "content digest %s)",
                labels.get(member.member_id, member.member_id),
                "yes" if member.same_table else "no",
                "yes" if member.schema_matched else "no",
                "no" if member.row_count is None else member.row_count,
                short(member.content_digest),
            )


def in_progress_line(progress: InProgress) -> str:
    """The waiting line of an unfinished DDL (logged when it changes, and as a heartbeat)."""
    pending = ", ".join(f"member {label}" for label in progress.pending_labels) or "none reported"
    entry = progress.entry or "not yet observed"
    return f"{progress.stage} epoch {progress.epoch} in progress (queue entry {entry}); pending members: {pending}"
