"""What a publication task shows humans: XCom values and task-log lines, redacted by construction.

XCom carries identifiers and receipts only: operation id, target-key digest, phase, generation id, counts, opaque
member ids and digests. Log lines carry the same facts plus phase transitions and per-member progress (rows, bytes,
rebuilds) read from the authority record. Nothing here ever names a host, a credential, SQL, a path, a physical UUID
or a row value, and no later task trusts any of it: every task re-reads the authority.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_dpone.contracts.authority_external import ExternalAuthorityRecord
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.receipts_publication import PublicationReceipt
from airflow_provider_dpone.operators.task_outcome import Log
from airflow_provider_dpone.ports.publication import AuthorityStore
from airflow_provider_dpone.protocol.authority_io import read_current
from airflow_provider_dpone.protocol.results import FenceResult, InProgress, StageResult

XCom = dict[str, Any]


def short(digest: str | None) -> str:
    """A digest shortened for log lines (XCom keeps full values)."""
    return "-" if digest is None else digest[:16]


def observed_record(store: AuthorityStore, target_key: str) -> ExternalAuthorityRecord | None:
    """The external record for logging (read-only); ``None`` when absent, unreadable or not external."""
    try:
        current = read_current(store, target_key)
    except DponeError:
        return None
    if current is None or not isinstance(current.record, ExternalAuthorityRecord):
        return None
    return current.record


def phase_of(record: ExternalAuthorityRecord | None) -> str:
    return "absent" if record is None else record.phase.value


def log_transition(log: Log, before: str, after: str, operation_id: str) -> None:
    if before == after:
        log.info("operation %s resumed in phase %s", short(operation_id), after)
    else:
        log.info("operation %s phase %s -> %s", short(operation_id), before, after)


def log_members(log: Log, record: ExternalAuthorityRecord | None) -> None:
    """One line per member: stage, verified rows, bytes streamed from the sealed artifact, rebuilds."""
    if record is None:
        return
    artifact_bytes = record.artifact.byte_size if record.artifact is not None else 0
    for member in record.members:
        rows = "-" if member.row_count is None else str(member.row_count)
        log.info(
            "member %s: stage %s rows %s bytes %s rebuilds %d",
            member.member_id,
            member.stage.value,
            rows,
            artifact_bytes if member.row_count is not None else "-",
            member.rebuilds,
        )


def fence_xcom(result: FenceResult) -> XCom:
    return {"operation_id": result.operation_id, "target_key": result.target_key, "phase": result.phase}


def stage_xcom(result: StageResult, record: ExternalAuthorityRecord | None) -> XCom:
    value: XCom = {
        "operation_id": result.operation_id,
        "phase": result.phase,
        "generation_id": result.generation_id,
        "ready_members": result.ready_members,
    }
    if record is not None and record.artifact is not None:
        value["artifact_sha256"] = record.artifact.sha256
        value["artifact_bytes"] = record.artifact.byte_size
        value["row_count"] = record.artifact.row_count
        value["members"] = [
            {"member_id": m.member_id, "stage": m.stage.value, "row_count": m.row_count, "rebuilds": m.rebuilds}
            for m in record.members
        ]
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
        short(receipt.operation_id),
        receipt.authority_version,
    )


def in_progress_line(progress: InProgress) -> str:
    """The waiting line of an unfinished DDL (logged when it changes, and as a heartbeat)."""
    pending = ", ".join(progress.pending_members) or "none reported"
    entry = progress.entry or "not yet observed"
    return f"{progress.stage} epoch {progress.epoch} in progress (queue entry {entry}); pending members: {pending}"
