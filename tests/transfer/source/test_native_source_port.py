"""One contract suite for the snapshot source port, run on the in-memory fake and on the real engine (chdb).

The fake is only trustworthy for the recovery matrix if it behaves like ClickHouse where the route depends on it:
relation/column metadata, one part per insert, provenance within the physical profile, half-open windows, effective
settings under the query overlay, access inspection, and a query view acquired at its start.
"""

from __future__ import annotations

import collections
import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest

from airflow_provider_dpone.core.typed_digest import MODULUS, row_hash
from airflow_provider_dpone.transfer.route.read_profile import FILTER_SETTINGS, frozen_settings
from airflow_provider_dpone.transfer.route.schema_admission import map_type
from airflow_provider_dpone.transfer.values.arrow_chunk import table_rows
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.query import SnapshotQuery
from airflow_provider_dpone.transfer.values.raw_snapshot import SettingRecord
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow
from tests.support.fakes.transfer_source import FakeSnapshotSource, FakeTable
from tests.support.transfer import native_chdb

pytestmark = pytest.mark.contract

COLUMNS = [("id", "UInt64"), ("ver", "UInt64"), ("ts", "DateTime64(3, 'UTC')"), ("amount", "Nullable(Decimal(18, 4))")]
BATCHES = [
    [(1, 1, dt.datetime(2026, 1, 1), Decimal("1.5")), (2, 1, dt.datetime(2026, 1, 31, 23, 59, 59, 999000), None)],
    [(1, 2, dt.datetime(2026, 2, 1), Decimal(0)), (3, 0, dt.datetime(2026, 2, 2), None)],
    [
        (1, 2, dt.datetime(2026, 2, 1), Decimal(0)),
        (3, 1, dt.datetime(2026, 2, 15), Decimal("-2")),
        (4, 2, dt.datetime(2026, 2, 20), None),
        (4, 1, dt.datetime(2026, 2, 20), None),
    ],
]
"""Separate inserts: the identical row ``(1, 2, ...)`` twice; key 3 in two versions; key 4 twice in ONE block."""


@dataclass
class Backend:
    connector: Any
    relation: RelationRef
    merge: Any
    engine_full_prefix: str


def _fake() -> Iterator[Backend]:
    table = FakeTable(
        columns=list(COLUMNS),
        engine_args="ver",
        partition_key="toYYYYMM(ts)",
        partition=lambda row: row[2].strftime("%Y%m"),
        sorting_key="id",
    )
    for batch in BATCHES:
        table.insert(batch)
    source = FakeSnapshotSource({("db", "events"): table})
    yield Backend(source, RelationRef(database="db", table="events"), table.merge, "ReplacingMergeTree(ver)")


def _chdb() -> Iterator[Backend]:
    admin = native_chdb.client()
    db = native_chdb.fresh_database(admin, "port")
    admin.command(
        f"CREATE TABLE {db}.events (id UInt64, ver UInt64, ts DateTime64(3, 'UTC'), amount Nullable(Decimal(18, 4))) "
        "ENGINE = ReplacingMergeTree(ver) PARTITION BY toYYYYMM(ts) ORDER BY id"
    )
    for batch in BATCHES:
        admin.insert(f"{db}.events", [list(row) for row in batch], column_names=[name for name, _ in COLUMNS])

    def merge() -> None:
        admin.command(f"OPTIMIZE TABLE {db}.events FINAL")

    yield Backend(native_chdb.connector(), RelationRef(database=db, table="events"), merge, "ReplacingMergeTree(ver)")
    admin.command(f"DROP DATABASE {db} SYNC")
    admin.close()


@pytest.fixture(params=["fake", "chdb"])
def backend(request) -> Iterator[Backend]:
    yield from (_fake() if request.param == "fake" else _chdb())


def query(backend: Backend, *, window: UtcWindow | None = None, provenance: bool = True) -> SnapshotQuery:
    return SnapshotQuery(
        relation=backend.relation,
        projection=tuple(map_type(name, type_, implicit_utc=False) for name, type_ in COLUMNS),
        window=window,
        provenance=provenance,
        settings=tuple(SettingRecord(name=k, value=v) for k, v in sorted(frozen_settings(60).items())),
        vendor_query_id="dpone-contract",
        block_rows=2,
        expected=None,
    )


def read(backend: Backend, snapshot: SnapshotQuery, on_first_block=None) -> tuple[collections.Counter, list]:
    session = backend.connector.connect()
    rows: collections.Counter = collections.Counter()
    provenance: list = []
    try:
        with session.stream(snapshot) as blocks:
            for index, block in enumerate(blocks):
                if index == 0 and on_first_block is not None:
                    on_first_block()
                assert block.columns.num_columns == len(COLUMNS)
                values = table_rows(block.columns, [column.logical for column in snapshot.projection])
                # each row's hash, as the source computed it, is the reference typed digest of the row's values
                typed = [column.typed for column in snapshot.projection]
                assert block.row_hashes.to_pylist() == [row_hash(typed, row).to_bytes(32, "big") for row in values]
                for row in values:
                    rows[(row[0], row[1], row[2].replace(tzinfo=None), row[3])] += 1
                if block.parts is not None:
                    provenance.extend(zip(block.parts, block.offsets, strict=True))
    finally:
        session.close()
    return rows, provenance


