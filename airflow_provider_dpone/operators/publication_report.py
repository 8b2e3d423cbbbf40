"""What a publication task shows humans: XCom values and task-log lines, redacted by construction.

XCom carries identifiers and receipts only: operation id, target-key digest, phase, generation id, counts, opaque
member ids and digests. Log lines carry the same facts plus phase transitions and per-member progress (rows, bytes,
rebuilds) read from the authority record. Nothing here ever names a host, a credential, SQL, a path, a physical UUID
or a row value, and no later task trusts any of it: every task re-reads the authority.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_dpone.contracts.authority_codec import AuthorityRecord
from airflow_provider_dpone.contracts.authority_external import ExternalAuthorityRecord
from airflow_provider_dpone.contracts.authority_internal import InternalAuthorityRecordV2
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.quality_capsule import QualityBinding
from airflow_provider_dpone.contracts.receipts_publication import (
    InternalPublicationReceiptV2,
    PublicationReceipt,
    QualityReceipt,
    quality_receipt,
)
from airflow_provider_dpone.operators.task_outcome import Log
from airflow_provider_dpone.ports.publication import AuthorityStore
from airflow_provider_dpone.protocol.authority_io import read_current
from airflow_provider_dpone.protocol.results import FenceResult, InProgress, StageResult

XCom = dict[str, Any]


def short(digest: str | None) -> str:
    """A digest shortened for log lines (XCom keeps full values)."""
    return "-" if digest is None else digest[:16]


def observed_record(store: AuthorityStore, target_key: str) -> AuthorityRecord | None:
    """The target's record in either mode, for logging and XCom (read-only); ``None`` when absent or unreadable."""
    try:
        current = read_current(store, target_key)
    except DponeError:
        return None
    return None if current is None else current.record


def phase_of(record: AuthorityRecord | None) -> str:
    return "absent" if record is None else record.phase.value


def log_transition(log: Log, before: str, after: str, operation_id: str) -> None:
    if before == after:
        log.info("operation %s resumed in phase %s", short(operation_id), after)
    else:
        log.info("operation %s phase %s -> %s", short(operation_id), before, after)


def member_progress(record: AuthorityRecord) -> list[XCom]:
    """Per member: stage, verified rows and rebuilds. External members have their own candidate; internal replicas
    share one replicated candidate, so they share its stage and rebuild count."""
    if isinstance(record, ExternalAuthorityRecord):
        return [
            {"member_id": m.member_id, "stage": m.stage.value, "row_count": m.row_count, "rebuilds": m.rebuilds}
            for m in record.members
        ]
    candidate = record.candidate
    stage = "PENDING" if candidate is None else candidate.stage.value
    rebuilds = 0 if candidate is None else candidate.rebuilds
    return [
        {"member_id": m.member_id, "stage": stage, "row_count": m.row_count, "rebuilds": rebuilds}
        for m in record.members
    ]


def load_member(record: AuthorityRecord) -> str | None:
    """Internal mode: the replica the one load goes through, once bound."""
    if isinstance(record, ExternalAuthorityRecord) or record.candidate is None or record.candidate.load is None:
        return None
    return record.candidate.load.member_id


def capsule_of(record: AuthorityRecord | None) -> QualityBinding | None:
    """The durable quality-replay capsule of a v2 record, if it holds one."""
    return record.quality if isinstance(record, InternalAuthorityRecordV2) else None


def log_capsule(log: Log, quality: QualityReceipt | None) -> None:
    """One line with the capsule's state, gates and (once observed) the target count of the one scanned replica."""
    if quality is None:
        return
    gates = " ".join(f"{name}={'pass' if passed else 'FAIL'}" for name, passed in quality.gates)
    target = "-" if quality.target_row_count is None else f"{quality.target_row_count} on {quality.target_member_id}"
    log.info(
        "quality capsule %s (%s, core %s): gates %s; target rows %s",
        quality.state,
        quality.schema_,
        short(quality.core_digest),
        gates,
        target,
    )


def log_members(log: Log, record: AuthorityRecord | None) -> None:
    """One line per member: stage, verified rows, bytes streamed from the sealed artifact, rebuilds; in internal
    mode also the replica the one load went through (the others received it by replication)."""
    if record is None:
        return
    artifact_bytes = record.artifact.byte_size if record.artifact is not None else 0
    loader = load_member(record)
    for member in member_progress(record):
        rows = "-" if member["row_count"] is None else str(member["row_count"])
        if loader is not None:
            sent = artifact_bytes if member["member_id"] == loader else "0 (replicated)"
        else:
            sent = artifact_bytes if member["row_count"] is not None else "-"
        log.info(
            "member %s: stage %s rows %s bytes %s rebuilds %d",
            member["member_id"],
            member["stage"],
            rows,
            sent,
            member["rebuilds"],
        )
    quality = capsule_of(record)
    log_capsule(log, None if quality is None else quality_receipt(quality))


def fence_xcom(result: FenceResult) -> XCom:
    return {
        "operation_id": result.operation_id,
        "target_key": result.target_key,
        "phase": result.phase,
        "replication_mode": result.replication_mode,
    }


def stage_xcom(result: StageResult, record: AuthorityRecord | None) -> XCom:
    value: XCom = {
        "operation_id": result.operation_id,
        "phase": result.phase,
        "replication_mode": result.replication_mode,
        "generation_id": result.generation_id,
        "ready_members": result.ready_members,
    }
    if record is not None:
        value["schema"] = record.schema_
    if record is not None and record.artifact is not None:
        value["artifact_sha256"] = record.artifact.sha256
        value["artifact_bytes"] = record.artifact.byte_size
        value["row_count"] = record.artifact.row_count
        value["members"] = member_progress(record)
        loader = load_member(record)
        if loader is not None:
            value["load_member_id"] = loader
    quality = capsule_of(record)
    if quality is not None:
        value["quality"] = quality_receipt(quality).model_dump(mode="json", by_alias=True)
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
    if isinstance(receipt, InternalPublicationReceiptV2):
        log_capsule(log, receipt.quality)


def in_progress_line(progress: InProgress) -> str:
    """The waiting line of an unfinished DDL (logged when it changes, and as a heartbeat)."""
    pending = ", ".join(progress.pending_members) or "none reported"
    entry = progress.entry or "not yet observed"
    return f"{progress.stage} epoch {progress.epoch} in progress (queue entry {entry}); pending members: {pending}"
