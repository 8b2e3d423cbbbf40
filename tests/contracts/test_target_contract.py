"""The transfer-target contract: one scenario suite, the same outcomes on every backend.

Backends: the in-memory fake, real PostgreSQL (a throwaway cluster), and the SQL Server adapter (both import backends)
over the recording DB-API fake, which cannot be a real server here; its call sequences are asserted separately in
tests/unit/test_mssql_target_calls.py.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal

import pyarrow as pa
import pytest

from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.native_arrow_chunk import rows_table
from airflow_provider_dpone.contracts.native_transfer_options import ImportBackend
from airflow_provider_dpone.contracts.transfer_target import PublicationMode, TargetColumn, TargetPlan, UtcWindow
from airflow_provider_dpone.contracts.transfer_target_receipts import (
    ChunkExpectation,
    PublicationRequest,
    PublicationState,
)
from airflow_provider_dpone.contracts.transfer_target_types import StringMapping
from airflow_provider_dpone.contracts.typed_digest import MultisetDigest
from airflow_provider_dpone.protocol.native_transfer.schema_admission import map_type
from tests.fakes.transfer_target import Fault, SimulatedCrash
from tests.fixtures.target_harness import FakeHarness, MsSqlHarness, PostgresHarness, Rows, TargetHarness

UTC = dt.UTC
DAY = dt.datetime(2026, 3, 1, tzinfo=UTC)
COLUMNS = (
    TargetColumn(name="id", source_type="UInt64"),
    TargetColumn(name="k", source_type="Int32"),
    TargetColumn(name="amount", source_type="Nullable(Decimal(18, 4))"),
    TargetColumn(name="payload", source_type="String"),
    TargetColumn(name="label", source_type="LowCardinality(String)", string_mapping=StringMapping.TEXT),
    TargetColumn(name="ts", source_type="DateTime64(3, 'UTC')"),
    TargetColumn(name="d", source_type="Date"),
    TargetColumn(name="u", source_type="Nullable(UUID)"),
    TargetColumn(name="flag", source_type="Bool"),
    TargetColumn(name="micros", source_type="Nullable(DateTime64(6, 'UTC'))"),
)


def make_row(i: int, *, day: dt.datetime = DAY, variant: int = 0) -> tuple[object, ...]:
    """Deterministic rows with boundary values: UInt64 max, NULLs, empty and non-UTF-8 bytes, sub-second times."""
    ts = day + dt.timedelta(seconds=i * 7, milliseconds=i % 1000)
    return (
        2**64 - 1 - i if i % 3 == 0 else i,
        (-1) ** i * i * 1000 + variant,
        None if i % 5 == 0 else Decimal(i).scaleb(-4) - Decimal("99999.9999") * (i % 2),
        bytes([i % 256, 0, 255]) if i % 4 else b"",
        f"label-{i % 7}-é",
        ts,
        ts.date(),
        None if i % 6 == 0 else uuid.UUID(int=i + 1),
        i % 2 == 0,
        None if i % 7 == 0 else ts + dt.timedelta(microseconds=i * 37 + 1),
    )


def rows_for(count: int, start: int = 0, **kwargs: object) -> Rows:
    return [make_row(i, **kwargs) for i in range(start, start + count)]  # type: ignore[arg-type]


def expectation(plan: TargetPlan, ordinal: int, rows: Rows) -> ChunkExpectation:
    acc = MultisetDigest(plan.typed_columns)
    acc.add_rows(rows)
    return ChunkExpectation.of(ordinal, acc)


def digest_of(plan: TargetPlan, rows: Rows | None) -> tuple[int, str]:
    assert rows is not None
    acc = MultisetDigest(plan.typed_columns)
    acc.add_rows(rows)
    return acc.rows, acc.hexdigest


@pytest.fixture(params=["fake", "postgres", "mssql-bcp", "mssql-mssql_sqlclient"])
def harness(request: pytest.FixtureRequest) -> Iterator[TargetHarness]:
    if request.param == "fake":
        made: TargetHarness = FakeHarness()
    elif request.param.startswith("mssql-"):
        made = MsSqlHarness(ImportBackend(request.param.removeprefix("mssql-")))
    else:
        server = request.getfixturevalue("postgres_server")
        made = PostgresHarness(server.dsn)
    try:
        yield made
    finally:
        made.close()


def full_plan(h: TargetHarness, invocation: str = "inv-full-0001") -> TargetPlan:
    return TargetPlan(
        invocation_id=invocation,
        target_schema=h.schema,
        target_table="events",
        columns=COLUMNS,
        mode=PublicationMode.FULL_REFRESH,
    )


WINDOW = UtcWindow(column="ts", start=DAY, end=DAY + dt.timedelta(days=1))


def window_plan(h: TargetHarness, invocation: str = "inv-window-0001") -> TargetPlan:
    return TargetPlan(
        invocation_id=invocation,
        target_schema=h.schema,
        target_table="events",
        columns=COLUMNS,
        mode=PublicationMode.WINDOW_REPLACE,
        window=WINDOW,
    )


def stage(h: TargetHarness, plan: TargetPlan, chunks: list[Rows]) -> PublicationRequest:
    """Prepare, load and verify every chunk; return the publication request."""
    h.target.prepare(plan)
    expectations = []
    for ordinal, rows in enumerate(chunks):
        assert h.target.load_chunk(plan, ordinal, rows).rows_sent == len(rows)
        expected = expectation(plan, ordinal, rows)
        h.target.verify_chunk(plan, expected).require_matched()
        expectations.append(expected)
    return PublicationRequest(chunks=tuple(expectations))


def codes(excinfo: pytest.ExceptionInfo[DponeError]) -> str:
    return excinfo.value.code


# -- staging and chunk verification -------------------------------------------------------------------------------
def test_full_refresh_publishes_exactly_the_verified_rows(harness: TargetHarness) -> None:
    plan = full_plan(harness)
    chunks = [rows_for(40), rows_for(25, start=40), []]
    request = stage(harness, plan, chunks)
    receipt = harness.target.publish(plan, request)
    assert receipt.require_matches(request).rows == 65
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, chunks[0] + chunks[1])
    assert not harness.staging_exists(plan)
    observed = harness.target.reconcile(plan)
    assert observed.state is PublicationState.COMMITTED and observed.receipt == receipt
    with pytest.raises(DponeError) as again:
        harness.target.publish(plan, request)
    assert codes(again) == "mssql_native.target_publication_already_committed"
    with pytest.raises(DponeError) as late_prepare:
        harness.target.prepare(plan)
    assert codes(late_prepare) == "mssql_native.target_publication_already_committed"


def test_full_refresh_replaces_an_existing_table(harness: TargetHarness) -> None:
    plan = full_plan(harness)
    old = rows_for(10, variant=1)
    harness.seed_target(plan, old)
    new = rows_for(3, start=100)
    assert harness.target.prepare(plan).target_exists
    harness.target.publish(plan, stage(harness, plan, [new]))
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, new)


@pytest.mark.parametrize("fault", ["lost_row", "duplicated_row"])
def test_verification_catches_a_lost_or_duplicated_row_in_transit(harness: TargetHarness, fault: str) -> None:
    plan = full_plan(harness)
    harness.target.prepare(plan)
    source = rows_for(12)
    delivered = source[:-1] if fault == "lost_row" else [*source, source[3]]
    harness.target.load_chunk(plan, 0, delivered)
    verification = harness.target.verify_chunk(plan, expectation(plan, 0, source))
    assert not verification.matched
    with pytest.raises(DponeError) as failed:
        verification.require_matched()
    assert codes(failed) == "mssql_native.target_chunk_verification_failed"
    assert harness.target.discard_chunk(plan, 0) == len(delivered)
    harness.target.load_chunk(plan, 0, source)
    assert harness.target.verify_chunk(plan, expectation(plan, 0, source)).matched


@pytest.mark.parametrize("action", ["drop_one", "duplicate_one"])
def test_verification_reads_back_what_the_target_stored(harness: TargetHarness, action: str) -> None:
    plan = full_plan(harness)
    harness.target.prepare(plan)
    rows = rows_for(9)
    harness.target.load_chunk(plan, 0, rows)
    assert harness.target.verify_chunk(plan, expectation(plan, 0, rows)).matched
    harness.tamper(plan, 0, action)
    assert not harness.target.verify_chunk(plan, expectation(plan, 0, rows)).matched


def test_verification_distinguishes_a_changed_value(harness: TargetHarness) -> None:
    plan = full_plan(harness)
    harness.target.prepare(plan)
    rows = rows_for(5)
    changed = [*rows[:-1], make_row(4, variant=1)]
    harness.target.load_chunk(plan, 0, changed)
    check = harness.target.verify_chunk(plan, expectation(plan, 0, rows))
    assert check.observed_rows == check.expected_rows and not check.matched


def test_a_staged_ordinal_is_never_loaded_twice(harness: TargetHarness) -> None:
    plan = full_plan(harness)
    harness.target.prepare(plan)
    harness.target.load_chunk(plan, 0, rows_for(3))
    with pytest.raises(DponeError) as twice:
        harness.target.load_chunk(plan, 0, rows_for(3))
    assert codes(twice) == "mssql_native.target_chunk_already_loaded"
    assert harness.target.verify_chunk(plan, expectation(plan, 0, rows_for(3))).matched


def test_load_with_a_lost_ack_is_resolved_by_verification(harness: TargetHarness) -> None:
    plan = full_plan(harness)
    harness.target.prepare(plan)
    rows = rows_for(6)
    harness.faults.arm(Fault.LOST_ACK)
    with pytest.raises(DponeError) as unknown:
        harness.target.load_chunk(plan, 0, rows)
    assert codes(unknown) == "mssql_native.target_load_failed"
    assert harness.target.verify_chunk(plan, expectation(plan, 0, rows)).matched


def test_load_whose_commit_never_arrived_leaves_no_rows(harness: TargetHarness) -> None:
    plan = full_plan(harness)
    harness.target.prepare(plan)
    rows = rows_for(6)
    harness.faults.arm(Fault.COMMIT_DROPPED)
    with pytest.raises(DponeError):
        harness.target.load_chunk(plan, 0, rows)
    assert harness.target.verify_chunk(plan, expectation(plan, 0, rows)).observed_rows == 0
    harness.target.load_chunk(plan, 0, rows)
    assert harness.target.verify_chunk(plan, expectation(plan, 0, rows)).matched


def test_invalid_values_are_refused_before_any_row_is_staged(harness: TargetHarness) -> None:
    plan = full_plan(harness)
    harness.target.prepare(plan)
    bad = [*rows_for(3), (-1, *make_row(3)[1:])]
    with pytest.raises(DponeError) as refused:
        harness.target.load_chunk(plan, 0, bad)
    assert codes(refused) == "mssql_native.target_value_invalid"
    assert "row 3 column id" in refused.value.detail
    assert harness.target.verify_chunk(plan, expectation(plan, 0, [])).matched


def test_publish_refuses_staging_that_differs_from_the_request(harness: TargetHarness) -> None:
    plan = full_plan(harness)
    request = stage(harness, plan, [rows_for(4), rows_for(4, start=4)])
    missing = PublicationRequest(chunks=(*request.chunks, expectation(plan, 2, rows_for(1, start=8))))
    for wrong in (missing, PublicationRequest(chunks=request.chunks[:1])):
        with pytest.raises(DponeError) as refused:
            harness.target.publish(plan, wrong)
        assert codes(refused) == "mssql_native.target_staging_incomplete"
    assert harness.target.reconcile(plan).state is PublicationState.ABSENT
    assert harness.read_target(plan) is None


# -- window replace -----------------------------------------------------------------------------------------------
def _window_seed(h: TargetHarness, plan: TargetPlan) -> tuple[Rows, Rows]:
    before = rows_for(5, day=DAY - dt.timedelta(days=1))
    inside = rows_for(6, variant=2)
    after = rows_for(4, day=DAY + dt.timedelta(days=1))
    h.seed_target(plan, [*before, *inside, *after])
    return [*before, *after], inside


def test_window_replace_touches_only_the_window(harness: TargetHarness) -> None:
    plan = window_plan(harness)
    outside, _old_inside = _window_seed(harness, plan)
    new = rows_for(8, start=50)
    harness.target.publish(plan, stage(harness, plan, [new[:5], new[5:]]))
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, outside + new)
    assert not harness.staging_exists(plan)


def test_window_replace_with_an_empty_replacement_clears_the_window(harness: TargetHarness) -> None:
    plan = window_plan(harness)
    outside, _ = _window_seed(harness, plan)
    receipt = harness.target.publish(plan, stage(harness, plan, []))
    assert receipt.rows == 0
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, outside)


def test_window_replace_refuses_staged_rows_outside_the_window(harness: TargetHarness) -> None:
    plan = window_plan(harness)
    outside, inside = _window_seed(harness, plan)
    stray = rows_for(2, day=DAY + dt.timedelta(days=1), variant=9)
    request = stage(harness, plan, [rows_for(3), stray])
    with pytest.raises(DponeError) as refused:
        harness.target.publish(plan, request)
    assert codes(refused) == "mssql_native.target_rows_outside_window"
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, outside + inside)
    assert harness.target.reconcile(plan).state is PublicationState.ABSENT


def test_window_replace_needs_a_matching_target_table(harness: TargetHarness) -> None:
    plan = window_plan(harness)
    with pytest.raises(DponeError) as missing:
        harness.target.prepare(plan)
    assert codes(missing) == "mssql_native.target_schema_mismatch"
    other = TargetPlan(
        invocation_id="inv-window-0002",
        target_schema=harness.schema,
        target_table="events",
        columns=(*COLUMNS[:2], TargetColumn(name="amount", source_type="Nullable(Decimal(18, 2))"), *COLUMNS[3:]),
        mode=PublicationMode.WINDOW_REPLACE,
        window=WINDOW,
    )
    harness.seed_target(other, [])
    with pytest.raises(DponeError) as mismatch:
        harness.target.prepare(plan)
    assert codes(mismatch) == "mssql_native.target_schema_mismatch"


# -- unknown commit outcome and crashes ---------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["full", "window"])
def test_lost_commit_ack_is_reconciled_as_committed_and_never_republished(harness: TargetHarness, mode: str) -> None:
    plan = full_plan(harness) if mode == "full" else window_plan(harness)
    outside: Rows = []
    if mode == "window":
        outside, _ = _window_seed(harness, plan)
    new = rows_for(7, start=30)
    request = stage(harness, plan, [new])
    harness.faults.arm(Fault.LOST_ACK)
    with pytest.raises(DponeError) as unknown:
        harness.target.publish(plan, request)
    assert codes(unknown) == "mssql_native.target_publication_outcome_unknown"
    observed = harness.target.reconcile(plan)
    assert observed.state is PublicationState.COMMITTED
    assert observed.receipt is not None and observed.receipt.require_matches(request)
    with pytest.raises(DponeError) as again:
        harness.target.publish(plan, request)
    assert codes(again) == "mssql_native.target_publication_already_committed"
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, outside + new)


@pytest.mark.parametrize("fault", [Fault.CRASH_BEFORE_COMMIT, Fault.COMMIT_DROPPED])
@pytest.mark.parametrize("mode", ["full", "window"])
def test_failure_before_commit_is_absent_and_keeps_old_data(harness: TargetHarness, fault: Fault, mode: str) -> None:
    plan = full_plan(harness) if mode == "full" else window_plan(harness)
    if mode == "window":
        outside, inside = _window_seed(harness, plan)
        old = outside + inside
    else:
        old = rows_for(10, variant=3)
        harness.seed_target(plan, old)
    request = stage(harness, plan, [rows_for(4, start=60)])
    harness.faults.arm(fault)
    with pytest.raises((SimulatedCrash, DponeError)):
        harness.target.publish(plan, request)
    assert harness.target.reconcile(plan).state is PublicationState.ABSENT
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, old)
    # Absent is final: the staging is intact and the same invocation publishes once.
    assert harness.staging_exists(plan)
    assert harness.target.publish(plan, request).rows == 4


def test_crash_after_commit_is_reconciled_as_committed(harness: TargetHarness) -> None:
    plan = full_plan(harness)
    request = stage(harness, plan, [rows_for(3)])
    harness.faults.arm(Fault.CRASH_AFTER_COMMIT)
    with pytest.raises(SimulatedCrash):
        harness.target.publish(plan, request)
    assert harness.target.reconcile(plan).state is PublicationState.COMMITTED


@pytest.mark.parametrize("commit", [True, False])
def test_reconcile_never_answers_while_a_commit_is_in_flight(harness: TargetHarness, commit: bool) -> None:
    plan = full_plan(harness)
    request = stage(harness, plan, [rows_for(3)])
    harness.faults.arm(Fault.IN_FLIGHT)
    with pytest.raises(DponeError) as unknown:
        harness.target.publish(plan, request)
    assert codes(unknown) == "mssql_native.target_publication_outcome_unknown"
    for call in (harness.target.reconcile, harness.target.cleanup):
        with pytest.raises(DponeError) as waiting:
            call(plan)
        assert codes(waiting) == "mssql_native.target_publication_in_flight"
    harness.settle_in_flight(plan, commit=commit)
    expected = PublicationState.COMMITTED if commit else PublicationState.ABSENT
    assert harness.target.reconcile(plan).state is expected


# -- atomic visibility, cleanup -----------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["full", "window"])
def test_readers_see_the_old_rows_until_the_commit(harness: TargetHarness, mode: str) -> None:
    plan = full_plan(harness) if mode == "full" else window_plan(harness)
    if mode == "window":
        outside, inside = _window_seed(harness, plan)
        old = outside + inside
    else:
        outside, old = [], rows_for(10, variant=4)
        harness.seed_target(plan, old)
    new = rows_for(6, start=200)
    request = stage(harness, plan, [new])
    seen: list[tuple[int, str] | None] = []

    def read_concurrently() -> None:
        reader = threading.Thread(target=lambda: seen.append(_try_read(harness, plan)))
        reader.start()
        reader.join(timeout=0.5)  # a reader may wait on the publication's lock: it must not see a partial state

    harness.faults.before_next_commit(read_concurrently)
    harness.target.publish(plan, request)
    states = {digest_of(plan, old), digest_of(plan, outside + new)}
    assert all(observation in states for observation in seen if observation is not None)
    if mode == "window":
        assert seen == [digest_of(plan, old)]  # MVCC readers are not blocked by a window replace
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, outside + new)


def _try_read(harness: TargetHarness, plan: TargetPlan) -> tuple[int, str] | None:
    return digest_of(plan, harness.read_target(plan))


@pytest.mark.parametrize("mode", ["full", "window"])
def test_concurrent_readers_never_observe_a_partial_publication(harness: TargetHarness, mode: str) -> None:
    plan = full_plan(harness) if mode == "full" else window_plan(harness)
    if mode == "window":
        outside, inside = _window_seed(harness, plan)
    else:
        outside, inside = [], rows_for(30, variant=5)
        harness.seed_target(plan, inside)
    new = rows_for(40, start=300)
    request = stage(harness, plan, [new[:20], new[20:]])
    allowed = {digest_of(plan, outside + inside), digest_of(plan, outside + new)}
    stop = threading.Event()
    observations: list[tuple[int, str]] = []
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                observations.append(digest_of(plan, harness.read_target(plan)))
        except Exception as exc:  # noqa: BLE001 - recorded: any reader error fails the contract
            errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        harness.target.publish(plan, request)
        settled = len(observations)
        deadline = time.monotonic() + 5
        while len(observations) < settled + 2 and not errors and time.monotonic() < deadline:
            time.sleep(0.001)
    finally:
        stop.set()
        thread.join()
    assert not errors
    assert observations and set(observations) <= allowed
    assert observations[-1] == digest_of(plan, outside + new)


def test_cleanup_drops_only_the_invocations_staging(harness: TargetHarness) -> None:
    plan = full_plan(harness)
    other = full_plan(harness, invocation="inv-full-0002")
    harness.target.prepare(plan)
    harness.target.prepare(other)
    assert harness.target.cleanup(plan).dropped == (plan.staging_table,)
    assert harness.target.cleanup(plan).dropped == ()
    assert not harness.staging_exists(plan) and harness.staging_exists(other)
    with pytest.raises(DponeError) as gone:
        harness.target.load_chunk(plan, 0, rows_for(1))
    assert codes(gone) == "mssql_native.target_staging_missing"


def test_prepare_of_the_same_invocation_starts_from_empty_staging(harness: TargetHarness) -> None:
    plan = full_plan(harness)
    harness.target.prepare(plan)
    harness.target.load_chunk(plan, 0, rows_for(3))
    harness.target.prepare(plan)
    assert harness.staged_rows(plan, 0) == []
    request = stage(harness, plan, [rows_for(2)])
    assert harness.target.publish(plan, request).rows == 2


def _staged(plan: TargetPlan, rows: Rows) -> pa.Table:
    """The chunk as the route hands it over: a table in the stage schema of the admitted columns."""
    native = [map_type(c.name, c.source_type, implicit_utc=True) for c in plan.columns]
    return rows_table(rows, native)


def test_a_chunk_handed_over_as_the_stage_table_loads_and_verifies_like_its_rows(harness: TargetHarness) -> None:
    plan = full_plan(harness)
    harness.target.prepare(plan)
    rows = rows_for(9)
    assert harness.target.load_chunk(plan, 0, _staged(plan, rows)).rows_sent == 9
    harness.target.verify_chunk(plan, expectation(plan, 0, rows)).require_matched()


def test_a_stage_table_value_the_column_cannot_hold_is_refused_naming_the_column(harness: TargetHarness) -> None:
    plan = full_plan(harness)
    harness.target.prepare(plan)
    bad = [*rows_for(3), (*make_row(3)[:4], b"\xff\xfe not utf-8", *make_row(3)[5:])]
    with pytest.raises(DponeError) as refused:
        harness.target.load_chunk(plan, 0, _staged(plan, bad))
    assert codes(refused) == "mssql_native.target_value_invalid"
    assert "column label" in refused.value.detail
    assert harness.target.verify_chunk(plan, expectation(plan, 0, [])).matched
