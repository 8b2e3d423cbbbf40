"""The raw-row snapshot route on the real ClickHouse engine (chdb), end to end into a fake target.

Deterministic synchronization only: a checkpoint of the route runs DDL/OPTIMIZE/INSERT at a named point (after
preflight and before the SELECT, after the first block, ...); nothing sleeps.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal

import numpy as np
import pytest

from airflow_provider_dpone.core.alerts import SOURCE_DRIFT_OBSERVED
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.route.physical import offset_hashes
from airflow_provider_dpone.transfer.route.schema_admission import map_type
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.raw_snapshot_physical import offset_hash
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow
from tests.support.fakes.transfer_target import Fault, SimulatedCrash
from tests.support.transfer import native_chdb
from tests.support.transfer.native_chdb import admin, db
from tests.support.transfer.native_route_chdb import OPERATION, ChdbRoute, multiset, read_rows

__all__ = ["admin", "db"]  # fixtures shared through tests/support/transfer/native_chdb.py

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

EVENTS = (
    "(id UInt64, ver UInt64, is_deleted UInt8, payload Nullable(String), ts DateTime64(3, 'UTC'), "
    "amount Nullable(Decimal(18, 4)))"
)


def events_table(admin, db: str, *, partition: str = "toYYYYMM(ts)", settings: str = "") -> RelationRef:
    admin.command(
        f"CREATE TABLE {db}.events {EVENTS} ENGINE = ReplacingMergeTree(ver, is_deleted) "
        f"PARTITION BY {partition} ORDER BY id {settings}"
    )
    for batch in (
        "(1, 1, 0, 'a', '2026-01-01 00:00:00.001', 1.5), (2, 1, 0, NULL, '2026-01-02 00:00:00', 0)",
        "(1, 2, 0, 'b', '2026-01-03 00:00:00', 2), (3, 1, 0, '', '2026-01-04 00:00:00', NULL)",
        "(1, 2, 0, 'b', '2026-01-03 00:00:00', 2), (4, 1, 0, '0', '2026-02-05 00:00:00', -0.0001)",
        "(2, 2, 1, NULL, '2026-02-06 00:00:00', 0)",
    ):
        admin.command(f"INSERT INTO {db}.events VALUES {batch}")
    return RelationRef(database=db, table="events")


def seed_target(route: ChdbRoute, admin, db: str, rows: list[tuple[object, ...]]) -> None:
    """Create the target table with the source's admitted columns, holding ``rows``."""
    described = admin.query(f"DESCRIBE TABLE {db}.events").result_rows
    route.target.seed([map_type(str(row[0]), str(row[1]), implicit_utc=True) for row in described], rows)


def test_raw_rows_keep_duplicates_versions_and_delete_markers(admin, db, tmp_path) -> None:
    relation = events_table(admin, db)
    route = ChdbRoute(tmp_path, relation)
    result, connections = route.run(chunk_rows=2)
    raw = read_rows(admin, f"SELECT * FROM {db}.events")
    final = read_rows(admin, f"SELECT * FROM {db}.events FINAL")
    published = multiset(route.target.rows())
    assert published == raw and sum(published.values()) == result.rows == 7
    assert published != final and sum(final.values()) == 3
    duplicate = (1, 2, 0, b"b", "2026-01-03T00:00:00+00:00", Decimal(2))
    assert published[duplicate] == 2, "identical rows of separate inserts keep their multiplicity"
    assert any(row[2] == 1 for row in published), "delete markers are plain rows in raw mode"
    assert {row[3] for row in published} >= {None, b"", b"0"}
    assert connections == 1 and len(route.streams) == 1
    select = route.streams[0]
    for forbidden in ("FINAL", "ORDER BY", "GROUP BY", "LIMIT", "OFFSET", "SAMPLE"):
        assert forbidden not in select
    assert result.endpoint_authority_agreement is True


def test_typed_boundaries_round_trip_exactly(admin, db, tmp_path) -> None:
    admin.command(
        f"CREATE TABLE {db}.typed (i Int64, u UInt64, d Decimal(38, 10), n Nullable(Decimal(9, 2)), "
        "t DateTime64(6, 'UTC'), s String, f FixedString(4), day Date32, b Bool, id UUID, v UInt64) "
        "ENGINE = ReplacingMergeTree(v) ORDER BY i"
    )
    big = "x" * 1_000_000
    admin.command(
        f"INSERT INTO {db}.typed VALUES "
        "(-9223372036854775808, 18446744073709551615, -9999999999999999999999999999.9999999999, NULL, "
        "'1900-01-01 00:00:00.000001', unhex('ff00fe'), 'ab', '1900-01-01', true, "
        "'00000000-0000-0000-0000-000000000001', 1)"
    )
    admin.command(
        f"INSERT INTO {db}.typed VALUES (9223372036854775807, 0, 0.0000000001, -9999999.99, "
        f"'2299-12-31 23:59:59.999999', '{big}', unhex('00000000'), '2299-12-31', false, "
        "'ffffffff-ffff-ffff-ffff-ffffffffffff', 1)"
    )
    route = ChdbRoute(tmp_path, RelationRef(database=db, table="typed"))
    result, _ = route.run()
    assert multiset(route.target.rows()) == read_rows(admin, f"SELECT * FROM {db}.typed")
    assert result.rows == 2
    extreme = Decimal("-9999999999999999999999999999.9999999999")
    assert any(row[2] == extreme and row[2].as_tuple() == extreme.as_tuple() for row in route.target.rows())


