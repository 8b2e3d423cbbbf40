"""One corruption per link of the transfer's data path, each caught with a stable code before anything is published.

A target's test module subclasses :class:`CorruptionCorpus` (fixtures ``admin``, ``db``, ``make_route``), as it does
:class:`~tests.support.transfer.native_route_scenarios.RouteCorpus`. Every case publishes the source once (the "old"
target), changes the source so that a correct transfer would change the target, then runs a second operation with
exactly one corruption injected at one link of the running route, in the worker process:

* the decoded source batch, after the ClickHouse read and before staging: a value (an integer, a Decimal(38, 10) by
  1e-10, a DateTime64(6) by one microsecond), a row dropped or repeated (with its row hash and its provenance), the
  row hash ClickHouse computed for one row (values untouched), or one row's values and hash replaced by another
  row's (its part and offset intact: counts and positions agree);
* the rows handed to the target's load, and the table the load builds for the driver;
* the staging table, changed by SQL after every chunk was verified and before the publication;
* the target of a window replace, which changes each row as it is inserted (a row trigger): the target's digest of
  the window it published, inside the publishing transaction, against the source's verified total.

The checks that catch them never share the path they check: the source server's own count of the rows it selects
(per part, with the offsets' fingerprint) and its own sum of their row hashes, recomputed in that statement over its
values, and the typed digest the target engine computes over what it stores,
against the row hashes the source engine computed over its own values. Each case asserts the coded failure, that
the target still holds exactly the old rows and that no second publication receipt exists.
"""

from __future__ import annotations

import collections
import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.ports import SourceBlock
from airflow_provider_dpone.transfer.source import session as source_session
from airflow_provider_dpone.transfer.targets.sql_target import SqlTransferTarget
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from tests.support.transfer.native_route_scenarios import JANUARY, MakeRoute, rows_of

PRECISE = (
    "(id UInt64, ver UInt64, amount Decimal(38, 10), ts DateTime64(6, 'UTC'), note Nullable(String)) "
    "ENGINE = ReplacingMergeTree(ver) ORDER BY id"
)
PRECISE_ROWS = (
    "(1, 1, 12345678901234567890.0123456789, '2026-01-01 00:00:00.000001', 'a')",
    "(2, 1, -0.0000000001, '2026-01-02 00:00:00.999999', NULL)",
    "(2, 2, 0, '1969-12-31 23:59:59.999999', '')",
)
SOURCE_ROWS_DIFFER = "native_transfer.source_rows_differ"
SOURCE_CONTENT_DIFFERS = "native_transfer.source_content_differs"
WINDOW_DIFFERS = "native_transfer.target_published_window_differs"
TARGET_DIFFERS = "native_transfer.target_verification_failed"

BlockChange = Callable[[SourceBlock], SourceBlock | None]
"""A corruption of one decoded block; ``None`` when it does not apply to that block (the next one is tried)."""


def _first_changed(table: pa.Table, index: int, change: Callable[[Any], Any]) -> pa.Table:
    """``table`` with ``change`` applied to the first row's value of column ``index`` (other rows untouched)."""
    field = table.schema.field(index)
    column = table.column(index).combine_chunks()
    head = pa.array([change(column[0].as_py())], type=field.type)
    return table.set_column(index, field, pa.concat_arrays([head, column.slice(1)]))


def _column(block: SourceBlock, name: str, change: Callable[[Any], Any]) -> SourceBlock:
    """``block`` with ``change`` applied to the first row's value of column ``name`` (other rows untouched)."""
    return SourceBlock(
        columns=_first_changed(block.columns, block.columns.column_names.index(name), change),
        row_hashes=block.row_hashes,
        rows=block.rows,
        parts=block.parts,
        offsets=block.offsets,
    )


def _rows(block: SourceBlock, positions: list[int]) -> SourceBlock:
    """``block`` reduced or extended to the rows at ``positions``, consistently: values, row hashes, provenance."""
    take = pa.array(positions, type=pa.int64())
    offsets = None if block.offsets is None else [int(block.offsets[i]) for i in positions]
    return SourceBlock(
        columns=block.columns.take(take),
        row_hashes=block.row_hashes.take(take),
        rows=len(positions),
        parts=None if block.parts is None else [block.parts[i] for i in positions],
        offsets=offsets,
    )


