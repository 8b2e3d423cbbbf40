"""``ClusterDDLQueueTrigger``: wait, in the triggerer, until one bound ``ON CLUSTER`` DDL has finished everywhere.

The deferrable publish and cleanup tasks defer here while their bound queue entry is still running on some member.
The trigger polls *only* that entry (found by its correlation token, pinned by its name once known) through the
connection hook's async, read-only :meth:`~airflow_provider_dpone.hooks.clickhouse.DponeClickHouseHook.aqueue_entries`
(as the dbt Cloud and Databricks triggers call their hook), and yields exactly one :class:`TriggerEvent`:

* ``finished``  -- every expected host reports ``Finished`` (with or without an exception code);
* ``ambiguous`` -- more than one entry carries the token (never expected; the task's reconcile decides);
* ``missing``   -- no entry carried the token for ``missing_attempts`` polls (the dispatch may never have arrived);
* ``error``     -- ``max_read_errors`` consecutive reads failed;
* ``timeout``   -- ``max_attempts`` polls without any of the above.

The event only wakes the task. It decides nothing: the resumed task re-reads the authority and reconciles every
member by observation (a new process; XCom and the event are never trusted). Running the same trigger twice is
harmless, since it never mutates. Cancellation (the triggerer stopping, the task being cleared) interrupts the sleep
and closes the client in ``finally``. Like ``AwsBaseWaiterTrigger`` it is bounded by a poll interval and a maximum
number of attempts; unlike a generic SQL trigger it never logs SQL, hosts or results, only counts and the entry name.
The first poll is immediate and the next waits grow to the poll interval (:func:`poll_delay`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from airflow.triggers.base import BaseTrigger, TriggerEvent

if TYPE_CHECKING:
    from airflow_provider_dpone.cluster.ports import QueueEntry
    from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

DEFAULT_HEARTBEAT_SECONDS: Final[float] = 300.0

FIRST_POLL_DELAYS: Final[tuple[float, ...]] = (0.25, 0.5, 1.0, 2.0)
"""The waits after the first polls, each capped at the poll interval: a DDL still running when its task began to
wait often finishes soon after, so the wait grows to the full interval only while it does not."""


def poll_delay(polls: int, poll_interval: float) -> float:
    """Seconds to wait after the ``polls``-th poll (counted from 1): :data:`FIRST_POLL_DELAYS`, then the interval."""
    ramp = FIRST_POLL_DELAYS[polls - 1] if 0 < polls <= len(FIRST_POLL_DELAYS) else poll_interval
    return min(ramp, poll_interval)


def polls_within(seconds: float, poll_interval: float) -> int:
    """How many polls the :func:`poll_delay` schedule takes to wait at least ``seconds`` (one at least)."""
    if poll_interval <= 0:
        return 1
    polls, waited = 1, 0.0
    while waited < seconds:
        waited += poll_delay(polls, poll_interval)
        polls += 1
    return polls


def progress_heartbeat_seconds() -> float:
    """``[dpone] progress_heartbeat_seconds``: how often an unchanged waiting line is logged again (default 300)."""
    from airflow.sdk import conf

    return conf.getfloat("dpone", "progress_heartbeat_seconds", fallback=DEFAULT_HEARTBEAT_SECONDS)


class ProgressGate:
    """Which waiting lines reach the log: a line that differs from the last one logged, or the same line again once
    ``heartbeat_seconds`` have passed since it was logged (a poll every few seconds must not repeat it each time)."""

    def __init__(self, heartbeat_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.heartbeat_seconds = heartbeat_seconds
        self._clock = clock
        self._last: tuple[str, float] | None = None

    def due(self, line: str) -> bool:
        now = self._clock()
        if self._last is not None and self._last[0] == line and now - self._last[1] < self.heartbeat_seconds:
            return False
        self._last = (line, now)
        return True


class ClusterDDLQueueTrigger(BaseTrigger):
    """Poll one distributed DDL queue entry until every expected host has finished it.

    :param conn_id: the ``dpone_clickhouse`` connection whose coordinator is asked (no secret is serialized).
    :param cluster: the cluster name the entry was dispatched on.
    :param correlation_token: the random token bound in the authority before dispatch.
    :param expected_hosts: how many hosts the entry must list (the bound inventory's member count).
    :param entry: the entry name, once the task has observed it; pins the poll to exactly that entry.
    :param stage: ``publication`` or ``cleanup`` (carried into the event for the task's log).
    :param round: how many deferrals preceded this one (carried into the event; bounds re-deferral).
    :param poll_interval: the longest wait between polls (the first waits are shorter: :func:`poll_delay`).
    :param max_attempts: polls before a ``timeout`` event.
    :param missing_attempts: polls without any entry before a ``missing`` event.
    :param max_read_errors: consecutive failed reads before an ``error`` event.
    :param heartbeat_seconds: an unchanged progress line is logged again after this long (a changed one at once).
    """

    def __init__(
        self,
        *,
        conn_id: str,
        cluster: str,
        correlation_token: str,
        expected_hosts: int,
        entry: str | None = None,
        stage: str = "publication",
        round: int = 0,
        poll_interval: float = 5.0,
        max_attempts: int = 720,
        missing_attempts: int = 12,
        max_read_errors: int = 5,
        heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        if poll_interval < 0 or max_attempts < 1 or missing_attempts < 1 or max_read_errors < 1 or expected_hosts < 1:
            raise ValueError("poll_interval >= 0, and attempts, read errors and expected hosts >= 1")
        self.conn_id = conn_id
        self.cluster = cluster
        self.correlation_token = correlation_token
        self.expected_hosts = expected_hosts
        self.entry = entry
        self.stage = stage
        self.round = round
        self.poll_interval = poll_interval
        self.max_attempts = max_attempts
        self.missing_attempts = missing_attempts
        self.max_read_errors = max_read_errors
        self.heartbeat_seconds = heartbeat_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_provider_dpone.triggers.ddl_queue.ClusterDDLQueueTrigger",
            {
                "conn_id": self.conn_id,
                "cluster": self.cluster,
                "correlation_token": self.correlation_token,
                "expected_hosts": self.expected_hosts,
                "entry": self.entry,
                "stage": self.stage,
                "round": self.round,
                "poll_interval": self.poll_interval,
                "max_attempts": self.max_attempts,
                "missing_attempts": self.missing_attempts,
                "max_read_errors": self.max_read_errors,
                "heartbeat_seconds": self.heartbeat_seconds,
            },
        )

    def _event(self, status: str, attempts: int, entries: Sequence[QueueEntry]) -> TriggerEvent:
        found = entries[0] if entries else None
        return TriggerEvent(  # type: ignore[no-untyped-call]
            {
                "status": status,
                "stage": self.stage,
                "round": self.round,
                "attempts": attempts,
                "correlation_token": self.correlation_token,
                "entry": found.entry if found is not None else self.entry,
                "hosts": len(found.hosts) if found is not None else 0,
                "expected_hosts": self.expected_hosts,
                "finished": found.finished if found is not None else 0,
                "failed": found.failed if found is not None else 0,
            }
        )

    def _verdict(self, entries: Sequence[QueueEntry], missing: int) -> str | None:
        if not entries:
            return "missing" if missing >= self.missing_attempts else None
        if len(entries) > 1:
            return "ambiguous"
        (found,) = entries
        if len(found.hosts) >= self.expected_hosts and found.finished == len(found.hosts):
            return "finished"
        return None

    def _hook(self) -> DponeClickHouseHook:
        """The connection's hook, imported and built in a worker thread: the import (the hook, the ClickHouse client)
        takes seconds, and the triggerer's event loop must never wait on it."""
        from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

        return DponeClickHouseHook(dpone_clickhouse_conn_id=self.conn_id)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = await asyncio.to_thread(self._hook)
        entries: Sequence[QueueEntry] = ()
        entry = self.entry
        missing = errors = 0
        progress = ProgressGate(self.heartbeat_seconds)
        try:
            for attempt in range(1, self.max_attempts + 1):
                try:
                    entries = await hook.aqueue_entries(self.cluster, self.correlation_token, entry)
                except Exception as exc:  # noqa: BLE001 - any failed read counts; the type only is logged
                    errors += 1
                    self.log.warning("dpone %s: queue read %d failed (%s)", self.stage, attempt, type(exc).__name__)
                    if errors >= self.max_read_errors:
                        yield self._event("error", attempt, entries)
                        return
                else:
                    errors = 0
                    missing = 0 if entries else missing + 1
                    if len(entries) == 1:
                        entry = entries[0].entry  # pinned: later polls read exactly this entry
                    verdict = self._verdict(entries, missing)
                    if entries:
                        found = entries[0]
                        line = (
                            f"dpone {self.stage}: queue entry {found.entry}: {found.finished} of "
                            f"{max(len(found.hosts), self.expected_hosts)} hosts finished, {found.failed} failed"
                        )
                        if progress.due(line):
                            self.log.info("%s", line)
                    if verdict is not None:
                        yield self._event(verdict, attempt, entries)
                        return
                if attempt < self.max_attempts:
                    await asyncio.sleep(poll_delay(attempt, self.poll_interval))
            yield self._event("timeout", self.max_attempts, entries)
        finally:
            await hook.aclose()
