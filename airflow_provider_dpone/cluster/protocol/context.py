"""The per-invocation context of one entry point: ports, request, admitted inventory and the write helper."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from airflow_provider_dpone.cluster.ports import (
    AcceptanceReader,
    ArtifactStore,
    AuthorityStore,
    ClusterCatalog,
    ClusterDDL,
    Entropy,
    MemberSession,
    MemberSessions,
)
from airflow_provider_dpone.cluster.protocol.authority_io import Held, ReadBackBound, write_record
from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.generation import DdlBinding, ErrorClassification
from airflow_provider_dpone.cluster.values.authority.phases import Phase, is_allowed, require_write
from airflow_provider_dpone.cluster.values.inventory import AdmittedInventory, member_label
from airflow_provider_dpone.core.alerts import Alert, AlertSink, Fact, emit
from airflow_provider_dpone.core.clock import Clock
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.progress import ProgressFact, ProgressSink, report

T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True)
class PublicationPorts:
    authority: AuthorityStore
    catalog: ClusterCatalog
    sessions: MemberSessions
    ddl: ClusterDDL
    artifacts: ArtifactStore
    clock: Clock
    entropy: Entropy
    acceptance: AcceptanceReader | None = None
    """The bounded target-acceptance reader (durable quality replay with target metrics only; ``None``: the
    capability is not offered, and such a request is ``..._UNSUPPORTED``)."""
    alerts: AlertSink | None = None
    """Where the protocol's alerts go after their log record (:mod:`airflow_provider_dpone.core.alerts`; the hook
    counts them with Airflow's ``Stats``); ``None``: the log record only."""
    progress: ProgressSink | None = None
    """Where the protocol's progress facts go (:mod:`airflow_provider_dpone.cluster.values.progress`; the operators
    log them); ``None``: nowhere."""


@dataclass(frozen=True)
class ProtocolSettings:
    dispatch_quiet_ms: int = 120_000
    """How long a dispatch permit whose token is not in the DDL queue (and with no member effect) counts as in
    progress; afterwards the step fails closed with ``DISPATCH_UNPROVEN`` (it is never re-dispatched). It must
    exceed the dispatch request's send timeout."""

    dispatch_deadline_ms: int = 10_000
    """How old a permit may be when its one dispatch is sent: an older one is never sent (the step then fails closed
    as unproven). It bounds how late a permit's request can reach the coordinator, which the void proof relies on."""

    send_timeout_ms: int = 310_000
    """The dispatching client's connect plus send timeout (the hook sets it from the connection): how long after it
    is sent a request can still be arriving at the coordinator. Enters the void proof."""

    void_skew_margin_ms: int = 60_000
    """Allowed clock skew between the workers and the coordinator (``[dpone] void_skew_margin_seconds``). The void
    proof requires the coordinator's start time to exceed the permit time by every margin, this one included."""

    replica_sync_timeout_seconds: float = 30.0
    """Bound of one replica's ``SYSTEM SYNC REPLICA`` wait (internal mode); past it the stage attempt stops with the
    retryable ``REPLICA_NOT_CONVERGED`` and a retry waits again."""

    max_member_steps: int = 10
    """Observe/act steps per member per attempt before the attempt stops and leaves the rest to a retry."""

    authority_rereads: int = 6
    """After a compare-and-set whose read-back showed an older version than the write (a Keeper server behind the
    write answered the read; Keeper reads are not linearizable across servers), how many more reads may prove it
    (pauses of 50 ms doubling up to 1 s between them); still older after that is ``AUTHORITY_OUTCOME_UNKNOWN``."""

    authority_reread_budget_ms: int = 5_000
    """No further read of :attr:`authority_rereads` starts once this much time has passed since the first pause."""

    external_admission: bool = True
    """Whether a new external-mode operation may be fenced (``[dpone] external_replication_admission``, the rollback
    switch). False refuses only new ones: a fenced operation resumes, aborts and cleans up as before."""

    member_parallelism: int = 4
    """How many members' independent work (loads, content digests, observations, admission's catalog reads) runs at
    once; above 1, an entry point's admission also runs alongside its authority read. Only reads and member work run
    concurrently; every authority write stays in the calling thread, in member order. 1 runs all of it in order."""


K = TypeVar("K")


def concurrently(work: Callable[[K], T], keys: Iterable[K], parallelism: int) -> dict[K, T]:
    """``work(key)`` for every key, at most ``parallelism`` at once, results in key order.

    Every call finishes before this returns; when some raised, the first failure in key order is re-raised (so the
    outcome does not depend on thread timing). ``work`` must not write the authority.
    """
    ordered = list(keys)
    bound = max(1, min(parallelism, len(ordered)))
    if bound == 1:
        return {key: work(key) for key in ordered}
    with ThreadPoolExecutor(max_workers=bound, thread_name_prefix="dpone-member") as pool:
        futures = {key: pool.submit(work, key) for key in ordered}
    return {key: future.result() for key, future in futures.items()}


def alongside(first: Callable[[], T], second: Callable[[], U], parallelism: int) -> tuple[T, U]:
    """Two independent reads, at once when ``parallelism`` > 1. Both finish before this returns; a failure of
    ``first`` is raised before one of ``second`` (as in order). Neither may write the authority."""
    if parallelism <= 1:
        return first(), second()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dpone-alongside") as pool:
        later = pool.submit(second)
        result = first()
    return result, later.result()


