"""``ClusterDDLQueueTrigger``: one event per run, bounded polling, no secrets in its kwargs, clean cancellation."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

import pytest

from airflow_provider_dpone.cluster.clickhouse.sql_cluster_ddl import queue_entries
from airflow_provider_dpone.cluster.ports import HostDdlState, QueueEntry, QueueHost
from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook
from airflow_provider_dpone.triggers.ddl_queue import (
    FIRST_POLL_DELAYS,
    ClusterDDLQueueTrigger,
    ProgressGate,
    poll_delay,
    polls_within,
    progress_heartbeat_seconds,
)

pytestmark = pytest.mark.integration


class ScriptedQueue:
    """The hook's queue read, answered from a script of queue entries (``()`` = no entry yet, an exception = failed
    read); patched onto :class:`DponeClickHouseHook` as the dbt Cloud and Databricks trigger tests patch their hook."""

    script: list[Any] = []  # noqa: RUF012 - one script per test, set by the fixture
    reads: list[tuple[str, str, str | None]] = []  # noqa: RUF012
    closed = 0

    @staticmethod
    async def aqueue_entries(
        hook: DponeClickHouseHook, cluster: str, correlation_token: str, entry: str | None = None
    ) -> Sequence[QueueEntry]:
        ScriptedQueue.reads.append((cluster, correlation_token, entry))
        step = ScriptedQueue.script.pop(0) if len(ScriptedQueue.script) > 1 else ScriptedQueue.script[0]
        if isinstance(step, Exception):
            raise step
        return step  # type: ignore[no-any-return]

    @staticmethod
    async def aclose(hook: DponeClickHouseHook) -> None:
        ScriptedQueue.closed += 1


@pytest.fixture(autouse=True)
def _scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    ScriptedQueue.script, ScriptedQueue.reads, ScriptedQueue.closed = [()], [], 0
    monkeypatch.setattr(DponeClickHouseHook, "aqueue_entries", ScriptedQueue.aqueue_entries)
    monkeypatch.setattr(DponeClickHouseHook, "aclose", ScriptedQueue.aclose)


def _snapshot(
    *states: tuple[str, int | None], entry: str = "query-0000000007", entries: int = 1
) -> tuple[QueueEntry, ...]:
    """``entries`` entries carrying the token (more than one: ambiguous), the first named ``entry``."""
    hosts = tuple(QueueHost(HostDdlState(s), c) for s, c in states)
    return tuple(QueueEntry(entry=entry if n == 0 else f"{entry}-{n}", hosts=hosts) for n in range(entries))


def _trigger(**overrides: Any) -> ClusterDDLQueueTrigger:
    kwargs: dict[str, Any] = {
        "conn_id": "dpone_clickhouse_default",
        "cluster": "analytics_cluster",
        "correlation_token": "ab" * 16,
        "expected_hosts": 2,
        "poll_interval": 0.0,
        "max_attempts": 5,
        "missing_attempts": 3,
        "max_read_errors": 2,
    }
    kwargs.update(overrides)
    return ClusterDDLQueueTrigger(**kwargs)


async def _events(trigger: ClusterDDLQueueTrigger) -> list[dict[str, Any]]:
    return [event.payload async for event in trigger.run()]


def test_serialize_returns_the_literal_class_path_and_rebuilds_an_equal_trigger() -> None:
    trigger = _trigger(entry="query-0000000001", round=2, stage="cleanup")
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_provider_dpone.triggers.ddl_queue.ClusterDDLQueueTrigger"
    json.dumps(kwargs)  # plain JSON values only
    assert ClusterDDLQueueTrigger(**kwargs).serialize() == (classpath, kwargs)
    assert not {"password", "host", "login", "extra", "sql"} & set(kwargs)


async def test_finishes_with_one_event_when_every_expected_host_is_finished() -> None:
    ScriptedQueue.script = [
        (),
        _snapshot(("Active", None), ("Inactive", None)),
        _snapshot(("Finished", 0), ("Active", None)),
        _snapshot(("Finished", 0), ("Finished", 0)),
    ]
    events = await _events(_trigger(entry="query-0000000007"))
    assert len(events) == 1
    assert events[0]["status"] == "finished"
    assert (events[0]["finished"], events[0]["failed"], events[0]["attempts"]) == (2, 0, 4)
    assert ScriptedQueue.closed == 1
    assert {read[2] for read in ScriptedQueue.reads} == {"query-0000000007"}, "only the bound entry is polled"


async def test_the_entry_is_pinned_once_observed() -> None:
    ScriptedQueue.script = [
        _snapshot(("Active", None), ("Inactive", None)),
        _snapshot(("Finished", 0), ("Finished", 0)),
    ]
    (event,) = await _events(_trigger())
    assert event["status"] == "finished"
    assert [read[2] for read in ScriptedQueue.reads] == [None, "query-0000000007"]


async def test_a_failed_host_still_ends_the_wait_and_reports_it() -> None:
    ScriptedQueue.script = [_snapshot(("Finished", 0), ("Finished", 60))]
    (event,) = await _events(_trigger())
    assert (event["status"], event["failed"]) == ("finished", 1)


async def test_fewer_hosts_than_expected_is_not_finished() -> None:
    ScriptedQueue.script = [_snapshot(("Finished", 0))]
    (event,) = await _events(_trigger(max_attempts=3))
    assert event["status"] == "timeout"
    assert event["attempts"] == 3


async def test_missing_entry_and_ambiguous_token_and_read_errors_are_terminal_events() -> None:
    ScriptedQueue.script = [()]
    assert [e["status"] for e in await _events(_trigger())] == ["missing"]
    ScriptedQueue.script = [_snapshot(("Active", None), ("Active", None), entries=2)]
    assert [e["status"] for e in await _events(_trigger())] == ["ambiguous"]
    ScriptedQueue.script = [ConnectionError("refused: host-that-must-not-leak:8123")]
    (event,) = await _events(_trigger())
    assert event["status"] == "error"
    assert "host-that-must-not-leak" not in json.dumps(event)
    assert ScriptedQueue.closed == 3


async def test_a_single_failed_read_is_tolerated() -> None:
    ScriptedQueue.script = [TimeoutError(), _snapshot(("Finished", 0), ("Finished", 0))]
    (event,) = await _events(_trigger())
    assert event["status"] == "finished"


async def test_running_the_same_trigger_twice_gives_the_same_event() -> None:
    finished = _snapshot(("Finished", 0), ("Finished", 0))
    ScriptedQueue.script = [finished]
    trigger = _trigger()
    first = await _events(trigger)
    second = await _events(_trigger(**trigger.serialize()[1]))
    assert first == second


async def test_cancellation_interrupts_the_sleep_and_closes_the_client() -> None:
    ScriptedQueue.script = [_snapshot(("Active", None), ("Active", None))]
    task = asyncio.ensure_future(_events(_trigger(poll_interval=30.0, max_attempts=100)))
    while not ScriptedQueue.reads:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ScriptedQueue.closed == 1
    assert len(ScriptedQueue.reads) == 1


def test_invalid_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="attempts"):
        _trigger(max_attempts=0)


def test_queue_entries_keeps_only_the_bound_entry() -> None:
    rows = [
        ("query-1", "h1", 9000, "Finished", 0),
        ("query-1", "h2", 9000, "Active", None),
        ("query-2", "h1", 9000, "Finished", 0),
    ]
    finished = QueueHost(HostDdlState.FINISHED, 0, "h1", 9000)
    assert queue_entries(rows, entry="query-2") == (QueueEntry("query-2", (finished,)),)
    unbound = queue_entries(rows)
    assert len(unbound) == 2 and [e.entry for e in unbound] == ["query-1", "query-2"]
    assert queue_entries([]) == ()


async def test_progress_is_logged_when_it_changes_not_on_every_poll(capfd: pytest.CaptureFixture[str]) -> None:
    pending = _snapshot(("Finished", 0), ("Active", None))
    ScriptedQueue.script = [pending] * 6 + [_snapshot(("Finished", 0), ("Finished", 0))]
    capfd.readouterr()
    (event,) = await _events(_trigger(max_attempts=20))
    assert event["status"] == "finished" and len(ScriptedQueue.reads) == 7
    lines = [line for line in capfd.readouterr().out.splitlines() if "hosts finished" in line]
    assert len(lines) == 2
    assert "dpone publication: queue entry query-0000000007: 1 of 2 hosts finished, 0 failed" in lines[0]
    assert "dpone publication: queue entry query-0000000007: 2 of 2 hosts finished, 0 failed" in lines[1]


def test_an_unchanged_line_comes_back_as_a_heartbeat() -> None:
    now = [0.0]
    gate = ProgressGate(heartbeat_seconds=60.0, clock=lambda: now[0])
    seen = []
    for second, line in [(0, "a"), (5, "a"), (59, "a"), (60, "a"), (61, "b"), (62, "b"), (130, "b"), (131, "a")]:
        now[0] = float(second)
        seen.append((second, gate.due(line)))
    assert [second for second, due in seen if due] == [0, 60, 61, 130, 131]


def test_the_heartbeat_is_serialized_and_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _trigger(heartbeat_seconds=42.0).serialize()[1]["heartbeat_seconds"] == 42.0
    assert progress_heartbeat_seconds() == 300.0
    monkeypatch.setenv("AIRFLOW__DPONE__PROGRESS_HEARTBEAT_SECONDS", "15")
    assert progress_heartbeat_seconds() == 15.0


def test_the_waits_between_polls_grow_to_the_interval_and_the_poll_count_covers_the_timeout() -> None:
    assert [poll_delay(n, 5.0) for n in range(1, 8)] == [*FIRST_POLL_DELAYS, 5.0, 5.0, 5.0]
    assert [poll_delay(n, 0.3) for n in range(1, 4)] == [0.25, 0.3, 0.3]  # never longer than the interval
    assert poll_delay(1, 0.0) == 0.0
    for seconds, interval in ((3600.0, 5.0), (1.0, 0.2), (10.0, 30.0), (0.5, 5.0)):
        polls = polls_within(seconds, interval)
        waited = sum(poll_delay(n, interval) for n in range(1, polls))
        assert waited >= seconds > waited - poll_delay(polls - 1, interval), (seconds, interval, polls)
    assert polls_within(60.0, 0.0) == 1


async def test_an_entry_that_finishes_soon_after_the_first_poll_is_seen_without_waiting_a_whole_interval() -> None:
    ScriptedQueue.script = [
        _snapshot(("Finished", 0), ("Active", None)),
        _snapshot(("Finished", 0), ("Finished", 0)),
    ]
    started = time.monotonic()
    (event,) = await _events(_trigger(poll_interval=30.0, max_attempts=3))
    assert (event["status"], event["attempts"]) == ("finished", 2)
    assert time.monotonic() - started < 5.0, "the second poll waits the first short delay, not the 30 s interval"
