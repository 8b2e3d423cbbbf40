"""The transfer-target contract: one scenario suite, the same outcomes on every backend.

Backends: the in-memory fake, real PostgreSQL (a throwaway cluster), and the SQL Server adapter (both import backends)
over the recording DB-API fake, which cannot be a real server here; its call sequences are asserted separately in
tests/transfer/targets/test_mssql_target_calls.py.
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

from airflow_provider_dpone.core.columns import NativeColumn
from airflow_provider_dpone.core.errors import DponeError, lookup
from airflow_provider_dpone.core.manifest.transfer import StringMapping
from airflow_provider_dpone.core.manifest.transfer_options import ImportBackend
from airflow_provider_dpone.core.typed_digest import MultisetDigest
from airflow_provider_dpone.transfer.ports import TargetInvocation, TransferTarget
from airflow_provider_dpone.transfer.route.schema_admission import map_type
from airflow_provider_dpone.transfer.targets.postgres.target import COPY_BATCH_ROWS
from airflow_provider_dpone.transfer.values.arrow_chunk import rows_table
from airflow_provider_dpone.transfer.values.target import PublicationMode, TargetPlan
from airflow_provider_dpone.transfer.values.target_receipts import ChunkEvidence
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow
from tests.support.fakes.transfer_target import Fault, SimulatedCrash
from tests.support.fixtures.target_harness import (
    FakeHarness,
    MsSqlHarness,
    PostgresHarness,
    Rows,
    TargetHarness,
    plan_of,
    sealed_chunk,
)

pytestmark = pytest.mark.contract

UTC = dt.UTC
DAY = dt.datetime(2026, 3, 1, tzinfo=UTC)
OPERATION = "0" * 32


def native(*columns: tuple[str, str]) -> tuple[NativeColumn, ...]:
    return tuple(map_type(name, type_text, implicit_utc=True) for name, type_text in columns)


COLUMNS = native(
    ("id", "UInt64"),
    ("k", "Int32"),
    ("amount", "Nullable(Decimal(18, 4))"),
    ("payload", "String"),
    ("label", "LowCardinality(String)"),
    ("ts", "DateTime64(3, 'UTC')"),
    ("d", "Date"),
    ("u", "Nullable(UUID)"),
    ("flag", "Bool"),
    ("micros", "Nullable(DateTime64(6, 'UTC'))"),
)
WINDOW = UtcWindow.of("ts", DAY, DAY + dt.timedelta(days=1))


def make_row(i: int, *, day: dt.datetime = DAY, variant: int = 0) -> tuple[object, ...]:
    """Deterministic rows with boundary values: UInt64 max, NULLs, empty and non-UTF-8 bytes, sub-second times."""
    ts = day + dt.timedelta(seconds=i * 7, milliseconds=i % 1000)
    return (
        2**64 - 1 - i if i % 3 == 0 else i,
        (-1) ** i * i * 1000 + variant,
        None if i % 5 == 0 else Decimal(i).scaleb(-4) - Decimal("99999.9999") * (i % 2),
        bytes([i % 256, 0, 255]) if i % 4 else b"",
        f"label-{i % 7}-é".encode(),
        ts,
        ts.date(),
        None if i % 6 == 0 else uuid.UUID(int=i + 1),
        i % 2 == 0,
        None if i % 7 == 0 else ts + dt.timedelta(microseconds=i * 37 + 1),
    )


def rows_for(count: int, start: int = 0, **kwargs: object) -> Rows:
    return [make_row(i, **kwargs) for i in range(start, start + count)]  # type: ignore[arg-type]


def chunk(rows: Rows, columns: tuple[NativeColumn, ...] = COLUMNS) -> pa.Table:
    """The chunk as the route hands it over: a table in the stage schema of the admitted columns."""
    return rows_table(rows, columns)


def evidence(ordinal: int, rows: Rows, columns: tuple[NativeColumn, ...] = COLUMNS) -> ChunkEvidence:
    acc = MultisetDigest([c.typed for c in columns])
    acc.add_rows(rows)
    return ChunkEvidence(ordinal=ordinal, rows=acc.rows, typed_sum=f"{acc.total:064x}")


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


def full(invocation: str = "inv-full-0001") -> TargetInvocation:
    return TargetInvocation(OPERATION, invocation, COLUMNS, None)


def windowed(invocation: str = "inv-window-0001") -> TargetInvocation:
    return TargetInvocation(OPERATION, invocation, COLUMNS, WINDOW)


def stage(h: TargetHarness, inv: TargetInvocation, chunks: list[Rows]) -> list[ChunkEvidence]:
    """Prepare, load (sealed chunks, as the route loads them from its stage) and verify every chunk; return the
    chunks to publish."""
    h.target.prepare(inv)
    expected = [evidence(ordinal, rows) for ordinal, rows in enumerate(chunks)]
    for ordinal, rows in enumerate(chunks):
        h.target.load_chunk(inv, ordinal, sealed_chunk(inv, ordinal, rows))
        assert h.target.verify_chunk(inv, expected[ordinal]) == expected[ordinal]
    return expected


def codes(excinfo: pytest.ExceptionInfo[DponeError]) -> str:
    return excinfo.value.code


# -- plan, staging and chunk verification ------------------------------------------------------------------------
def test_admit_refuses_a_window_on_a_non_temporal_column_before_any_io(harness: TargetHarness) -> None:
    bad = TargetInvocation(OPERATION, "inv-bad-00001", COLUMNS, UtcWindow.of("id", WINDOW.start, WINDOW.end))
    with pytest.raises(DponeError) as refused:
        harness.target.admit(bad)
    assert codes(refused) == "native_transfer.target_plan_invalid"
    harness.target.admit(windowed())
    assert plan_of(harness, windowed()).mode is PublicationMode.WINDOW_REPLACE
    assert plan_of(harness, full()).mode is PublicationMode.FULL_REFRESH


def test_full_refresh_publishes_exactly_the_verified_rows(harness: TargetHarness) -> None:
    inv, plan = full(), plan_of(harness, full())
    assert harness.target.reconcile(inv) is None
    chunks = [rows_for(40), rows_for(25, start=40), []]
    receipt = harness.target.publish(inv, stage(harness, inv, chunks))
    assert receipt.rows == 65 and receipt.publication_id == plan.publication_id
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, chunks[0] + chunks[1])
    assert receipt.digest == digest_of(plan, chunks[0] + chunks[1])[1]
    assert not harness.staging_exists(plan)
    assert harness.target.reconcile(inv) == receipt
    with pytest.raises(DponeError) as again:
        harness.target.publish(inv, [evidence(0, chunks[0]), evidence(1, chunks[1]), evidence(2, [])])
    assert codes(again) == "native_transfer.target_publication_already_committed"
    with pytest.raises(DponeError) as late_prepare:
        harness.target.prepare(inv)
    assert codes(late_prepare) == "native_transfer.target_publication_already_committed"


def test_full_refresh_replaces_an_existing_table(harness: TargetHarness) -> None:
    inv, plan = full(), plan_of(harness, full())
    harness.seed_target(plan, rows_for(10, variant=1))
    new = rows_for(3, start=100)
    harness.target.publish(inv, stage(harness, inv, [new]))
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, new)


@pytest.mark.parametrize("fault", ["lost_row", "duplicated_row"])
def test_verification_catches_a_lost_or_duplicated_row_in_transit(harness: TargetHarness, fault: str) -> None:
    inv = full()
    harness.target.prepare(inv)
    source = rows_for(12)
    delivered = source[:-1] if fault == "lost_row" else [*source, source[3]]
    harness.target.load_chunk(inv, 0, chunk(delivered))
    assert harness.target.verify_chunk(inv, evidence(0, source)) == evidence(0, delivered)
    harness.target.prepare(inv)  # a failed verification is repaired from empty staging, never in place
    harness.target.load_chunk(inv, 0, chunk(source))
    assert harness.target.verify_chunk(inv, evidence(0, source)) == evidence(0, source)


@pytest.mark.parametrize("action", ["drop_one", "duplicate_one"])
def test_verification_reads_back_what_the_target_stored(harness: TargetHarness, action: str) -> None:
    inv = full()
    harness.target.prepare(inv)
    rows = rows_for(9)
    harness.target.load_chunk(inv, 0, chunk(rows))
    assert harness.target.verify_chunk(inv, evidence(0, rows)) == evidence(0, rows)
    harness.tamper(plan_of(harness, inv), 0, action)
    assert harness.target.verify_chunk(inv, evidence(0, rows)) != evidence(0, rows)


@pytest.mark.parametrize("action", ["drop_one", "duplicate_one"])
def test_a_sealed_chunk_whose_stored_rows_changed_is_verified_as_stored(harness: TargetHarness, action: str) -> None:
    """Read-back equality refuses the changed rows; the typed digest then reports what the target stores."""
    inv = full()
    harness.target.prepare(inv)
    rows = rows_for(9)
    harness.target.load_chunk(inv, 0, sealed_chunk(inv, 0, rows))
    harness.tamper(plan_of(harness, inv), 0, action)
    observed = harness.target.verify_chunk(inv, evidence(0, rows))
    assert observed.rows == (8 if action == "drop_one" else 10) and observed != evidence(0, rows)


def test_a_chunk_of_several_copy_batches_loads_verifies_and_publishes_exactly(harness: TargetHarness) -> None:
    """A sealed chunk larger than one COPY batch (PostgreSQL feeds its COPY in batches) is stored whole, in order."""
    inv, plan = full(), plan_of(harness, full())
    rows = rows_for(2 * COPY_BATCH_ROWS + 5)
    harness.target.prepare(inv)
    harness.target.load_chunk(inv, 0, sealed_chunk(inv, 0, rows))
    assert harness.target.verify_chunk(inv, evidence(0, rows)) == evidence(0, rows)
    assert digest_of(plan, harness.staged_rows(plan, 0)) == digest_of(plan, rows)
    receipt = harness.target.publish(inv, [evidence(0, rows)])
    assert receipt.rows == len(rows)
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, rows)


def test_verification_distinguishes_a_changed_value(harness: TargetHarness) -> None:
    inv = full()
    harness.target.prepare(inv)
    rows = rows_for(5)
    changed = [*rows[:-1], make_row(4, variant=1)]
    harness.target.load_chunk(inv, 0, chunk(changed))
    observed = harness.target.verify_chunk(inv, evidence(0, rows))
    assert observed.rows == 5 and observed == evidence(0, changed) != evidence(0, rows)


def test_a_staged_ordinal_is_never_loaded_twice(harness: TargetHarness) -> None:
    inv = full()
    harness.target.prepare(inv)
    harness.target.load_chunk(inv, 0, chunk(rows_for(3)))
    with pytest.raises(DponeError) as twice:
        harness.target.load_chunk(inv, 0, chunk(rows_for(3)))
    assert codes(twice) == "native_transfer.target_chunk_already_loaded"
    assert harness.target.verify_chunk(inv, evidence(0, rows_for(3))) == evidence(0, rows_for(3))


def test_load_with_a_lost_ack_is_resolved_by_verification(harness: TargetHarness) -> None:
    inv = full()
    harness.target.prepare(inv)
    rows = rows_for(6)
    harness.faults.arm(Fault.LOST_ACK)
    with pytest.raises(DponeError) as unknown:
        harness.target.load_chunk(inv, 0, chunk(rows))
    assert codes(unknown) == "native_transfer.target_load_failed"
    assert harness.target.verify_chunk(inv, evidence(0, rows)) == evidence(0, rows)


def test_load_whose_commit_never_arrived_leaves_no_rows(harness: TargetHarness) -> None:
    inv = full()
    harness.target.prepare(inv)
    rows = rows_for(6)
    harness.faults.arm(Fault.COMMIT_DROPPED)
    with pytest.raises(DponeError):
        harness.target.load_chunk(inv, 0, chunk(rows))
    assert harness.target.verify_chunk(inv, evidence(0, rows)).rows == 0
    harness.target.load_chunk(inv, 0, chunk(rows))
    assert harness.target.verify_chunk(inv, evidence(0, rows)) == evidence(0, rows)


def test_publish_refuses_staging_that_differs_from_the_request(harness: TargetHarness) -> None:
    inv, plan = full(), plan_of(harness, full())
    staged = stage(harness, inv, [rows_for(4), rows_for(4, start=4)])
    for wrong in ([*staged, evidence(2, rows_for(1, start=8))], staged[:1]):
        with pytest.raises(DponeError) as refused:
            harness.target.publish(inv, wrong)
        assert codes(refused) == "native_transfer.target_staging_incomplete"
    assert harness.target.reconcile(inv) is None
    assert harness.read_target(plan) is None


# -- string mapping -----------------------------------------------------------------------------------------------
TEXT_COLUMNS = native(("id", "UInt64"), ("label", "LowCardinality(String)"), ("note", "Nullable(String)"))


def test_text_mapping_stores_strings_as_text_and_verifies_them(harness: TargetHarness) -> None:
    target: TransferTarget = harness.bind("notes", StringMapping.TEXT)
    inv = TargetInvocation(OPERATION, "inv-text-0001", TEXT_COLUMNS, None)
    rows: Rows = [(1, "é", None), (2, "", "日本"), (3, "a\tb", "")]
    expected = evidence(0, rows, TEXT_COLUMNS)
    target.prepare(inv)
    target.load_chunk(inv, 0, chunk(rows, TEXT_COLUMNS))
    assert target.verify_chunk(inv, expected) == expected
    assert target.publish(inv, [expected]).rows == 3
    plan = plan_of(harness, inv, "notes", StringMapping.TEXT)
    stored = harness.read_target(plan)
    assert digest_of(plan, stored) == digest_of(plan, rows)
    assert stored is not None and sorted(row[1] for row in stored) == ["", "a\tb", "é"]


def test_a_value_the_text_column_cannot_hold_is_refused_naming_the_column(harness: TargetHarness) -> None:
    target = harness.bind("notes", StringMapping.TEXT)
    inv = TargetInvocation(OPERATION, "inv-text-0002", TEXT_COLUMNS, None)
    target.prepare(inv)
    bad: Rows = [(1, "ok", None), (2, b"\xff\xfe not utf-8", None)]
    with pytest.raises(DponeError) as refused:
        target.load_chunk(inv, 0, chunk(bad, TEXT_COLUMNS))
    assert codes(refused) == "native_transfer.target_value_invalid"
    assert "column label" in refused.value.detail
    assert target.verify_chunk(inv, evidence(0, [], TEXT_COLUMNS)).rows == 0


# -- window replace -----------------------------------------------------------------------------------------------
def _window_seed(h: TargetHarness, plan: TargetPlan) -> tuple[Rows, Rows]:
    before = rows_for(5, day=DAY - dt.timedelta(days=1))
    inside = rows_for(6, variant=2)
    after = rows_for(4, day=DAY + dt.timedelta(days=1))
    h.seed_target(plan, [*before, *inside, *after])
    return [*before, *after], inside


def test_window_replace_touches_only_the_window(harness: TargetHarness) -> None:
    inv, plan = windowed(), plan_of(harness, windowed())
    outside, _old_inside = _window_seed(harness, plan)
    new = rows_for(8, start=50)
    harness.target.publish(inv, stage(harness, inv, [new[:5], new[5:]]))
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, outside + new)
    assert not harness.staging_exists(plan)


def test_window_replace_with_an_empty_replacement_clears_the_window(harness: TargetHarness) -> None:
    inv, plan = windowed(), plan_of(harness, windowed())
    outside, _ = _window_seed(harness, plan)
    receipt = harness.target.publish(inv, stage(harness, inv, []))
    assert receipt.rows == 0
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, outside)


def test_window_replace_refuses_staged_rows_outside_the_window(harness: TargetHarness) -> None:
    inv, plan = windowed(), plan_of(harness, windowed())
    outside, inside = _window_seed(harness, plan)
    stray = rows_for(2, day=DAY + dt.timedelta(days=1), variant=9)
    staged = stage(harness, inv, [rows_for(3), stray])
    with pytest.raises(DponeError) as refused:
        harness.target.publish(inv, staged)
    assert codes(refused) == "native_transfer.target_rows_outside_window"
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, outside + inside)
    assert harness.target.reconcile(inv) is None


def test_window_replace_needs_a_matching_target_table(harness: TargetHarness) -> None:
    inv = windowed()
    with pytest.raises(DponeError) as missing:
        harness.target.prepare(inv)
    assert codes(missing) == "native_transfer.target_relation_not_found"
    assert not lookup(codes(missing)).retryable, "terminal: a retry cannot create the table"
    other = native(*((c.name, c.source_type) for c in COLUMNS[:2]), ("amount", "Nullable(Decimal(18, 2))"))
    other_inv = TargetInvocation(OPERATION, "inv-window-0002", (*other, *COLUMNS[3:]), WINDOW)
    harness.seed_target(plan_of(harness, other_inv), [])
    with pytest.raises(DponeError) as mismatch:
        harness.target.prepare(inv)
    assert codes(mismatch) == "native_transfer.target_schema_mismatch"


# -- unknown commit outcome and crashes ---------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["full", "window"])
def test_lost_commit_ack_is_reconciled_as_committed_and_never_republished(harness: TargetHarness, mode: str) -> None:
    inv = full() if mode == "full" else windowed()
    plan = plan_of(harness, inv)
    outside: Rows = []
    if mode == "window":
        outside, _ = _window_seed(harness, plan)
    new = rows_for(7, start=30)
    staged = stage(harness, inv, [new])
    harness.faults.arm(Fault.LOST_ACK)
    with pytest.raises(DponeError) as unknown:
        harness.target.publish(inv, staged)
    assert codes(unknown) == "native_transfer.target_publication_outcome_unknown"
    receipt = harness.target.reconcile(inv)
    assert receipt is not None and (receipt.rows, receipt.digest) == digest_of(plan, new)
    with pytest.raises(DponeError) as again:
        harness.target.publish(inv, staged)
    assert codes(again) == "native_transfer.target_publication_already_committed"
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, outside + new)


@pytest.mark.parametrize("fault", [Fault.CRASH_BEFORE_COMMIT, Fault.COMMIT_DROPPED])
@pytest.mark.parametrize("mode", ["full", "window"])
def test_failure_before_commit_is_absent_and_keeps_old_data(harness: TargetHarness, fault: Fault, mode: str) -> None:
    inv = full() if mode == "full" else windowed()
    plan = plan_of(harness, inv)
    if mode == "window":
        outside, inside = _window_seed(harness, plan)
        old = outside + inside
    else:
        old = rows_for(10, variant=3)
        harness.seed_target(plan, old)
    staged = stage(harness, inv, [rows_for(4, start=60)])
    harness.faults.arm(fault)
    with pytest.raises((SimulatedCrash, DponeError)):
        harness.target.publish(inv, staged)
    assert harness.target.reconcile(inv) is None
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, old)
    # Absent is final: the staging is intact and the same invocation publishes once.
    assert harness.staging_exists(plan)
    assert harness.target.publish(inv, staged).rows == 4


def test_crash_after_commit_is_reconciled_as_committed(harness: TargetHarness) -> None:
    inv = full()
    staged = stage(harness, inv, [rows_for(3)])
    harness.faults.arm(Fault.CRASH_AFTER_COMMIT)
    with pytest.raises(SimulatedCrash):
        harness.target.publish(inv, staged)
    assert harness.target.reconcile(inv) is not None


@pytest.mark.parametrize("commit", [True, False])
def test_reconcile_never_answers_while_a_commit_is_in_flight(harness: TargetHarness, commit: bool) -> None:
    inv = full()
    staged = stage(harness, inv, [rows_for(3)])
    harness.faults.arm(Fault.IN_FLIGHT)
    with pytest.raises(DponeError) as unknown:
        harness.target.publish(inv, staged)
    assert codes(unknown) == "native_transfer.target_publication_outcome_unknown"
    for call in (harness.target.reconcile, harness.target.cleanup):
        with pytest.raises(DponeError) as waiting:
            call(inv)
        assert codes(waiting) == "native_transfer.target_publication_in_flight"
    harness.settle_in_flight(plan_of(harness, inv), commit=commit)
    assert (harness.target.reconcile(inv) is not None) is commit


def test_a_crash_at_prepare_commit_leaves_no_staging_and_prepare_starts_over(harness: TargetHarness) -> None:
    inv, plan = full(), plan_of(harness, full())
    harness.faults.arm(Fault.CRASH_BEFORE_COMMIT)
    with pytest.raises(SimulatedCrash):
        harness.target.prepare(inv)
    assert not harness.staging_exists(plan)
    assert harness.target.publish(inv, stage(harness, inv, [rows_for(2)])).rows == 2


# -- atomic visibility, cleanup -----------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["full", "window"])
def test_readers_see_the_old_rows_until_the_commit(harness: TargetHarness, mode: str) -> None:
    inv = full() if mode == "full" else windowed()
    plan = plan_of(harness, inv)
    if mode == "window":
        outside, inside = _window_seed(harness, plan)
        old = outside + inside
    else:
        outside, old = [], rows_for(10, variant=4)
        harness.seed_target(plan, old)
    new = rows_for(6, start=200)
    staged = stage(harness, inv, [new])
    seen: list[tuple[int, str] | None] = []

    def read_concurrently() -> None:
        reader = threading.Thread(target=lambda: seen.append(_try_read(harness, plan)))
        reader.start()
        reader.join(timeout=0.5)  # a reader may wait on the publication's lock: it must not see a partial state

    harness.faults.before_next_commit(read_concurrently)
    harness.target.publish(inv, staged)
    states = {digest_of(plan, old), digest_of(plan, outside + new)}
    assert all(observation in states for observation in seen if observation is not None)
    if mode == "window":
        assert seen == [digest_of(plan, old)]  # MVCC readers are not blocked by a window replace
    assert digest_of(plan, harness.read_target(plan)) == digest_of(plan, outside + new)


def _try_read(harness: TargetHarness, plan: TargetPlan) -> tuple[int, str] | None:
    return digest_of(plan, harness.read_target(plan))


@pytest.mark.parametrize("mode", ["full", "window"])
def test_concurrent_readers_never_observe_a_partial_publication(harness: TargetHarness, mode: str) -> None:
    inv = full() if mode == "full" else windowed()
    plan = plan_of(harness, inv)
    if mode == "window":
        outside, inside = _window_seed(harness, plan)
    else:
        outside, inside = [], rows_for(30, variant=5)
        harness.seed_target(plan, inside)
    new = rows_for(40, start=300)
    staged = stage(harness, inv, [new[:20], new[20:]])
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
        harness.target.publish(inv, staged)
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
    inv, other = full(), full(invocation="inv-full-0002")
    harness.target.prepare(inv)
    harness.target.prepare(other)
    harness.target.cleanup(inv)
    harness.target.cleanup(inv)
    assert not harness.staging_exists(plan_of(harness, inv)) and harness.staging_exists(plan_of(harness, other))
    with pytest.raises(DponeError) as gone:
        harness.target.load_chunk(inv, 0, chunk(rows_for(1)))
    assert codes(gone) == "native_transfer.target_staging_missing"


def test_prepare_of_the_same_invocation_starts_from_empty_staging(harness: TargetHarness) -> None:
    inv = full()
    harness.target.prepare(inv)
    harness.target.load_chunk(inv, 0, chunk(rows_for(3)))
    harness.target.prepare(inv)
    assert harness.staged_rows(plan_of(harness, inv), 0) == []
    assert harness.target.publish(inv, stage(harness, inv, [rows_for(2)])).rows == 2