class Context:
    """Everything one entry-point invocation needs; sessions are opened lazily, once per member."""

    def __init__(
        self,
        ports: PublicationPorts,
        request: PublicationRequest,
        inventory: AdmittedInventory,
        settings: ProtocolSettings,
        *,
        bound_digest: str | None = None,
    ) -> None:
        self.ports = ports
        self.request = request
        self.inventory = inventory
        self.settings = settings
        self.bound_digest = inventory.digest if bound_digest is None else bound_digest
        """The digest of the inventory the operation bound (its record's; a new operation binds the live one)."""
        self._sessions: dict[str, MemberSession] = {}
        self._permits: set[str] = set()

    def label(self, member_id: str) -> str:
        """The member's one name, ``m<16 hex> (shard S, replica R)``, with its position in the inventory the operation
        bound (:meth:`AdmittedInventory.positions`): when the live inventory is not that one, no position is proven
        and the name says so (:func:`~airflow_provider_dpone.cluster.values.inventory.member_label`)."""
        return member_label(member_id, *self.inventory.positions(self.bound_digest).get(member_id, (None, None)))

    def labels(self, member_ids: Iterable[str]) -> str:
        """Several members' names (:meth:`label`), in the order given, comma-separated."""
        return ", ".join(self.label(member_id) for member_id in member_ids)

    def session(self, member_id: str) -> MemberSession:
        if member_id not in self._sessions:
            self._sessions[member_id] = self.ports.sessions.session(self.inventory.member(member_id))
        return self._sessions[member_id]

    def each_member(self, work: Callable[[str], T], member_ids: Iterable[str]) -> dict[str, T]:
        """``work(member_id)`` for every member, at most ``member_parallelism`` at once, results in member order.

        Every call finishes before this returns; when some raised, the first failure in member order is re-raised
        (so the outcome does not depend on thread timing). ``work`` must not write the authority.
        """
        ids = self.open_sessions(member_ids)
        return concurrently(work, ids, self.settings.member_parallelism)

    def open_sessions(self, member_ids: Iterable[str]) -> list[str]:
        """Open the members' sessions in the calling thread (never concurrently inside workers); the ids, listed."""
        ids = list(member_ids)
        for member_id in ids:
            self.session(member_id)
        return ids

    def grant(self, binding: DdlBinding) -> None:
        """Hold the in-memory permit of ``binding``: its acknowledged, read-back-proven CAS was written by this
        invocation (:mod:`ddl_step`), so this invocation, and only it, may send its one dispatch."""
        assert binding.correlation_token is not None
        self._permits.add(binding.correlation_token)

    def holds(self, binding: DdlBinding) -> bool:
        """Whether this invocation holds the in-memory permit of ``binding`` (not yet redeemed)."""
        return binding.correlation_token is not None and binding.correlation_token in self._permits

    def redeem(self, binding: DdlBinding) -> bool:
        """True exactly once for a permit this invocation holds (its one dispatch); False for any other binding: a
        permit read from the authority was written by an earlier attempt, whose dispatch is never repeated."""
        token = binding.correlation_token
        if token is None or token not in self._permits:
            return False
        self._permits.remove(token)
        return True

    def now(self) -> int:
        return self.ports.clock.now_ms()

    def alert(self, alert: Alert, **facts: Fact) -> None:
        """Emit ``alert`` for this operation (its id and target key added), where the protocol decides it."""
        emit(
            self.ports.alerts,
            alert,
            operation_id=self.request.operation_id,
            target_key=self.request.target_key,
            **facts,
        )

    def report(self, fact: ProgressFact) -> None:
        """Hand a progress fact to the progress sink (it only observes)."""
        report(self.ports.progress, fact)

    def commit(self, held: Held, **changes: Any) -> Held:
        """CAS the held record to a validated copy with ``changes``, a fresh write identity and timestamp; what a
        write may change besides its phase is the phase table's rule (``authority/phases.py: require_write``)."""
        previous = held.record
        voided = changes.get("voided", previous.voided)
        require_write(
            previous.phase,
            changes.get("phase", previous.phase),
            frozenset(changes) - {"phase"},
            len(voided) - len(previous.voided),
        )
        record = previous.evolve(write_id=self.ports.entropy.token(), updated_at_ms=self.now(), **changes)
        return write_record(
            self.ports.authority,
            record,
            previous_phase=held.record.phase,
            previous_version=held.version,
            read_back=self.read_back(),
        )

    def read_back(self) -> ReadBackBound:
        """The bound within which a CAS whose read-back was older than the write is read again."""
        return ReadBackBound(
            rereads=self.settings.authority_rereads,
            budget_ms=self.settings.authority_reread_budget_ms,
            sleep=self.ports.clock.sleep_ms,
            monotonic_ms=self.ports.clock.monotonic_ms,
        )

    def create(self, record: AuthorityRecord, *, previous: tuple[Phase, int] | None) -> Held:
        """Strict-insert ``record`` (no previous row) or CAS it over a terminal record of another operation."""
        if previous is None:
            return write_record(self.ports.authority, record, previous_phase=None, previous_version=None)
        return write_record(
            self.ports.authority,
            record,
            previous_phase=previous[0],
            previous_version=previous[1],
            read_back=self.read_back(),
        )

    def fail_closed(self, held: Held, code: str, detail: str) -> DponeError:
        """Record the redacted classification (best effort, only where the phase may loop) and return the error."""
        phase = held.record.phase
        if is_allowed(phase, phase):
            classification = ErrorClassification(code=code, phase=phase, at_ms=self.now())
            with contextlib.suppress(DponeError):
                self.commit(held, last_error=classification)
        return DponeError(code, detail)
