"""Recovery matrix of the native transfer route (seed 003 section 12 and its state diagram), on fakes.

Every crash point of the route and of the target is enumerated; after each, retries must converge to exactly one
publication of exactly the source multiset, and every retry that starts after EOF must open the source zero times.
"""

from __future__ import annotations

import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.route.states import RouteState
from airflow_provider_dpone.transfer.storage import ObjectStageStore
from tests.support.fakes.transfer_target import Fault, SimulatedCrash
from tests.support.transfer.native_route_harness import Harness, crash_at, fault_at, make_harness, multiset

pytestmark = pytest.mark.protocol

ROUTE_POINTS_BEFORE_EOF = ["admitted", "block", "chunk_sealed", "eof"]
ROUTE_POINTS_AFTER_EOF = ["stage_complete", "prepared", "loaded", "publish_intent", "publish_acknowledged", "succeeded"]
TARGET_FAULTS = {  # (route checkpoint, fault, commits skipped): the target's commits are prepare, loads, publish
    "prepare.before": (None, Fault.CRASH_BEFORE_COMMIT, 0),
    "prepare.after": (None, Fault.CRASH_AFTER_COMMIT, 0),
    "load.after:1": ("prepared", Fault.CRASH_AFTER_COMMIT, 1),
    "publish.before_commit": ("publish_intent", Fault.CRASH_BEFORE_COMMIT, 0),
    "publish.after_commit": ("publish_intent", Fault.CRASH_AFTER_COMMIT, 0),
}


def converge(harness: Harness, *, post_eof: bool) -> list[RouteState]:
    """Retry like Airflow would (after the crashed lease expires) until success; return the states resumed from."""
    states: list[RouteState] = []
    harness.expire_lease()
    for _ in range(4):
        before = harness.source.connections
        harness.source.deny = post_eof
        try:
            result = harness.run()
        except DponeError as exc:
            if exc.code != "native_transfer.publication_absent":
                raise
            assert harness.source.connections == before
            continue
        states.append(result.resumed_from)
        if post_eof:
            assert harness.source.connections == before, "post-EOF recovery opened the source"
            assert result.source_connections == 0
        return states
    raise AssertionError("route did not converge")


def assert_published_once(harness: Harness) -> None:
    assert multiset(harness.target.rows()) == harness.source_rows()
    assert len(harness.target.receipts) == 1
    assert harness.target.calls.count("publish") <= 2


@pytest.mark.parametrize("point", ROUTE_POINTS_BEFORE_EOF)
def test_crash_before_eof_settles_then_reextracts(tmp_path, point) -> None:
    harness = make_harness(tmp_path)
    with pytest.raises(SimulatedCrash):
        harness.run(crash_at(point))
    assert harness.target.calls == ["admit"]
    with pytest.raises(DponeError) as held:
        harness.run()
    assert held.value.code == "native_transfer.custody_held"
    assert harness.source.connections == 1, "held custody must block before touching the source"
    harness.expire_lease()
    result = harness.run()
    assert result.resumed_from is RouteState.EXTRACTING
    assert len(result.settled_invocations) == 1 and result.settled_invocations[0] != result.invocation_id
    assert harness.source.connections == 2, "re-extraction is a new invocation with a new query"
    assert not (tmp_path / "0123456789abcdef0123456789abcdef" / "stage" / result.settled_invocations[0]).exists()
    assert_published_once(harness)


@pytest.mark.parametrize("point", ROUTE_POINTS_AFTER_EOF)
def test_crash_after_eof_recovers_source_free(tmp_path, point) -> None:
    harness = make_harness(tmp_path)
    with pytest.raises(SimulatedCrash):
        harness.run(crash_at(point))
    assert harness.source.connections == 1
    converge(harness, post_eof=True)
    assert_published_once(harness)


@pytest.mark.parametrize("fault", sorted(TARGET_FAULTS))
def test_target_crash_recovers_source_free(tmp_path, fault) -> None:
    harness = make_harness(tmp_path)
    point, kind, after = TARGET_FAULTS[fault]
    with pytest.raises(SimulatedCrash):
        harness.run(fault_at(harness, point, kind, after=after))
    states = converge(harness, post_eof=True)
    assert_published_once(harness)
    if fault == "publish.after_commit":
        assert states == [RouteState.OUTCOME_UNKNOWN]
        assert harness.target.calls.count("publish") == 1, "a lost acknowledgement is reconciled, never republished"