def test_relation_metadata(backend: Backend) -> None:
    session = backend.connector.connect()
    observed = session.relation(backend.relation)
    assert observed.exists and observed.database_engine == "Atomic" and observed.engine == "ReplacingMergeTree"
    assert observed.engine_full.startswith(backend.engine_full_prefix + " PARTITION BY toYYYYMM(ts) ORDER BY id")
    assert [(c.name, c.type, c.default_kind) for c in observed.columns] == [(n, t, "") for n, t in COLUMNS]
    assert observed.partition_key == "toYYYYMM(ts)" and observed.uuid.count("-") == 4
    missing = session.relation(RelationRef(database=backend.relation.database, table="nope"))
    assert not missing.exists
    assert not session.replica(backend.relation).present
    assert session.mutations(backend.relation).pending_classic_mutations == 0
    access = session.access(backend.relation)
    assert access.policies_inspectable and access.row_policies == ()
    session.close()


def test_settings_are_observed_under_the_overlay(backend: Backend) -> None:
    session = backend.connector.connect()
    frozen = frozen_settings(60)
    observed = session.settings(frozen, sorted({*frozen, *FILTER_SETTINGS})).values
    assert {name: observed[name] for name in frozen} == frozen
    assert observed["additional_table_filters"] in ("", "{}") and observed["additional_result_filter"] == ""
    session.close()


def test_one_part_per_insert_and_provenance_within_the_profile(backend: Backend) -> None:
    session = backend.connector.connect()
    physical = session.physical(backend.relation, None, 100)
    session.close()
    assert not physical.truncated and len(physical.parts) == 3
    assert sorted(p.partition_id for p in physical.parts) == ["202601", "202602", "202602"]
    rows, provenance = read(backend, query(backend))
    assert sum(rows.values()) == 7 and rows[(1, 2, dt.datetime(2026, 2, 1), Decimal(0))] == 2
    limits = {part.name: part.rows for part in physical.parts}
    assert all(part in limits and 0 <= offset < limits[part] for part, offset in provenance)
    assert len(set(provenance)) == len(provenance) == 7
    bounded = backend.connector.connect().physical(backend.relation, ["202601"], 100)
    assert [p.partition_id for p in bounded.parts] == ["202601"]
    capped = backend.connector.connect().physical(backend.relation, None, 2)
    assert capped.truncated and len(capped.parts) == 2


def test_window_is_half_open(backend: Backend) -> None:
    window = UtcWindow.of(
        "ts", dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 1, 31, 23, 59, 59, 999000, tzinfo=dt.UTC)
    )
    rows, _ = read(backend, query(backend, window=window))
    assert set(rows) == {(1, 1, dt.datetime(2026, 1, 1), Decimal("1.5"))}


def test_without_provenance_blocks_carry_none(backend: Backend) -> None:
    rows, provenance = read(backend, query(backend, provenance=False))
    assert sum(rows.values()) == 7 and provenance == []


@pytest.mark.parametrize("provenance", [True, False])
def test_the_server_counts_and_sums_the_rows_it_selects_in_a_statement_of_its_own(
    backend: Backend, provenance: bool
) -> None:
    """``selected_rows`` is the server's own account of the SELECT: its count, its coverage per part and the sum of
    the rows' typed SHA-256s, equal to the reference digest of the rows the stream hands over (read apart)."""
    window = UtcWindow.of("ts", dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 2, 10, tzinfo=dt.UTC))
    for snapshot in (query(backend, provenance=provenance), query(backend, window=window, provenance=provenance)):
        rows, provenance_read = read(backend, snapshot)
        session = backend.connector.connect()
        selected = session.selected_rows(snapshot)
        session.close()
        typed = [column.typed for column in snapshot.projection]
        reference = sum(
            row_hash(typed, [key, version, ts.replace(tzinfo=dt.UTC), amount]) * count
            for (key, version, ts, amount), count in rows.items()
        )
        assert selected.rows == sum(rows.values()) and selected.typed_sum == reference % MODULUS
        if provenance:
            assert selected.parts is not None
            assert [(p.part, p.rows) for p in selected.parts] == sorted(
                collections.Counter(part for part, _ in provenance_read).items()
            )
        else:
            assert selected.parts is None


def test_one_insert_block_is_collapsed_but_separate_inserts_are_not(backend: Backend) -> None:
    """ReplacingMergeTree applies its rule inside one INSERT block (optimize_on_insert), never across parts."""
    rows, _ = read(backend, query(backend))

    def versions(wanted: int) -> list[int]:
        return sorted(version for (key, version, _, _), count in rows.items() for _ in range(count) if key == wanted)

    assert versions(3) == [0, 1]
    assert versions(4) == [2]
    session = backend.connector.connect()
    assert {p.level for p in session.physical(backend.relation, None, 100).parts} == {1}
    session.close()


def test_a_merge_after_acquisition_does_not_change_the_acquired_view(backend: Backend) -> None:
    before, _ = read(backend, query(backend))
    during, provenance = read(backend, query(backend), on_first_block=backend.merge)
    assert during == before
    session = backend.connector.connect()
    after = session.physical(backend.relation, None, 100)
    session.close()
    assert {part for part, _ in provenance} - {p.name for p in after.parts}, "the merge replaced the read parts"
