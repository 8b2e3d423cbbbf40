"""The fixed UTC half-open window and its exact partition set."""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.route.schema_admission import map_type
from airflow_provider_dpone.transfer.route.window import admit_window, partition_ids
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow, format_utc, parse_utc

pytestmark = pytest.mark.unit


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)


def window(start: dt.datetime, end: dt.datetime, column: str = "ts") -> UtcWindow:
    return UtcWindow.of(column, start, end)


COLUMNS = (
    map_type("id", "UInt64", implicit_utc=False),
    map_type("ts", "DateTime64(3, 'UTC')", implicit_utc=False),
    map_type("s", "DateTime('UTC')", implicit_utc=False),
    map_type("n", "Nullable(DateTime64(3, 'UTC'))", implicit_utc=False),
    map_type("plain", "DateTime", implicit_utc=True),
)


def test_bounds_are_canonical_aware_utc() -> None:
    assert format_utc(utc(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05.000000Z"
    assert parse_utc("2026-01-02T03:04:05.000007Z") == utc(2026, 1, 2, 3, 4, 5, 7)
    for bad in (dt.datetime(2026, 1, 1), dt.datetime(2026, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))):
        with pytest.raises(DponeError) as info:
            format_utc(bad)
        assert info.value.code == "native_transfer.source_window_invalid"
    with pytest.raises(DponeError):
        window(utc(2026, 1, 2), utc(2026, 1, 2))
    with pytest.raises(DponeError):
        UtcWindow(column="ts", start="2026-01-02 00:00:00", end="2026-01-03T00:00:00.000000Z")


@pytest.mark.parametrize(
    ("function", "start", "end", "expected"),
    [
        ("toYYYYMM", utc(2026, 1, 31, 23), utc(2026, 3, 1), ("202601", "202602")),
        ("toYYYYMM", utc(2025, 12, 1), utc(2026, 1, 1, 0, 0, 0, 1), ("202512", "202601")),
        ("toStartOfMonth", utc(2026, 1, 15), utc(2026, 2, 2), ("20260101", "20260201")),
        ("toYYYYMMDD", utc(2028, 2, 28, 12), utc(2028, 3, 1), ("20280228", "20280229")),
        ("toDate", utc(2026, 1, 31), utc(2026, 2, 1), ("20260131",)),
        ("toStartOfDay", utc(2026, 1, 31), utc(2026, 2, 1, 0, 0, 1), ("1769817600", "1769904000")),
    ],
)
def test_partition_ids_cover_exactly_the_window(function, start, end, expected) -> None:
    assert partition_ids(function, window(start, end)) == expected


def test_full_refresh_and_unpartitioned_windows() -> None:
    assert admit_window(None, COLUMNS, "toYYYYMM(ts)", implicit_utc=False).partition_ids is None
    admitted = admit_window(window(utc(2026, 1, 1), utc(2026, 1, 2)), COLUMNS, "tuple()", implicit_utc=False)
    assert admitted.partition_ids == ("all",)
    bounded = admit_window(window(utc(2026, 1, 1), utc(2026, 1, 2)), COLUMNS, "toYYYYMM(ts)", implicit_utc=False)
    assert bounded.partition_ids == ("202601",)


@pytest.mark.parametrize(
    ("win", "key", "implicit_utc"),
    [
        (window(utc(2026, 1, 1), utc(2026, 1, 2), "missing"), "toYYYYMM(missing)", False),
        (window(utc(2026, 1, 1), utc(2026, 1, 2), "id"), "", False),
        (window(utc(2026, 1, 1), utc(2026, 1, 2), "n"), "", False),
        (window(utc(2026, 1, 1), utc(2026, 1, 2), "ts"), "toYYYYMM(other)", False),
        (window(utc(2026, 1, 1), utc(2026, 1, 2), "ts"), "intDiv(id, 10)", False),
        (window(utc(2026, 1, 1), utc(2026, 1, 2), "ts"), "(toYYYYMM(ts), id)", False),
        (window(utc(2026, 1, 1, 0, 0, 0, 500), utc(2026, 1, 2), "ts"), "", False),
        (window(utc(2026, 1, 1, 0, 0, 0, 1000), utc(2026, 1, 2), "s"), "", False),
        (window(utc(2026, 1, 1), utc(2026, 1, 2), "plain"), "", False),
    ],
)
def test_window_refusals(win: UtcWindow, key: str, implicit_utc: bool) -> None:
    with pytest.raises(DponeError) as info:
        admit_window(win, COLUMNS, key, implicit_utc=implicit_utc)
    assert info.value.code == "native_transfer.source_window_invalid"


def test_window_spanning_too_many_partitions_is_refused() -> None:
    with pytest.raises(DponeError) as info:
        partition_ids("toDate", window(utc(1990, 1, 1), utc(2026, 1, 1)))
    assert info.value.code == "native_transfer.source_part_cap_exceeded"
