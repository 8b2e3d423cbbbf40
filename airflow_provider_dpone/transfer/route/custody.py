"""Writer custody: a lease in the journal that fences overlapping runs and proves a crashed writer has stopped.

A runner acquires the lease by appending a ``lease`` record. A lease that is neither released nor expired is held
custody: another run is blocked with ``native_transfer.custody_held`` (it may still be writing). A writer checks its own
lease before every durable write and stops once less than the skew margin remains, renewing at half-time; a recoverer
only fences a lease after its expiry plus the same margin. So when a fence succeeds, the old writer has provably
stopped writing, and its unpublished stage may be retired.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from airflow_provider_dpone.core.alerts import CUSTODY_HELD, Alert, AlertSink, Fact, emit
from airflow_provider_dpone.core.clock import Clock
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.route.journal import RouteJournal
from airflow_provider_dpone.transfer.values.journal_records import JournalRecord, LeaseRecord
from airflow_provider_dpone.transfer.values.utc_window import format_utc, parse_utc


def last_lease(records: list[JournalRecord]) -> LeaseRecord | None:
    for record in reversed(records):
        if isinstance(record.body, LeaseRecord):
            return record.body
    return None


class LeaseKeeper:
    def __init__(
        self,
        journal: RouteJournal,
        clock: Clock,
        holder: str,
        duration: dt.timedelta,
        *,
        alerts: AlertSink | None = None,
        facts: Mapping[str, Fact] | None = None,
    ) -> None:
        """``alerts`` receives the custody alerts, each with ``facts`` (the opaque ids of what the lease guards)."""
        if duration <= dt.timedelta(0):
            raise ValueError("lease duration must be positive")
        self._alerts = alerts
        self._facts = dict(facts or {})
        self._journal = journal
        self._clock = clock
        self.holder = holder
        self.duration = duration
        self.skew = duration / 10
        self.expires_at: dt.datetime | None = None
        self.fenced_holder: str | None = None
        self._companions: list[LeaseKeeper] = []

    def join(self, companion: LeaseKeeper) -> None:
        """Keep ``companion`` (an already acquired lease, e.g. the target's) checked and renewed with this one.

        Every ``ensure`` also ensures the companion, so a writer that may have lost either custody stops before its
        next durable write; ``release`` releases the companion first.
        """
        self._companions.append(companion)

    def acquire(self) -> None:
        """Take custody, fencing an expired lease; refuse while another lease may still be live."""
        now = self._clock.now()
        current = last_lease(self._journal.records)
        fenced: str | None = None
        if current is not None and current.action != "released":
            if now < parse_utc(current.expires_at) + self.skew:
                raise self.held(CUSTODY_HELD, "a writer lease is live")
            fenced = current.holder
        self._write("acquired", now, fenced)
        self.fenced_holder = fenced

    def held(self, alert: Alert, detail: str) -> DponeError:
        """Alert that custody is not ours to take; the ``custody_held`` error to raise."""
        emit(self._alerts, alert, code="native_transfer.custody_held", **self._facts)
        return DponeError("native_transfer.custody_held", detail)

    def require_live(self) -> dt.datetime:
        """Raise unless custody is certainly still ours (more than the skew margin left); never writes.

        Safe from a helper thread (the stage writer): it only reads. Returns the time of the check.
        """
        expires_at = self.expires_at
        if expires_at is None:
            raise DponeError("native_transfer.journal_conflict", "writer holds no lease")
        now = self._clock.now()
        if now >= expires_at - self.skew:
            raise DponeError(
                "native_transfer.journal_conflict",
                "this writer's own lease expired before the write (no other writer seen)",
            )
        for companion in self._companions:
            companion.require_live()
        return now

    def ensure(self) -> None:
        """Call before every durable write: stop if custody may be lost, renew at half-time."""
        now = self.require_live()
        if self.expires_at is not None and now >= self.expires_at - self.duration / 2:
            self._write("renewed", now, None)
        for companion in self._companions:
            companion.ensure()

    def release(self) -> None:
        for companion in self._companions:
            companion.release()
        self._companions.clear()
        if self.expires_at is None:
            return
        self._write("released", self._clock.now(), None)
        self.expires_at = None

    def _write(self, action: str, now: dt.datetime, fenced: str | None) -> None:
        expires = now + self.duration
        record = LeaseRecord.model_validate(
            {"holder": self.holder, "action": action, "expires_at": format_utc(expires), "fenced_holder": fenced}
        )
        self._journal.append("lease", record)
        self.expires_at = expires
