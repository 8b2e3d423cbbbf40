"""Authority reads and the one write helper every phase uses.

A write is one-shot (strict insert or versioned CAS) and is trusted only when it was acknowledged *and* an immediate
read-back shows exactly the written row (payload, hence the caller-specific ``write_id``) at exactly the expected
version (0 after create, previous + 1 after CAS). Anything else raises ``AUTHORITY_OUTCOME_UNKNOWN``: the caller gets
no permit and stops; the next attempt re-reads the authority and resumes from whatever was durably written.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_dpone.contracts.authority_codec import AuthorityRecord, decode, encode
from airflow_provider_dpone.contracts.authority_phases import Phase, require_transition
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.ports.publication import (
    AuthorityConflictError,
    AuthorityStore,
    OutcomeUnknownError,
    UnavailableError,
)


@dataclass(frozen=True)
class Current:
    """A decoded authority record and the KeeperMap version it was read at."""

    record: AuthorityRecord
    version: int


@dataclass(frozen=True)
class Held:
    """The operation's own record (either mode) at a known version (the only thing a phase may CAS against)."""

    record: AuthorityRecord
    version: int


def read_current(store: AuthorityStore, target_key: str) -> Current | None:
    try:
        observed = store.read(target_key)
    except UnavailableError:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_UNAVAILABLE", "read failed") from None
    if observed is None:
        return None
    if observed.row.target_key != target_key:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_RECORD_INVALID", "row under a different target key")
    return Current(decode(observed.row), observed.version)


def write_record(
    store: AuthorityStore,
    record: AuthorityRecord,
    *,
    previous_phase: Phase | None,
    previous_version: int | None,
) -> Held:
    """Create (``previous_version is None``) or CAS ``record``; return it at its proven new version."""
    require_transition(previous_phase, record.phase)
    row = encode(record)
    expected = 0 if previous_version is None else previous_version + 1
    try:
        if previous_version is None:
            store.create(row)
        else:
            store.compare_and_set(row, previous_version)
    except AuthorityConflictError:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_CONFLICT", f"{previous_phase} -> {record.phase}") from None
    except OutcomeUnknownError:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_OUTCOME_UNKNOWN",
            f"{previous_phase} -> {record.phase}: not acknowledged",
        ) from None
    try:
        observed = store.read(record.target_key)
    except UnavailableError:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_OUTCOME_UNKNOWN", "read-back failed") from None
    if observed is None or observed.row != row or observed.version != expected:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_OUTCOME_UNKNOWN", "read-back differs from the write")
    return Held(record, expected)
