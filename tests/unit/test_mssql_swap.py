"""The full-refresh swap against what holds the old target table, on the stand-in.

``sp_rename`` and ``DROP TABLE`` take a schema-modification lock, which waits for every reader of the table; past
``SET LOCK_TIMEOUT`` SQL Server fails the statement with error 1222. A foreign key referencing the old table makes its
DROP fail (3726); a schema-bound view makes its rename fail (15336). Each test asserts the coded refusal, that the old
target is as it was, and that the staging is kept for the retry.
"""

from __future__ import annotations

import pytest

from airflow_provider_dpone.core.errors import DponeError, lookup
from airflow_provider_dpone.transfer.route.publication import DEFINITE_REFUSALS
from airflow_provider_dpone.transfer.targets.mssql import tsql
from airflow_provider_dpone.transfer.targets.mssql.target import MsSqlTransferTarget
from airflow_provider_dpone.transfer.values.target import PublicationMode, TargetColumn, TargetPlan
from tests.fakes.mssql_server import Column, EmulatedServer, Table
from tests.fixtures.target_harness import bind, chunk, evidence

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
