"""Authority reads and the one write helper every phase uses.

A write is one-shot (strict insert or versioned CAS) and is trusted only when the port acknowledged it. The port's
contract is what makes an acknowledgement a proof: a strict insert that returns created the key at version 0, and a
compare-and-set returns only after its own read-back showed exactly the written row (payload, hence the
caller-specific ``write_id``) at exactly the previous version + 1 (see
``cluster/clickhouse/authority_store.py``). A second read here would repeat that proof, one Keeper round trip per
write. Anything else raises ``AUTHORITY_OUTCOME_UNKNOWN``: the caller gets no permit and stops; the next attempt
re-reads the authority and resumes from whatever was durably written.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_dpone.cluster.ports import AuthorityStore
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord, decode, encode
from airflow_provider_dpone.cluster.values.authority.phases import Phase, require_transition
from airflow_provider_dpone.core.errors import (
    AuthorityConflictError,
    DponeError,
    MutationRejectedError,
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
    """Create (``previous_version is None``) or CAS ``record``; return it at its new version, proven by the port."""
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
    except MutationRejectedError as refusal:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_WRITE_REFUSED", f"{previous_phase} -> {record.phase}: {refusal}"
        ) from None
    return Held(record, expected)
