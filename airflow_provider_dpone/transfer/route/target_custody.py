"""Target custody: one writer per target table across operations, and no overlap with an unresolved publication.

The operation lease (:mod:`custody`) fences the tries of ONE operation. Two different operations (two DAG runs, two
DAGs) publishing into the same table are not fenced by it, and the target port keeps no per-table lock across
invocations: their full refreshes would simply follow each other (the last one wins), and their work could
interleave. So every run also takes a lease in the target table's own journal, held by its operation id:

* a live lease of another operation is held custody: ``native_transfer.custody_held``, nothing else happens;
* an expired or released lease of another operation is taken over only when that operation has no publication whose
  outcome is unknown; a publish intent without a recorded outcome may still commit in the target, so it blocks
  overlapping work until that operation's own retry reconciles it by its receipt;
* an earlier try of the same operation is taken over: the operation lease, acquired first, proved it stopped.

Only runs that hold the lease write to the target journal, so its last lease always names the last operation that
was admitted to the table; every earlier one was checked when that one took over.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from airflow_provider_dpone.core.alerts import CUSTODY_HELD, CUSTODY_UNKNOWN, AlertSink, Fact
from airflow_provider_dpone.core.canonical import tagged_digest
from airflow_provider_dpone.core.clock import Clock
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.ports import JournalStore
from airflow_provider_dpone.transfer.route.custody import LeaseKeeper, last_lease
from airflow_provider_dpone.transfer.route.journal import RouteJournal
from airflow_provider_dpone.transfer.route.states import fold
from airflow_provider_dpone.transfer.values.utc_window import parse_utc

OperationJournal = Callable[[str], JournalStore]


def transfer_target_key(sink_type: str, connection_id: str, schema: str, table: str) -> str:
    """Opaque id of one target table (the journal path of its custody); no host or credential enters it."""
    return tagged_digest("dpone.native-target.v1", sink_type, connection_id, schema, table)[:32]


def unresolved_publication(store: JournalStore) -> bool:
    """Whether the operation journaled a publish intent whose outcome it has not recorded (read-only)."""
    views = fold(RouteJournal(store).load())
    return bool(views) and views[-1].pending_publication is not None


class TargetCustody(LeaseKeeper):
    """The lease of one target table, held by an operation id; renewed and released with the operation lease."""

    def __init__(
        self,
        store: JournalStore,
        operation_id: str,
        clock: Clock,
        duration: dt.timedelta,
        operation_journal: OperationJournal,
        *,
        alerts: AlertSink | None = None,
        target_key: str | None = None,
    ) -> None:
        facts: dict[str, Fact] = {"operation_id": operation_id}
        if target_key is not None:
            facts["target_key"] = target_key
        super().__init__(RouteJournal(store), clock, operation_id, duration, alerts=alerts, facts=facts)
        self._operation_journal = operation_journal

    def acquire(self) -> None:
        self._journal.load()
        now = self._clock.now()
        current = last_lease(self._journal.records)
        fenced: str | None = None
        if current is not None and current.action != "released":
            fenced = current.holder
        if current is not None and current.holder != self.holder:
            if current.action != "released" and now < parse_utc(current.expires_at) + self.skew:
                raise self.held(CUSTODY_HELD, "another operation holds the target table")
            if unresolved_publication(self._operation_journal(current.holder)):
                raise self.held(
                    CUSTODY_UNKNOWN, "another operation's publication into the target table has an unknown outcome"
                )
        try:
            self._write("acquired", now, fenced)
        except DponeError as exc:
            if exc.code == "native_transfer.journal_conflict":
                raise self.held(CUSTODY_HELD, "another operation took the target table") from None
            raise
        self.fenced_holder = fenced
