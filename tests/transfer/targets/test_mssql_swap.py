"""What the target table itself can refuse, on the stand-in: the full-refresh swap against what holds the old table,
and a window replace into a column that would not store the values exactly.

``sp_rename`` and ``DROP TABLE`` take a schema-modification lock, which waits for every reader of the table; past
``SET LOCK_TIMEOUT`` SQL Server fails the statement with error 1222. A foreign key referencing the old table makes its
DROP fail (3726); a schema-bound view makes its rename fail (15336). Each test asserts the coded refusal, that the old
target is as it was, and that the staging is kept for the retry. A binary column created with ANSI_PADDING OFF
(``sys.columns.is_ansi_padded = 0``) drops trailing zero bytes: refused before anything is staged.
"""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_provider_dpone.core.errors import DponeError, lookup
from airflow_provider_dpone.transfer.ports import TargetInvocation
from airflow_provider_dpone.transfer.route.publication import DEFINITE_REFUSALS
from airflow_provider_dpone.transfer.targets.mssql import tsql
from airflow_provider_dpone.transfer.targets.mssql.target import MsSqlTransferTarget
from airflow_provider_dpone.transfer.values.target import PublicationMode, TargetColumn, TargetPlan
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow
from tests.support.fakes.mssql_server import Column, EmulatedServer, Table
from tests.support.fixtures.target_harness import bind, chunk, evidence

pytestmark = pytest.mark.unit

PLAN = TargetPlan(
    invocation_id="swap-invocation-0001",
    target_schema="dbo",
    target_table="events",
    columns=(TargetColumn(name="id", source_type="Int32"),),
    mode=PublicationMode.FULL_REFRESH,
)
TABLE, INV = bind(PLAN)
ROWS: list[tuple[object, ...]] = [(1,), (2,)]
OLD = [[41], [42]]


def _staged(**old: bool) -> tuple[EmulatedServer, MsSqlTransferTarget]:
    server = EmulatedServer()
    server.tables[tsql.target(PLAN)] = Table([Column("id", "INT", False)], [list(r) for r in OLD], **old)
    target = MsSqlTransferTarget(server.connect, TABLE, lock_timeout_ms=50)
    target.prepare(INV)
    target.load_chunk(INV, 0, chunk(INV, ROWS))
    target.verify_chunk(INV, evidence(PLAN, 0, ROWS))
    return server, target


def _refused(server: EmulatedServer, target: MsSqlTransferTarget, code: str, number: int) -> None:
    with pytest.raises(DponeError, match=f"error {number}") as refused:
        target.publish(INV, [evidence(PLAN, 0, ROWS)])
    assert refused.value.code == f"native_transfer.{code}"
    assert server.tables[tsql.target(PLAN)].rows == OLD  # rolled back: the old target as it was
    assert tsql.staging(PLAN) in server.tables  # and the staging kept for the next try
    assert tsql.qualified("dbo", PLAN.retired_table) not in server.tables


def test_a_reader_holding_the_target_past_the_lock_timeout_is_a_retryable_coded_refusal() -> None:
    server, target = _staged()
    server.readers.add(tsql.target(PLAN))
    _refused(server, target, "target_swap_lock_timeout", 1222)
    assert lookup("native_transfer.target_swap_lock_timeout").retryable
    server.readers.clear()  # the reader finished: the retry publishes
    target.publish(INV, [evidence(PLAN, 0, ROWS)])
    assert server.tables[tsql.target(PLAN)].rows == [[1], [2]]


@pytest.mark.parametrize(
    ("bound", "number"), [("referenced_by_foreign_key", 3726), ("schema_bound_view", 15336)], ids=["fk", "view"]
)
def test_an_object_bound_to_the_old_target_is_a_terminal_coded_refusal(bound: str, number: int) -> None:
    server, target = _staged(**{bound: True})
    _refused(server, target, "target_swap_blocked", number)
    assert not lookup("native_transfer.target_swap_blocked").retryable


def test_the_route_reports_both_refusals_as_themselves_once_the_publication_is_proven_absent() -> None:
    assert {"native_transfer.target_swap_lock_timeout", "native_transfer.target_swap_blocked"} <= DEFINITE_REFUSALS


# -- a window replace into a binary column that drops trailing zeros ------------------------------------------------
WINDOW_PLAN = TargetPlan(
    invocation_id="pad-invocation-0001",
    target_schema="dbo",
    target_table="tags",
    columns=(
        TargetColumn(name="day", source_type="Date"),
        TargetColumn(name="tag", source_type="Nullable(FixedString(4))"),
    ),
    mode=PublicationMode.WINDOW_REPLACE,
    window=UtcWindow(
        column="day", start=dt.datetime(2026, 3, 1, tzinfo=dt.UTC), end=dt.datetime(2026, 3, 2, tzinfo=dt.UTC)
    ),
)
PADDED_ROWS: list[tuple[object, ...]] = [(dt.date(2026, 3, 1), b"ab\x00\x00")]


def _window_target(*, padded: bool) -> tuple[EmulatedServer, MsSqlTransferTarget, TargetInvocation]:
    server = EmulatedServer()
    columns = [Column("day", "DATE", False), Column("tag", "BINARY(4)", True, ansi_padded=padded)]
    server.tables[tsql.target(WINDOW_PLAN)] = Table(columns)
    table, invocation = bind(WINDOW_PLAN)
    return server, MsSqlTransferTarget(server.connect, table), invocation


def test_a_binary_column_created_with_ansi_padding_off_is_refused_before_anything_is_staged() -> None:
    """``BINARY(4) NULL`` with ``is_ansi_padded = 0`` would store ``ab`` for ``ab\\x00\\x00``, after verification."""
    server, target, invocation = _window_target(padded=False)
    with pytest.raises(DponeError, match=r"column tag \(BINARY\(4\)\)") as refused:
        target.prepare(invocation)
    assert refused.value.code == "native_transfer.target_column_unpadded"
    assert not lookup(refused.value.code).retryable
    assert tsql.staging(WINDOW_PLAN) not in server.tables


def test_the_same_column_created_with_ansi_padding_on_publishes_the_zeros() -> None:
    server, target, invocation = _window_target(padded=True)
    target.prepare(invocation)
    target.load_chunk(invocation, 0, chunk(invocation, PADDED_ROWS))
    target.publish(invocation, [evidence(WINDOW_PLAN, 0, PADDED_ROWS)])
    assert server.tables[tsql.target(WINDOW_PLAN)].rows == [[dt.date(2026, 3, 1), b"ab\x00\x00"]]


def test_the_stand_in_trims_trailing_zeros_as_sql_server_does_without_ansi_padding() -> None:
    """The model the refusal is tested against ("SET ANSI_PADDING", its table of column types)."""
    assert Column("b", "BINARY(4)", True, ansi_padded=False).stores(b"ab\x00\x00") == b"ab"
    assert Column("b", "VARBINARY(8)", False, ansi_padded=False).stores(b"ab\x00") == b"ab"
    assert Column("b", "BINARY(4)", False, ansi_padded=False).stores(b"ab\x00\x00") == b"ab\x00\x00"
    assert Column("b", "VARBINARY(MAX)", True, ansi_padded=False).stores(b"ab\x00") == b"ab\x00"