def _hash(block: SourceBlock) -> SourceBlock:
    """The source's row hash of the first row replaced by another row's (every value untouched)."""
    hashes = block.row_hashes
    other = hashes.slice(1, 1) if len(hashes) > 1 else pa.array([b"\x00" * 32], type=hashes.type)
    return SourceBlock(
        columns=block.columns,
        row_hashes=pa.concat_arrays([other, hashes.slice(1)]),
        rows=block.rows,
        parts=block.parts,
        offsets=block.offsets,
    )


def _moved(block: SourceBlock) -> SourceBlock | None:
    """The first row's values and row hash replaced by the second row's, its part and offset intact: one row twice
    and one missing, at the right positions (``None``: the block has no second, different row)."""
    if block.rows < 2 or block.row_hashes[0] == block.row_hashes[1]:
        return None
    take = pa.array([1, *range(1, block.rows)], type=pa.int64())
    return SourceBlock(
        columns=block.columns.take(take),
        row_hashes=block.row_hashes.take(take),
        rows=block.rows,
        parts=block.parts,
        offsets=block.offsets,
    )


DECODED: dict[str, tuple[str, BlockChange, str]] = {
    "integer_value": ("events", lambda b: _column(b, "id", lambda v: v + 1000), TARGET_DIFFERS),
    "string_value": ("events", lambda b: _column(b, "payload", lambda v: (v or b"") + b"x"), TARGET_DIFFERS),
    "decimal_by_1e-10": ("precise", lambda b: _column(b, "amount", lambda v: v + Decimal("1e-10")), TARGET_DIFFERS),
    "datetime_by_1us": (
        "precise",
        lambda b: _column(b, "ts", lambda v: v + dt.timedelta(microseconds=1)),
        TARGET_DIFFERS,
    ),
    "row_dropped": ("events", lambda b: _rows(b, list(range(1, b.rows))), SOURCE_ROWS_DIFFER),
    "row_repeated": ("events", lambda b: _rows(b, [0, *range(b.rows)]), SOURCE_ROWS_DIFFER),
    "row_hash_only": ("events", _hash, SOURCE_CONTENT_DIFFERS),
    "row_moved_with_its_hash": ("events", _moved, SOURCE_CONTENT_DIFFERS),
}


@contextmanager
def corrupted_stream(monkeypatch: pytest.MonkeyPatch, change: BlockChange) -> Iterator[list[int]]:
    """The first non-empty block the source session hands over that ``change`` applies to is changed (once)."""
    original = source_session.stream_blocks
    applied: list[int] = []

    @contextmanager
    def stream(client: Any, query: Any, cancel_on_close: Any) -> Iterator[Iterator[SourceBlock]]:
        with original(client, query, cancel_on_close) as blocks:

            def changed() -> Iterator[SourceBlock]:
                for block in blocks:
                    corrupted = change(block) if not applied and block.rows else None
                    if corrupted is not None:
                        applied.append(block.rows)
                    yield block if corrupted is None else corrupted

            yield changed()

    monkeypatch.setattr(source_session, "stream_blocks", stream)
    yield applied