def test_window_is_half_open_and_profiles_only_its_partitions(admin, db, tmp_path) -> None:
    relation = events_table(admin, db)
    admin.command(f"INSERT INTO {db}.events VALUES (9, 1, 0, 'end', '2026-02-01 00:00:00', 0)")
    admin.command(f"INSERT INTO {db}.events VALUES (8, 1, 0, 'last', '2026-01-31 23:59:59.999', 0)")
    window = UtcWindow.of(
        "ts", dt.datetime(2026, 1, 1, 0, 0, 0, 1000, tzinfo=dt.UTC), dt.datetime(2026, 2, 1, tzinfo=dt.UTC)
    )
    route = ChdbRoute(tmp_path, relation, window=window)
    seed_target(route, admin, db, [])  # window replace writes into an existing table
    result, _ = route.run()
    expected = read_rows(
        admin, f"SELECT * FROM {db}.events WHERE ts >= '2026-01-01 00:00:00.001' AND ts < '2026-02-01 00:00:00'"
    )
    assert multiset(route.target.rows()) == expected and result.rows == 6
    evidence = json.loads(
        (tmp_path / OPERATION / "evidence" / result.invocation_id / "source_physical.json").read_text()
    )
    assert evidence["before"]["partition_ids"] == ["202601"]
    assert {part["partition_id"] for part in evidence["before"]["parts"]} == {"202601"}


def test_empty_window_seals_zero_rows_and_publishes_an_empty_replacement(admin, db, tmp_path) -> None:
    relation = events_table(admin, db)
    window = UtcWindow.of("ts", dt.datetime(2027, 1, 1, tzinfo=dt.UTC), dt.datetime(2027, 1, 2, tzinfo=dt.UTC))
    route = ChdbRoute(tmp_path, relation, window=window)
    seed_target(route, admin, db, [(77, 1, 0, b"outside", dt.datetime(2020, 1, 1, tzinfo=dt.UTC), None)])
    result, _ = route.run()
    assert result.rows == 0 and result.endpoint_authority_agreement is True
    assert route.target.rows() == [(77, 1, 0, b"outside", dt.datetime(2020, 1, 1, tzinfo=dt.UTC), None)]


def test_lightweight_deletes_and_patch_parts_are_query_visible(admin, db, tmp_path) -> None:
    relation = events_table(
        admin, db, settings="SETTINGS enable_block_number_column = 1, enable_block_offset_column = 1"
    )
    admin.command(f"DELETE FROM {db}.events WHERE id = 3")
    admin.command(f"UPDATE {db}.events SET payload = 'patched' WHERE id = 4")
    route = ChdbRoute(tmp_path, relation)
    result, _ = route.run()
    published = multiset(route.target.rows())
    assert published == read_rows(admin, f"SELECT * FROM {db}.events")
    assert not any(row[0] == 3 for row in published) and result.rows == 6
    assert any(row[0] == 4 and row[3] == b"patched" for row in published)
    evidence = json.loads(
        (tmp_path / OPERATION / "evidence" / result.invocation_id / "source_physical.json").read_text()
    )
    kinds = {part["kind"] for part in evidence["before"]["parts"]}
    assert kinds == {"base", "patch"}
    assert any(part["has_lightweight_delete"] for part in evidence["before"]["parts"])


def test_provenance_is_stripped_before_stage_and_target(admin, db, tmp_path) -> None:
    relation = events_table(admin, db)
    route = ChdbRoute(tmp_path, relation)
    result, _ = route.run()
    assert "_part" in route.streams[0] and "_part_offset" in route.streams[0]
    assert all(len(row) == 6 for row in route.target.rows())
    journal = b"".join(p.read_bytes() for p in sorted((tmp_path / OPERATION / "journal").iterdir()))
    assert b'"_part"' not in journal and b'"_part_offset"' not in journal and b"202601_" not in journal
    evidence = json.loads(
        (tmp_path / OPERATION / "evidence" / result.invocation_id / "source_physical.json").read_text()
    )
    assert sum(entry["rows"] for entry in evidence["coverage"]) == result.rows


