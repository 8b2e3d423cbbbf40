"""The one formatter of progress facts: each fact a protocol reports becomes one task-log line.

The protocols of both routes report typed facts (:mod:`airflow_provider_dpone.cluster.values.progress`,
:mod:`airflow_provider_dpone.transfer.values.progress`) to the sink :func:`task_progress` returns; this module only
words them (``dpone <task_id>: <line>``, through :class:`~airflow_provider_dpone.operators.reporting.TaskLog`). A
load that was not answered and a candidate rebuild are warnings; everything else is information. The facts are
opaque (member labels, digests, counts, ordinals, phases), so the lines are too.
"""

from __future__ import annotations

from typing import Final

from airflow_provider_dpone.cluster.values.progress import (
    CandidateRebuilt,
    MemberLoadAnswered,
    MemberLoadStarted,
    MemberLoadUnanswered,
)
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.progress import ProgressFact, ProgressSink
from airflow_provider_dpone.operators.reporting import TaskLog
from airflow_provider_dpone.transfer.values.progress import (
    Checkpoint,
    CheckpointReached,
    ChunkLoaded,
    ChunkSealed,
    ChunkVerified,
    JournalRecorded,
)

CHECKPOINTS_LOGGED: Final[frozenset[Checkpoint]] = frozenset(
    {
        Checkpoint.ADMITTED,
        Checkpoint.EOF,
        Checkpoint.STAGE_COMPLETE,
        Checkpoint.PREPARED,
        Checkpoint.LOADED,
        Checkpoint.PUBLISH_INTENT,
        Checkpoint.SUCCEEDED,
    }
)
"""The route checkpoints worth a line (a block or a chunk is told by the chunk lines)."""

WARNING: Final = "warning"
INFO: Final = "info"


def rebuild_reason(fact: CandidateRebuilt) -> DponeError:
    """The coded reason of a rebuild: what the incomplete candidate held."""
    if fact.held_rows is None:
        held = "candidate absent"
    else:
        expected = "?" if fact.artifact_rows is None else str(fact.artifact_rows)
        held = f"candidate held {fact.held_rows} of {expected} rows"
    return DponeError("DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_REBUILT", held)


def progress_line(fact: ProgressFact) -> tuple[str, str] | None:
    """``(level, line)`` of ``fact``; ``None`` for a fact that is not worth a line (a checkpoint not logged)."""
    match fact:
        case MemberLoadStarted(member, sha256, rows, byte_size):
            return INFO, f"member {member}: loading artifact {sha256[:16]} ({rows} rows, {byte_size} bytes)"
        case MemberLoadAnswered(member, elapsed_ms):
            return INFO, f"member {member}: load answered in {elapsed_ms / 1000:.1f} s"
        case MemberLoadUnanswered(member, failure):
            return WARNING, f"member {member}: load unanswered or refused ({failure})"
        case CandidateRebuilt(member, rebuild, limit):
            reason = rebuild_reason(fact)
            return (
                WARNING,
                f"member {member}: rebuild {rebuild} of at most {limit}: {reason.headline()} [{reason.detail}]",
            )
        case CheckpointReached(point):
            return (INFO, f"route checkpoint {point}") if point in CHECKPOINTS_LOGGED else None
        case JournalRecorded(kind):
            return INFO, f"phase {kind}"
        case ChunkSealed(ordinal, rows, object_bytes):
            return INFO, f"chunk {ordinal} sealed: {rows} rows, {object_bytes} bytes"
        case ChunkLoaded(ordinal, rows):
            return INFO, f"chunk {ordinal} loaded into target staging: {rows} rows"
        case ChunkVerified(ordinal, rows):
            return INFO, f"chunk {ordinal} verified by the target: {rows} rows"
    raise TypeError(f"no line for the progress fact {type(fact).__name__}: add it to operators/progress.py")


def task_progress(log: TaskLog) -> ProgressSink:
    """The sink that writes each fact's line to the task log."""

    def write(fact: ProgressFact) -> None:
        line = progress_line(fact)
        if line is None:
            return
        level, text = line
        if level == WARNING:
            log.warning("%s", text)
        else:
            log.info("%s", text)

    return write