class CorruptionCorpus:
    """Each corruption of the transfer path ends in a coded failure with the old target intact."""

    @pytest.fixture
    def relations(self, admin: Any, db: str) -> dict[str, RelationRef]:
        from tests.support.transfer.native_route_corpus import EVENTS_TABLE

        admin.command(f"CREATE TABLE {db}.precise {PRECISE}")
        for row in PRECISE_ROWS:
            admin.command(f"INSERT INTO {db}.precise VALUES {row}")
        return {"events": EVENTS_TABLE.create(admin, db), "precise": RelationRef(database=db, table="precise")}

    def _second(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, relation: RelationRef
    ) -> tuple[Any, collections.Counter[tuple[object, ...]]]:
        """The old target published from ``relation``, then a source row added that a correct run would publish."""
        first = make_route(tmp_path / "first", relation, operation="a" * 32, table=f"{relation.table}_copy")
        first.run()
        old = first.target_rows()
        assert old == rows_of(admin, relation) and first.receipts() == 1
        row = "(9, 9, 0, 'late', '2026-01-09 00:00:00', 9)" if relation.table == "events" else PRECISE_ROWS[0]
        admin.command(f"INSERT INTO {db}.{relation.table} VALUES {row}")
        return make_route(tmp_path / "second", relation, operation="b" * 32, table=f"{relation.table}_copy"), old

    @staticmethod
    def _refused(route: Any, old: collections.Counter[tuple[object, ...]], code: str, **run: Any) -> None:
        with pytest.raises(DponeError) as refused:
            route.run(**run)
        assert refused.value.code == code, refused.value
        assert route.target_rows() == old, "the old target is intact"
        assert route.receipts() == 1, "nothing was published"

    @pytest.mark.parametrize("case", sorted(DECODED))
    def test_a_corrupted_decoded_batch_is_refused_before_publication(
        self,
        admin: Any,
        db: str,
        make_route: MakeRoute,
        tmp_path: Path,
        relations: dict[str, RelationRef],
        monkeypatch: pytest.MonkeyPatch,
        case: str,
    ) -> None:
        table, change, code = DECODED[case]
        route, old = self._second(admin, db, make_route, tmp_path, relations[table])
        with corrupted_stream(monkeypatch, change) as applied:
            self._refused(route, old, code, chunk_rows=100)
        assert applied, "the corruption was injected"

    def test_rows_changed_on_their_way_into_the_target_load_are_refused(
        self,
        admin: Any,
        db: str,
        make_route: MakeRoute,
        tmp_path: Path,
        relations: dict[str, RelationRef],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        route, old = self._second(admin, db, make_route, tmp_path, relations["events"])
        original = SqlTransferTarget.load_chunk
        applied: list[int] = []

        def load_chunk(self: SqlTransferTarget, invocation: Any, ordinal: int, rows: pa.Table) -> None:
            if not applied and rows.num_rows:
                applied.append(ordinal)
                rows = _first_changed(rows, 0, lambda value: value + 1000)  # an integer key
            original(self, invocation, ordinal, rows)

        monkeypatch.setattr(SqlTransferTarget, "load_chunk", load_chunk)
        self._refused(route, old, TARGET_DIFFERS)
        assert applied

    def test_staging_changed_after_every_chunk_was_verified_is_refused_at_publication(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, relations: dict[str, RelationRef]
    ) -> None:
        route, old = self._second(admin, db, make_route, tmp_path, relations["events"])
        tampered: list[str] = []

        def after_verification(point: str) -> None:
            if point == "loaded" and not tampered:
                tampered.append(point)
                route.tamper_staging()

        self._refused(route, old, TARGET_DIFFERS, checkpoint=after_verification)
        assert tampered

    def _second_window(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, relation: RelationRef
    ) -> tuple[Any, collections.Counter[tuple[object, ...]]]:
        """The old target published in full, then a source row added inside January that a correct window replace
        of January would publish."""
        first = make_route(tmp_path / "first", relation, operation="a" * 32)
        first.run()
        old = first.target_rows()
        assert old == rows_of(admin, relation) and first.receipts() == 1
        admin.command(f"INSERT INTO {db}.{relation.table} VALUES (9, 9, 0, 'late', '2026-01-09 00:00:00', 9)")
        return make_route(tmp_path / "second", relation, operation="b" * 32, window=JANUARY), old

    def test_a_window_replace_into_a_target_that_changes_rows_on_insert_is_refused(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, relations: dict[str, RelationRef]
    ) -> None:
        """Every chunk verifies in staging; the target rewrites each row the window replace inserts. The target's
        digest of the published window differs from the source's verified total: rolled back, old target intact."""
        route, old = self._second_window(admin, db, make_route, tmp_path, relations["events"])
        route.rewrite_target_inserts()
        self._refused(route, old, WINDOW_DIFFERS)

    def test_a_target_whose_insert_hook_keeps_every_value_still_publishes_its_window(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, relations: dict[str, RelationRef]
    ) -> None:
        """The control: the same hook, changing nothing, does not stop the window replace (the check compares
        content, it does not refuse a target for having the hook)."""
        route, _ = self._second_window(admin, db, make_route, tmp_path, relations["events"])
        route.rewrite_target_inserts(change=False)
        result = route.run()
        events = relations["events"]
        inside = rows_of(admin, events, "WHERE ts < '2026-02-01 00:00:00'")
        assert result.rows == sum(inside.values()) and route.receipts() == 2
        assert route.target_rows() == rows_of(admin, events), "the window holds the source's rows, the rest kept"
