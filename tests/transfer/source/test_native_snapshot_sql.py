"""Golden SQL of the one data SELECT and the metadata reads: no FINAL, ordering, sampling or pagination, ever."""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_provider_dpone.core.clickhouse.row_hash import row_hash_expression, row_hash_sql
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.route.schema_admission import map_type
from airflow_provider_dpone.transfer.source.sql import parts_sql, render_select, render_selected_rows
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.query import SnapshotQuery, query_record
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow

pytestmark = pytest.mark.unit

PROJECTION = (map_type("id", "UInt64", implicit_utc=False), map_type("ts", "DateTime64(3, 'UTC')", implicit_utc=False))
WINDOW = UtcWindow.of("ts", dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 2, 1, tzinfo=dt.UTC))


def snapshot(*, window: UtcWindow | None, provenance: bool) -> SnapshotQuery:
    query = SnapshotQuery(
        relation=RelationRef(database="sales", table="events"),
        projection=PROJECTION,
        window=window,
        provenance=provenance,
        settings=(),
        vendor_query_id="q",
        block_rows=10,
        expected=None,
    )
    return query.model_copy(update={"expected": query_record(query)}) if provenance else query


def test_raw_select_with_window() -> None:
    query = snapshot(window=WINDOW, provenance=True)
    sql, parameters = render_select(query)
    assert sql == (
        f"SELECT `id`, `ts`, {row_hash_sql(query.projection)}, _part, _part_offset FROM `sales`.`events` "
        "WHERE `ts` >= {dpone_window_start:DateTime64(6, 'UTC')} AND `ts` < {dpone_window_end:DateTime64(6, 'UTC')}"
    )
    assert parameters == {
        "dpone_window_start": "2026-01-01 00:00:00.000000",
        "dpone_window_end": "2026-02-01 00:00:00.000000",
    }


def test_legacy_full_refresh_select() -> None:
    query = snapshot(window=None, provenance=False)
    assert render_select(query, row_hash=False) == ("SELECT `id`, `ts` FROM `sales`.`events`", {})
    hashed, _ = render_select(query)
    assert hashed == f"SELECT `id`, `ts`, {row_hash_sql(query.projection)} FROM `sales`.`events`"
    assert row_hash_sql(query.projection).startswith("SHA256(concat('dpone.typed-row.v1\\0', ")


def test_the_selected_rows_statement_recomputes_the_selects_row_hash_over_the_same_selection() -> None:
    """The anchor sums, per part or over all, the very row hash the data SELECT carries, in a statement of its own."""
    query = snapshot(window=WINDOW, provenance=True)
    hashed = [(column.name, column.source_type) for column in query.projection]
    typed_sum = f"toString(sum(reinterpretAsUInt256(reverse({row_hash_expression(hashed)}))))"
    assert row_hash_sql(query.projection) == f"{row_hash_expression(hashed)} AS _dpone_row_sha256"
    sql, parameters = render_selected_rows(query)
    assert sql == (
        "SELECT toString(_part) AS part, count(), min(toUInt64(_part_offset)), max(toUInt64(_part_offset)), "
        f"sum(intHash64(toUInt64(_part_offset))), {typed_sum} FROM `sales`.`events` "
        "WHERE `ts` >= {dpone_window_start:DateTime64(6, 'UTC')} AND `ts` < {dpone_window_end:DateTime64(6, 'UTC')}"
        " GROUP BY part ORDER BY part"
    )
    assert parameters == render_select(query)[1]
    plain = snapshot(window=None, provenance=False)
    assert render_selected_rows(plain) == (f"SELECT count(), {typed_sum} FROM `sales`.`events`", {})


def test_a_query_that_differs_from_its_admitted_digests_is_not_rendered() -> None:
    admitted = snapshot(window=WINDOW, provenance=True)
    widened = admitted.model_copy(update={"window": None})
    with pytest.raises(DponeError) as info:
        render_select(widened)
    assert info.value.code == "native_transfer.source_snapshot_drift"


def test_physical_profile_reads_are_bounded() -> None:
    assert parts_sql(False).endswith("AND active ORDER BY name LIMIT {limit:UInt32}")
    assert "partition_ids" in parts_sql(True) and "patch-" in parts_sql(True)