def test_the_offset_hash_is_the_engines_int_hash64(admin) -> None:
    """The worker's coverage hash and the server's count of the SELECT agree only if they are the same function."""
    offsets = [0, 1, 2, 5, 8, 4095, 8192, 2**31 - 1, 2**32, 2**62 + 3, 2**64 - 1]
    engine = admin.query(
        "SELECT groupArray(intHash64(toUInt64(x))) FROM (SELECT arrayJoin({offsets:Array(UInt64)}) AS x)",
        parameters={"offsets": offsets},
    ).result_rows[0][0]
    assert list(engine) == [offset_hash(offset) for offset in offsets]
    assert list(offset_hashes(np.array(offsets, dtype=np.uint64))) == list(engine)


def test_row_policy_is_bound_and_never_bypassed(admin, tmp_path) -> None:
    policy_db = native_chdb.POLICY_DATABASE
    admin.command(f"CREATE DATABASE IF NOT EXISTS {policy_db} ENGINE = Atomic")
    admin.command(f"DROP TABLE IF EXISTS {policy_db}.{native_chdb.POLICY_TABLE} SYNC")
    admin.command(
        f"CREATE TABLE {policy_db}.{native_chdb.POLICY_TABLE} (id UInt64, v UInt64) ENGINE = ReplacingMergeTree(v) ORDER BY id"
    )
    admin.command(f"INSERT INTO {policy_db}.{native_chdb.POLICY_TABLE} SELECT number, 1 FROM numbers(10)")
    route = ChdbRoute(tmp_path, RelationRef(database=policy_db, table=native_chdb.POLICY_TABLE))
    result, _ = route.run()
    assert sorted(row[0] for row in route.target.rows()) == [0, 2, 4, 6, 8]
    journal = [json.loads(p.read_bytes()) for p in sorted((tmp_path / OPERATION / "journal").iterdir())]
    complete = next(r for r in journal if r["kind"] == "stage_complete")["body"]
    profile = complete["completion_metadata"]["source_snapshot_v1"]["profile"]
    assert profile["access"]["policy_filtered"] is True
    assert native_chdb.POLICY_FILTER not in json.dumps(journal)
    assert result.rows == 5


def journal_kinds(tmp_path) -> list[str]:
    directory = tmp_path / OPERATION / "journal"
    return [json.loads(p.read_bytes())["kind"] for p in sorted(directory.iterdir())] if directory.exists() else []


def refused(route: ChdbRoute, checkpoint=None) -> str:
    with pytest.raises(DponeError) as info:
        route.run(checkpoint)
    assert route.target.calls.count("publish") == 0 and route.target.rows() == []
    return info.value.code


@pytest.mark.parametrize(
    ("ddl", "code"),
    [
        (
            "CREATE TABLE {db}.t (id UInt64, _part String, v UInt64) ENGINE = ReplacingMergeTree(v) ORDER BY id",
            "source_schema_unsupported",
        ),
        (
            "CREATE TABLE {db}.t (id UInt64, v UInt64 DEFAULT 1) ENGINE = ReplacingMergeTree(v) ORDER BY id",
            "source_schema_unsupported",
        ),
        (
            "CREATE TABLE {db}.t (id UInt64, f Float64) ENGINE = ReplacingMergeTree ORDER BY id",
            "source_schema_unsupported",
        ),
        ("CREATE TABLE {db}.t (id UInt64) ENGINE = MergeTree ORDER BY id", "replacing_raw_snapshot_required"),
        ("CREATE VIEW {db}.t AS SELECT 1 AS id", "source_engine_unsupported"),
        ("CREATE TABLE {db}.t (id UInt64) ENGINE = Memory", "source_engine_unsupported"),
    ],
)
def test_admission_refusals_happen_before_extraction(admin, db, tmp_path, ddl, code) -> None:
    admin.command(ddl.format(db=db))
    route = ChdbRoute(tmp_path, RelationRef(database=db, table="t"))
    assert refused(route) == "native_transfer." + code
    assert "plan" not in journal_kinds(tmp_path) and route.streams == []


def test_omitted_selector_is_the_legacy_plain_merge_tree_route(admin, db, tmp_path) -> None:
    admin.command(f"CREATE TABLE {db}.plain (id UInt64, _part_like String) ENGINE = MergeTree ORDER BY id")
    admin.command(f"INSERT INTO {db}.plain VALUES (1, 'x'), (1, 'x')")
    route = ChdbRoute(tmp_path, RelationRef(database=db, table="plain"), options={})
    result, _ = route.run()
    assert result.rows == 2 and result.endpoint_authority_agreement is None
    assert "_part" not in route.streams[0].replace("_part_like", "")
    replacing = events_table(admin, db)
    legacy = ChdbRoute(tmp_path / "second", replacing, options={})
    assert refused(legacy) == "native_transfer.replacing_raw_snapshot_required"