def test_interrupted_commit_proven_absent_fails_then_republishes(tmp_path) -> None:
    harness = make_harness(tmp_path)
    with pytest.raises(SimulatedCrash):
        harness.run(fault_at(harness, "publish_intent", Fault.CRASH_BEFORE_COMMIT))
    harness.expire_lease()
    harness.source.deny = True
    with pytest.raises(DponeError) as absent:
        harness.run()
    assert absent.value.code == "native_transfer.publication_absent"
    assert harness.target.rows() == []
    result = harness.run()
    assert result.resumed_from is RouteState.PUBLISHING
    assert harness.source.connections == 1
    assert_published_once(harness)


def test_unknown_commit_stays_held_until_the_target_can_answer(tmp_path) -> None:
    harness = make_harness(tmp_path)
    with pytest.raises(DponeError) as unknown:
        harness.run(fault_at(harness, "publish_intent", Fault.IN_FLIGHT))
    assert unknown.value.code == "native_transfer.target_publication_in_flight", "reconcile may not answer yet"
    harness.source.deny = True
    with pytest.raises(DponeError) as still:
        harness.run()
    assert still.value.code == "native_transfer.target_publication_in_flight"
    (pending,) = harness.target.database.in_flight
    harness.target.settle(pending, commit=True)
    assert harness.run().resumed_from is RouteState.OUTCOME_UNKNOWN
    assert_published_once(harness)


def test_clean_failure_before_eof_settles_immediately(tmp_path) -> None:
    harness = make_harness(tmp_path)

    def drift(point: str) -> None:
        if point == "admitted":
            harness.source.tables[("db", "events")].columns.append(("extra", "UInt8"))

    with pytest.raises(DponeError) as failed:
        harness.run(drift)
    assert failed.value.code == "native_transfer.source_snapshot_drift"
    harness.source.tables[("db", "events")].columns.pop()
    result = harness.run()
    assert result.resumed_from is RouteState.REEXTRACT_REQUIRED
    assert result.settled_invocations == ()
    assert_published_once(harness)


def test_target_verification_mismatch_publishes_nothing(tmp_path) -> None:
    harness = make_harness(tmp_path)
    harness.target.lose_a_row = True
    with pytest.raises(DponeError) as failed:
        harness.run()
    assert failed.value.code == "native_transfer.target_verification_failed"
    assert harness.target.rows() == [] and not harness.target.receipts
    harness.source.deny = True
    assert harness.run().resumed_from is RouteState.PUBLISHING
    assert_published_once(harness)


def test_succeeded_operation_returns_its_outcome_without_any_io(tmp_path) -> None:
    harness = make_harness(tmp_path)
    first = harness.run()
    calls = list(harness.target.calls)
    harness.source.deny = True
    again = harness.run()
    assert again.resumed_from is RouteState.SUCCEEDED
    assert (again.invocation_id, again.rows, again.workload_digest) == (
        first.invocation_id,
        first.rows,
        first.workload_digest,
    )
    assert harness.target.calls == calls and harness.source.connections == 1


def test_held_custody_blocks_an_overlapping_run(tmp_path) -> None:
    harness = make_harness(tmp_path)
    overlapping: list[DponeError] = []

    def start_second_run(point: str) -> None:
        if point == "chunk_sealed" and not overlapping:
            with pytest.raises(DponeError) as held:
                harness.run()
            overlapping.append(held.value)

    harness.run(start_second_run)
    assert overlapping[0].code == "native_transfer.custody_held"
    assert_published_once(harness)


def test_failed_stage_write_settles_before_eof_and_leaves_no_stage_object(tmp_path, monkeypatch) -> None:
    """Stage writes run in a writer thread: a failed put surfaces in ordinal order, the writer is finished before the
    invocation is settled, so no object of the settled invocation is left behind (or written after)."""
    harness = make_harness(tmp_path)
    put = ObjectStageStore.put

    def failing_put(self: ObjectStageStore, key: str, data: bytes) -> None:
        if key.endswith("/00000001.chunk"):
            raise OSError("stage unavailable")
        put(self, key, data)

    monkeypatch.setattr(ObjectStageStore, "put", failing_put)
    with pytest.raises(OSError):
        harness.run()
    stage = tmp_path / "0123456789abcdef0123456789abcdef" / "stage"
    assert not stage.exists() or not any(stage.iterdir())
    assert harness.target.calls == ["admit"]
    monkeypatch.setattr(ObjectStageStore, "put", put)
    result = harness.run()
    assert result.resumed_from is RouteState.REEXTRACT_REQUIRED
    assert harness.source.connections == 2
    assert_published_once(harness)
