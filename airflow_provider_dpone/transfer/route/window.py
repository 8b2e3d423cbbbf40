"""The fixed UTC half-open window of ``partition_replace`` and its exact partition set.

A bounded window is admitted only on an admitted UTC DateTime/DateTime64 column whose partition expression is on the
closed allowlist below (or an unpartitioned table). The partitions that can hold rows of ``[start, end)`` are then
enumerated exactly, so the pre-query physical profile covers every part the SELECT may touch. A full refresh has no
window and profiles every active part.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from airflow_provider_dpone.core.columns import NativeColumn
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.typed_digest import LogicalType
from airflow_provider_dpone.transfer.values.raw_snapshot_physical import MAX_PARTS
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow

_EXPRESSION: Final[re.Pattern[str]] = re.compile(r"(\w+)\(`?([A-Za-z_][A-Za-z0-9_]*)`?\)")
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class WindowAdmission:
    window: UtcWindow | None
    column_type: str | None
    partition_ids: tuple[str, ...] | None


def _days(first: dt.date, last: dt.date) -> Iterator[dt.date]:
    day = first
    while day <= last:
        yield day
        day += dt.timedelta(days=1)


def _months(first: dt.date, last: dt.date) -> Iterator[dt.date]:
    year, month = first.year, first.month
    while (year, month) <= (last.year, last.month):
        yield dt.date(year, month, 1)
        month = month % 12 + 1
        year += month == 1


def _day_start_epoch(day: dt.date) -> str:
    return str(calendar.timegm(day.timetuple()))


_PARTITIONS: Final[dict[str, tuple[Callable[[dt.date, dt.date], Iterator[dt.date]], Callable[[dt.date], str]]]] = {
    "toYYYYMM": (_months, lambda day: day.strftime("%Y%m")),
    "toStartOfMonth": (_months, lambda day: day.strftime("%Y%m%d")),
    "toYYYYMMDD": (_days, lambda day: day.strftime("%Y%m%d")),
    "toDate": (_days, lambda day: day.strftime("%Y%m%d")),
    "toStartOfDay": (_days, _day_start_epoch),
}
PARTITION_ALLOWLIST: Final = frozenset(_PARTITIONS)


def partition_ids(function: str, window: UtcWindow) -> tuple[str, ...]:
    """Partition IDs of every partition that can hold an instant of ``[start, end)`` (UTC calendar)."""
    iterate, render = _PARTITIONS[function]
    last_instant = window.end - dt.timedelta(microseconds=1)
    ids: list[str] = []
    for day in iterate(window.start.date(), last_instant.date()):
        ids.append(render(day))
        if len(ids) > MAX_PARTS:
            raise DponeError("native_transfer.source_part_cap_exceeded", "window spans too many partitions")
    return tuple(ids)


def admit_window(
    window: UtcWindow | None, columns: Sequence[NativeColumn], partition_key: str, *, implicit_utc: bool
) -> WindowAdmission:
    if window is None:
        return WindowAdmission(window=None, column_type=None, partition_ids=None)
    column = next((candidate for candidate in columns if candidate.name == window.column), None)
    if column is None:
        raise DponeError("native_transfer.source_window_invalid", "window column is not in the admitted schema")
    if column.logical is not LogicalType.DATETIME or column.nullable:
        raise DponeError("native_transfer.source_window_invalid", "window column must be a non-nullable UTC DateTime")
    if "'" not in column.source_type and not implicit_utc:
        raise DponeError("native_transfer.source_window_invalid", "implicit calendar of the window column is not UTC")
    step = 10 ** (6 - column.scale)
    for bound in (window.start, window.end):
        micros = (bound - _EPOCH) // dt.timedelta(microseconds=1)
        if micros % step:
            raise DponeError("native_transfer.source_window_invalid", "window bound is finer than the column precision")
    key = partition_key.strip()
    if key in ("", "tuple()"):
        return WindowAdmission(window=window, column_type=column.source_type, partition_ids=("all",))
    match = _EXPRESSION.fullmatch(key)
    if match is None or match.group(1) not in PARTITION_ALLOWLIST or match.group(2) != window.column:
        raise DponeError("native_transfer.source_window_invalid", "partition expression is not on the window allowlist")
    return WindowAdmission(
        window=window, column_type=column.source_type, partition_ids=partition_ids(match.group(1), window)
    )