def test_merge_between_preflight_and_select_is_incomplete_provenance(admin, db, tmp_path) -> None:
    relation = events_table(admin, db)
    route = ChdbRoute(tmp_path, relation)

    def optimize(point: str) -> None:
        if point == "admitted":
            admin.command(f"OPTIMIZE TABLE {db}.events PARTITION 202601 FINAL")

    assert refused(route, optimize) == "native_transfer.source_provenance_incomplete"
    assert journal_kinds(tmp_path)[-2:] == ["invocation_settled", "lease"]


def test_relation_dropped_before_the_select_fails_the_query(admin, db, tmp_path) -> None:
    relation = events_table(admin, db)
    route = ChdbRoute(tmp_path, relation)

    def drop(point: str) -> None:
        if point == "admitted":
            admin.command(f"DROP TABLE {db}.events SYNC")

    assert refused(route, drop) == "native_transfer.source_query_failed"
    assert journal_kinds(tmp_path)[-2:] == ["invocation_settled", "lease"]


def test_insert_between_preflight_and_select_is_incomplete_provenance(admin, db, tmp_path) -> None:
    relation = events_table(admin, db)
    route = ChdbRoute(tmp_path, relation)

    def insert(point: str) -> None:
        if point == "admitted":
            admin.command(f"INSERT INTO {db}.events VALUES (5, 1, 0, 'late', '2026-01-09 00:00:00', 1)")

    assert refused(route, insert) == "native_transfer.source_provenance_incomplete"


@pytest.mark.parametrize(
    "change",
    [
        "ALTER TABLE {db}.events ADD COLUMN extra UInt8",
        "EXCHANGE TABLES {db}.events AND {db}.empty_twin",
        "settings",
    ],
)
def test_drift_before_eof_is_refused(admin, db, tmp_path, change) -> None:
    relation = events_table(admin, db)
    admin.command(f"CREATE TABLE {db}.empty_twin AS {db}.events")
    route = ChdbRoute(tmp_path, relation)

    def drift(point: str) -> None:
        if point != "admitted":
            return
        if change == "settings":
            route.clients[-1].set_client_setting("additional_table_filters", f"{{'{db}.events': 'id > 1'}}")
        else:
            admin.command(change.format(db=db))

    assert refused(route, drift) == "native_transfer.source_snapshot_drift"


def test_merge_after_acquisition_keeps_the_acquired_view_and_reports_disagreement(admin, db, tmp_path) -> None:
    relation = events_table(admin, db)
    before = read_rows(admin, f"SELECT * FROM {db}.events")
    route = ChdbRoute(tmp_path, relation)
    other = native_chdb.client()

    def merge_once(point: str) -> None:
        if point == "block" and not getattr(merge_once, "done", False):
            merge_once.done = True  # type: ignore[attr-defined]
            other.command(f"OPTIMIZE TABLE {db}.events FINAL")

    result, _ = route.run(merge_once)
    other.close()
    assert multiset(route.target.rows()) == before
    assert read_rows(admin, f"SELECT * FROM {db}.events") != before, "the merge did change the physical rows"
    assert result.endpoint_authority_agreement is False
    assert [event.name for event in route.alerts] == [SOURCE_DRIFT_OBSERVED.name]


def test_post_eof_recovery_never_reopens_the_source(admin, db, tmp_path) -> None:
    relation = events_table(admin, db)
    expected = read_rows(admin, f"SELECT * FROM {db}.events")
    route = ChdbRoute(tmp_path, relation)

    def lose_the_ack(point: str) -> None:
        if point == "publish_intent":
            route.target.faults.arm(Fault.CRASH_AFTER_COMMIT)

    with pytest.raises(SimulatedCrash):
        route.run(lose_the_ack)
    admin.command(f"DROP TABLE {db}.events SYNC")
    route.clock.advance(dt.timedelta(hours=1))
    route.deny = True
    result, connections = route.run()
    assert connections == 0 and result.source_connections == 0
    assert multiset(route.target.rows()) == expected
    assert route.target.calls.count("publish") == 1


def test_crash_mid_stream_releases_the_engine_and_reextracts(admin, db, tmp_path) -> None:
    relation = events_table(admin, db)
    route = ChdbRoute(tmp_path, relation)

    def crash(point: str) -> None:
        if point == "block":
            raise SimulatedCrash(point)

    with pytest.raises(SimulatedCrash):
        route.run(crash)
    route.clock.advance(dt.timedelta(hours=1))
    result, connections = route.run()
    assert connections == 1 and len(result.settled_invocations) == 1
    assert multiset(route.target.rows()) == read_rows(admin, f"SELECT * FROM {db}.events")
    assert uuid.UUID(hex=result.invocation_id) != uuid.UUID(hex=result.settled_invocations[0])
