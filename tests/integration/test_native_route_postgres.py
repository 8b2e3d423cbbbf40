"""The route end to end into a real PostgreSQL: fidelity, windows, and the recovery matrix of seed 003.

Source: the real ClickHouse engine (in-process). Stage and journal: file:// under tmp. Target: the PostgreSQL adapter
on a throwaway server, through the bridge. "Source-free" is proved by the connector's count and by a client factory
that fails the test if it is called at all.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.native_chunk import RelationRef
from airflow_provider_dpone.contracts.native_window import UtcWindow
from tests.fakes.transfer_target import Fault
from tests.fixtures.target_harness import PostgresHarness
from tests.integration.native_chdb import admin, db
from tests.integration.native_route_chdb import read_rows
from tests.integration.native_route_pg import Crash, PgRoute, crash_at, events_table

__all__ = ["admin", "db"]  # fixtures shared through tests/integration/native_chdb.py

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

JANUARY = UtcWindow.of("ts", dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 2, 1, tzinfo=dt.UTC))


@pytest.fixture
def harness(postgres_server):
    created = PostgresHarness(postgres_server.dsn)
    yield created
    created.close()


@pytest.fixture
def events(admin, db) -> RelationRef:
    return events_table(admin, db)


# ---------------------------------------------------------------------------------------------- fidelity --
def test_full_refresh_preserves_raw_multiplicity_not_final(admin, db, events, harness, tmp_path) -> None:
    route = PgRoute(tmp_path, events, harness)
    result = route.run()
    raw = read_rows(admin, f"SELECT * FROM {db}.events")
    final = read_rows(admin, f"SELECT * FROM {db}.events FINAL")
    published = route.target_rows()
    assert published == raw and result.rows == sum(raw.values()) == 7
    assert published != final and sum(final.values()) == 3
    assert published[(1, 2, 0, b"b", "2026-01-03T00:00:00+00:00", Decimal(2))] == 2
    assert route.last_connections == 1 and len(route.streams) == 1 and "FINAL" not in route.streams[0]
    assert route.receipts() == 1 and result.endpoint_authority_agreement is True
    assert result.stage_retired and not (tmp_path / route.operation / "stage" / result.invocation_id).exists()


def test_typed_boundaries_arrive_exactly(admin, db, harness, tmp_path) -> None:
    admin.command(
        f"CREATE TABLE {db}.typed (i Int64, u UInt64, d Decimal(38, 10), n Nullable(Decimal(9, 2)), "
        "t DateTime64(6, 'UTC'), s String, f FixedString(4), day Date32, b Bool, id UUID, v UInt64) "
        "ENGINE = ReplacingMergeTree(v) ORDER BY i"
    )
    admin.command(
        f"INSERT INTO {db}.typed VALUES "
        "(-9223372036854775808, 18446744073709551615, -9999999999999999999999999999.9999999999, NULL, "
        "'1900-01-01 00:00:00.000001', unhex('ff00fe'), 'ab', '1900-01-01', true, "
        "'00000000-0000-0000-0000-000000000001', 1)"
    )
    admin.command(
        f"INSERT INTO {db}.typed VALUES (9223372036854775807, 0, 0.0000000001, -9999999.99, "
        "'2299-12-31 23:59:59.999999', '', unhex('00000000'), '2299-12-31', false, "
        "'ffffffff-ffff-ffff-ffff-ffffffffffff', 1)"
    )
    route = PgRoute(tmp_path, RelationRef(database=db, table="typed"), harness, table="typed_copy")
    result = route.run()
    published = route.target_rows()
    assert published == read_rows(admin, f"SELECT * FROM {db}.typed") and result.rows == 2
    assert any(row[5] == b"\xff\x00\xfe" for row in published), "invalid UTF-8 survives as bytes"


def test_partition_replace_replaces_only_its_window(admin, db, events, harness, tmp_path) -> None:
    PgRoute(tmp_path / "full", events, harness, operation="a" * 32).run()
    admin.command(f"INSERT INTO {db}.events VALUES (5, 1, 0, 'late', '2026-01-20 00:00:00', 5)")
    admin.command(f"INSERT INTO {db}.events VALUES (6, 1, 0, 'feb', '2026-02-20 00:00:00', 6)")
    route = PgRoute(tmp_path / "window", events, harness, operation="b" * 32, window=JANUARY)
    result = route.run()
    inside = read_rows(admin, f"SELECT * FROM {db}.events WHERE ts < '2026-02-01 00:00:00'")
    before_feb = read_rows(admin, f"SELECT * FROM {db}.events WHERE ts >= '2026-02-01 00:00:00' AND id != 6")
    assert result.rows == sum(inside.values()) == 6
    assert route.target_rows() == inside + before_feb, "February keeps the full refresh's rows, not the new one"


def test_empty_window_clears_the_target_window(admin, db, events, harness, tmp_path) -> None:
    PgRoute(tmp_path / "full", events, harness, operation="a" * 32).run()
    admin.command(f"ALTER TABLE {db}.events DELETE WHERE ts < '2026-02-01 00:00:00' SETTINGS mutations_sync = 2")
    route = PgRoute(tmp_path / "window", events, harness, operation="b" * 32, window=JANUARY)
    result = route.run()
    assert result.rows == 0
    assert route.target_rows() == read_rows(admin, f"SELECT * FROM {db}.events")
    assert sum(route.target_rows().values()) == 2


# ------------------------------------------------------------------------------------------------ recovery --
def test_crash_before_eof_settles_and_reextracts_as_a_new_invocation(admin, db, events, harness, tmp_path) -> None:
    route = PgRoute(tmp_path, events, harness)
    with pytest.raises(Crash):
        route.run(crash_at("chunk_sealed", occurrence=2))
    first = route.journal_kinds()
    assert "stage_complete" not in first and first.count("chunk") == 2
    with pytest.raises(DponeError) as held:
        route.run()
    assert held.value.code == "mssql_native.custody_held", "a live lease of the crashed writer is held custody"
    route.expire_leases()
    result = route.run()
    assert len(result.settled_invocations) == 1 and result.settled_invocations[0] != result.invocation_id
    assert route.last_connections == 1, "re-extraction opens the source once, as a new invocation"
    assert route.target_rows() == read_rows(admin, f"SELECT * FROM {db}.events")
    assert "invocation_settled" in route.journal_kinds()


def test_failure_before_eof_is_settled_at_once_as_reextract_required(admin, db, events, harness, tmp_path) -> None:
    route = PgRoute(tmp_path, events, harness)

    changed: list[bool] = []

    def add_column(point: str) -> None:
        if point == "chunk_sealed" and not changed:
            changed.append(True)
            admin.command(f"ALTER TABLE {db}.events ADD COLUMN extra UInt8")

    with pytest.raises(DponeError) as failed:
        route.run(add_column)
    assert failed.value.code == "mssql_native.source_snapshot_drift"
    assert route.journal_kinds()[-2:] == ["invocation_settled", "lease"]
    admin.command(f"ALTER TABLE {db}.events DROP COLUMN extra")
    result = route.run()
    assert len(result.settled_invocations) == 0 and result.rows == 7, "the settled invocation needs no fencing"


@pytest.mark.parametrize("point", ["stage_complete", "prepared", "loaded", "publish_intent"])
def test_crash_after_eof_completes_from_the_stage_without_the_source(
    admin, db, events, harness, tmp_path, point
) -> None:
    route = PgRoute(tmp_path, events, harness)
    with pytest.raises(Crash):
        route.run(crash_at(point))
    route.expire_leases()
    route.deny_source = True
    if point == "publish_intent":
        with pytest.raises(DponeError) as absent:
            route.run()
        assert absent.value.code == "mssql_native.publication_absent", "an intent without a receipt is absent"
        assert route.last_connections == 0
    result = route.run()
    assert route.last_connections == 0 and result.source_connections == 0
    assert route.target_rows() == read_rows(admin, f"SELECT * FROM {db}.events") and route.receipts() == 1


def test_lost_commit_acknowledgement_is_reconciled_by_the_receipt(admin, db, events, harness, tmp_path) -> None:
    route = PgRoute(tmp_path, events, harness)
    result = route.run(lambda point: harness.faults.arm(Fault.LOST_ACK) if point == "publish_intent" else None)
    kinds = route.journal_kinds()
    assert kinds.count("publish_intent") == 1 and kinds.count("published") == 1 and "publish_absent" not in kinds
    assert route.receipts() == 1 and result.rows == 7
    assert route.target_rows() == read_rows(admin, f"SELECT * FROM {db}.events")


def test_crash_after_commit_is_reconciled_source_free_never_republished(admin, db, events, harness, tmp_path) -> None:
    route = PgRoute(tmp_path, events, harness)
    with pytest.raises(Crash):
        route.run(crash_at("publish_acknowledged"))
    admin.command(f"INSERT INTO {db}.events VALUES (7, 1, 0, 'after', '2026-01-09 00:00:00', 7)")
    route.expire_leases()
    route.deny_source = True
    result = route.run()
    assert route.journal_kinds().count("publish_intent") == 1 and route.receipts() == 1
    assert result.rows == 7 and sum(route.target_rows().values()) == 7, "the sealed snapshot, not the new row"


def test_commit_dropped_is_proven_absent_then_republished_source_free(admin, db, events, harness, tmp_path) -> None:
    route = PgRoute(tmp_path, events, harness)
    with pytest.raises(DponeError) as absent:
        route.run(lambda point: harness.faults.arm(Fault.COMMIT_DROPPED) if point == "publish_intent" else None)
    assert absent.value.code == "mssql_native.publication_absent" and route.receipts() == 0
    route.deny_source = True
    result = route.run()
    assert result.rows == 7 and route.receipts() == 1 and route.last_connections == 0


def test_in_flight_commit_holds_the_run_and_blocks_other_operations(admin, db, events, harness, tmp_path) -> None:
    route = PgRoute(tmp_path, events, harness)
    with pytest.raises(DponeError) as held:
        route.run(lambda point: harness.faults.arm(Fault.IN_FLIGHT) if point == "publish_intent" else None)
    assert held.value.code == "mssql_native.target_publication_in_flight"
    other = PgRoute(tmp_path, events, harness, operation="c" * 32, clock=route.clock)
    route.expire_leases()
    with pytest.raises(DponeError) as blocked:
        other.run()
    assert blocked.value.code == "mssql_native.custody_held" and other.last_connections == 0
    harness.settle_in_flight(None, commit=True)  # the held COMMIT completes
    route.deny_source = True
    result = route.run()
    assert result.rows == 7 and route.receipts() == 1 and "publish_absent" not in route.journal_kinds()
    other.run()
    assert route.receipts() == 2, "after reconciliation the other operation may publish"


def test_overlapping_operations_on_one_target_never_interleave(admin, db, events, harness, tmp_path) -> None:
    first = PgRoute(tmp_path, events, harness, operation="a" * 32)
    second = PgRoute(tmp_path, events, harness, operation="b" * 32, clock=first.clock)
    attempts: list[str] = []

    def overlap(point: str) -> None:
        if point == "chunk_sealed" and not attempts:
            with pytest.raises(DponeError) as blocked:
                second.run()
            attempts.append(blocked.value.code)

    result = first.run(overlap)
    assert attempts == ["mssql_native.custody_held"] and second.last_connections == 0
    assert result.rows == 7
    assert second.run().rows == 7 and first.receipts() == 2
