"""A publishing transaction's refusal before its COMMIT, once the receipt proves the publication absent, is reported
as itself: the coded cause and its next action, never a retryable "interrupted publication proven absent" that
every retry would meet again.

Each case publishes the source once by full refresh (the old target), inserts a source row a correct window
replace would publish, then runs a window replace of the same target during which the publishing transaction
refuses; nothing is published and the old target is intact.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from airflow_provider_dpone.core.errors import DponeError, lookup
from airflow_provider_dpone.transfer.values.query import SnapshotQuery
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow
from tests.support.fakes.transfer_source import FakeSession
from tests.support.fakes.transfer_source import FakeTable as SourceTable
from tests.support.fakes.transfer_target import FakeTable
from tests.support.transfer.native_route_harness import Harness, make_harness, multiset, t

pytestmark = pytest.mark.protocol

Acquired = list[tuple[str, list[tuple[object, ...]], set[int]]]
Selected = tuple[tuple[object, ...], str, int]
EARLY_JANUARY = UtcWindow.of("ts", dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 1, 4, tzinfo=dt.UTC))
"""Holds some of the source's rows (``ts`` of January 1 to 3), not all of them."""


def published_then_windowed(root: Path) -> tuple[Harness, list[tuple[object, ...]]]:
    """The old target (the source published by full refresh) and a window-replace route of the same target, whose
    source has since gained a row inside the window; the old target's rows."""
    first = make_harness(root / "full")
    first.run()
    old = first.target.rows()
    first.source.tables[("db", "events")].insert([(9, 1, 0, b"new", t(2, 12), Decimal(9))])
    return Harness(root=root / "window", source=first.source, target=first.target, window=EARLY_JANUARY), old


def assert_refused(
    harness: Harness,
    old: list[tuple[object, ...]],
    code: str,
    checkpoint: Callable[[str], None] | None = None,
) -> None:
    """The run fails with ``code``, terminal as the registry says, after the one publish, and nothing changed."""
    with pytest.raises(DponeError) as refused:
        harness.run(checkpoint)
    assert refused.value.code == code
    assert not lookup(refused.value.code).retryable, "every retry would be refused the same way"
    assert harness.target.calls.count("publish") == 2, "the window replace reached its publishing transaction"
    assert len(harness.target.receipts) == 1, "nothing was published"
    assert multiset(harness.target.rows()) == multiset(old), "the old target is intact"


@pytest.fixture
def source_ignoring_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """The source's SELECT (and its own count) selects every row of the relation, whatever the window."""
    selected = FakeSession._selected

    def every_row(table: SourceTable, query: SnapshotQuery, acquired: Acquired) -> Iterator[Selected]:
        return selected(table, query.model_copy(update={"window": None}), acquired)

    monkeypatch.setattr(FakeSession, "_selected", staticmethod(every_row))


def test_staged_rows_outside_the_window_are_refused_as_themselves(
    tmp_path: Path, source_ignoring_the_window: None
) -> None:
    harness, old = published_then_windowed(tmp_path)
    assert_refused(harness, old, "native_transfer.target_rows_outside_window")


def test_a_target_replaced_by_a_view_before_publication_is_refused_as_itself(tmp_path: Path) -> None:
    harness, old = published_then_windowed(tmp_path)
    key = (harness.target.table.target_schema, harness.target.table.table)

    def view_in_its_place(point: str) -> None:
        if point == "publish_intent":
            table = harness.target.database.tables[key]
            harness.target.database.tables[key] = FakeTable(table.columns, table.rows, kind="view")

    assert_refused(harness, old, "native_transfer.target_schema_mismatch", checkpoint=view_in_its_place)


def test_a_target_dropped_before_publication_is_refused_as_itself(tmp_path: Path) -> None:
    harness, old = published_then_windowed(tmp_path)
    key = (harness.target.table.target_schema, harness.target.table.table)
    dropped: list[FakeTable] = []

    def drop_the_target(point: str) -> None:
        if point == "publish_intent":
            dropped.append(harness.target.database.tables.pop(key))

    with pytest.raises(DponeError) as refused:
        harness.run(drop_the_target)
    assert refused.value.code == "native_transfer.target_relation_not_found"
    assert not lookup(refused.value.code).retryable, "every retry would be refused the same way"
    assert harness.target.calls.count("publish") == 2, "the window replace reached its publishing transaction"
    assert len(harness.target.receipts) == 1, "nothing was published"
    assert harness.target.database.read(*key) is None, "the publication created no table in its place"
    assert multiset(dropped[0].rows) == multiset(old), "the dropped old target was not changed"
