"""Authority reads and the one write helper every phase uses.

A write is one-shot (strict insert or versioned CAS) and is trusted only when the port acknowledged it. The port's
contract is what makes an acknowledgement a proof: a strict insert that returns created the key at version 0, and a
compare-and-set returns only after its own read-back showed exactly the written row (payload, hence the
caller-specific ``write_id``) at exactly the previous version + 1 (see
``cluster/clickhouse/authority_store.py``). A second read here would repeat that proof, one Keeper round trip per
write. Anything else raises ``AUTHORITY_OUTCOME_UNKNOWN``: the caller gets no permit and stops; the next attempt
re-reads the authority and resumes from whatever was durably written.

Keeper reads are not linearizable across servers: the read-back of a CAS can be answered by a Keeper server that has
not applied the write yet, and show an older version (``ReadBackOlderError``). That is not a conflict: the write is
*not yet known*. :func:`write_record` reads again, at most :attr:`ReadBackBound.rereads` times with growing pauses and
within :attr:`ReadBackBound.budget_ms`, judging each read by the port's own rule (``judge_read_back``): exactly our row
at the next version is the acknowledgement, another row there a conflict, and a version beyond it unknown. A read
that is still older when the bound is spent is ``AUTHORITY_OUTCOME_UNKNOWN``, resolved as every unknown outcome is:
the next attempt observes, and the write is never repeated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from airflow_provider_dpone.cluster.ports import AuthorityStore
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord, decode, encode
from airflow_provider_dpone.cluster.values.authority.phases import Phase, require_transition
from airflow_provider_dpone.cluster.values.authority.row import AuthorityRow, ReadBack, judge_read_back
from airflow_provider_dpone.core.errors import (
    AuthorityConflictError,
    DponeError,
    MutationRejectedError,
    OutcomeUnknownError,
    ReadBackOlderError,
    UnavailableError,
)

CONFLICT = "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_CONFLICT"
OUTCOME_UNKNOWN = "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_OUTCOME_UNKNOWN"


def _no_sleep(ms: int) -> None:
    return None


def _no_clock() -> int:
    return 0


@dataclass(frozen=True)
class ReadBackBound:
    """How long a CAS whose read-back was older than the write stays "not yet known" (reads only, never a write)."""

    rereads: int = 0
    """Further reads after the port's own read-back; 0 turns an older read-back into an unknown outcome at once."""
    first_pause_ms: int = 50
    """The pause before the first further read; each later pause doubles, up to :attr:`max_pause_ms`."""
    max_pause_ms: int = 1_000
    budget_ms: int = 5_000
    """No further read starts once this much (monotonic) time has passed since the first pause."""
    sleep: Callable[[int], None] = field(default=_no_sleep, compare=False)
    monotonic_ms: Callable[[], int] = field(default=_no_clock, compare=False)


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
    read_back: ReadBackBound | None = None,
) -> Held:
    """Create (``previous_version is None``) or CAS ``record``; return it at its new version, proven by the port (or,
    after a read-back older than the write, by a later read within ``read_back``)."""
    require_transition(previous_phase, record.phase)
    row = encode(record)
    expected = 0 if previous_version is None else previous_version + 1
    transition = f"{previous_phase} -> {record.phase}"
    try:
        if previous_version is None:
            store.create(row)
        else:
            try:
                store.compare_and_set(row, previous_version)
            except ReadBackOlderError:
                _await_read_back(store, row, previous_version, read_back or ReadBackBound(), transition)
    except AuthorityConflictError:
        raise DponeError(CONFLICT, transition) from None
    except OutcomeUnknownError:
        raise DponeError(OUTCOME_UNKNOWN, f"{transition}: not acknowledged") from None
    except MutationRejectedError as refusal:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_WRITE_REFUSED", f"{transition}: {refusal}") from None
    return Held(record, expected)


def _await_read_back(
    store: AuthorityStore, row: AuthorityRow, previous_version: int, bound: ReadBackBound, transition: str
) -> None:
    """Read the key again until a read proves the CAS (returns), a conflict (raises ``AUTHORITY_CONFLICT``) or an
    unknown outcome, or the bound is spent while every read stays older (``AUTHORITY_OUTCOME_UNKNOWN``)."""
    started = bound.monotonic_ms()
    pause = bound.first_pause_ms
    reads = 0
    while reads < bound.rereads and bound.monotonic_ms() - started <= bound.budget_ms:
        bound.sleep(pause)
        pause = min(pause * 2, bound.max_pause_ms)
        reads += 1
        try:
            after = store.read(row.target_key)
        except UnavailableError:
            raise DponeError(OUTCOME_UNKNOWN, f"{transition}: the read after the write failed") from None
        verdict = judge_read_back(after, row, previous_version)
        if verdict is ReadBack.APPLIED:
            return
        if verdict is ReadBack.CONFLICT:
            raise DponeError(CONFLICT, f"{transition}: another write holds the next version") from None
        if verdict is ReadBack.UNKNOWN:
            raise DponeError(OUTCOME_UNKNOWN, f"{transition}: the version moved past the write") from None
    raise DponeError(
        OUTCOME_UNKNOWN,
        f"{transition}: {reads + 1} reads after the write still showed a version older than {previous_version + 1} "
        "(a Keeper server behind the write answered them)",
    )
