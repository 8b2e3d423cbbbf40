"""The SQL Server target over its stand-in, where staging or the driver fails it.

pymssql's exceptions outside its DB-API classes are coded failures, never an interrupted call: the driver fails to
hand over the commit row (``OUTPUT inserted.[committed_at]`` in the publishing transaction, the receipt's ``SELECT``
in reconcile) or a bulk-copied value. A staging column altered after verification is refused at publication."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import tests.transfer.targets.test_target_contract as contract
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer_options import ImportBackend
from airflow_provider_dpone.transfer.targets.mssql import tsql
from airflow_provider_dpone.transfer.targets.mssql.target import MsSqlTransferTarget
from tests.support.fakes.mssql_server import Column
from tests.support.fixtures.target_harness import MsSqlHarness, plan_of

pytestmark = pytest.mark.unit

DRIVER_EXCEPTIONS: dict[str, Callable[[], Exception]] = {
    "datetime-text": lambda: ValueError("Invalid isoformat string"),  # DATETIME2 as text (TDS < 7.3)
    "encoding": lambda: UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    "overflow": lambda: OverflowError("date value out of range"),
    "row-shape": lambda: IndexError("tuple index out of range"),
    "conversion": lambda: TypeError("unexpected type"),
    "unsupported": lambda: NotImplementedError("type not supported"),
}


class _Faults:
    error: Exception | None = None
    at: str = "OUTPUT inserted.[committed_at]"
    bulk: Exception | None = None


def _faulty(connect: Callable[[], Any], faults: _Faults) -> Callable[[], Any]:
    def open_connection() -> Any:
        conn = connect()

        class Cursor:
            def __init__(self, cursor: Any) -> None:
                self._cursor = cursor
                self._armed = False

            def __getattr__(self, name: str) -> Any:
                return getattr(self._cursor, name)

            def execute(self, statement: str, params: Any = None) -> Any:
                self._armed = faults.error is not None and faults.at in statement
                return self._cursor.execute(statement, params)

            def fetchone(self) -> Any:
                row = self._cursor.fetchone()
                if self._armed and faults.error is not None:
                    raise faults.error
                return row

        class Connection:
            def __getattr__(self, name: str) -> Any:
                return getattr(conn, name)

            def cursor(self) -> Any:
                return Cursor(conn.cursor())

            def bulk_copy(self, *args: Any, **kwargs: Any) -> Any:
                if faults.bulk is not None:
                    raise faults.bulk
                return conn.bulk_copy(*args, **kwargs)

        return Connection()

    return open_connection


def _target(harness: MsSqlHarness, faults: _Faults) -> MsSqlTransferTarget:
    bound = harness.bind()
    harness.target = target = MsSqlTransferTarget(_faulty(harness.server.connect, faults), bound.table)
    return target


@pytest.mark.parametrize("exception", sorted(DRIVER_EXCEPTIONS))
def test_a_driver_fault_reading_the_commit_row_is_coded_and_keeps_the_old_target(exception: str) -> None:
    harness, faults = MsSqlHarness(ImportBackend.BCP), _Faults()
    target = _target(harness, faults)
    inv, plan = contract.full(), plan_of(harness, contract.full())
    old = contract.rows_for(3, start=900)
    harness.seed_target(plan, old)
    staged = contract.stage(harness, inv, [contract.rows_for(20)])
    faults.error = DRIVER_EXCEPTIONS[exception]()
    with pytest.raises(DponeError) as refused:
        target.publish(inv, staged)
    assert refused.value.code == "native_transfer.target_driver_fault"
    assert type(faults.error).__name__ in refused.value.detail
    assert contract.digest_of(plan, harness.read_target(plan)) == contract.digest_of(plan, old)
    faults.error = None
    assert target.reconcile(inv) is None
    assert target.publish(inv, staged).rows == 20


@pytest.mark.parametrize("exception", sorted(DRIVER_EXCEPTIONS))
def test_a_driver_fault_reading_a_committed_receipt_is_never_absent(exception: str) -> None:
    harness, faults = MsSqlHarness(ImportBackend.BCP), _Faults()
    target = _target(harness, faults)
    inv = contract.full()
    receipt = target.publish(inv, contract.stage(harness, inv, [contract.rows_for(9)]))
    faults.error, faults.at = DRIVER_EXCEPTIONS[exception](), "[committed_at] FROM"
    with pytest.raises(DponeError) as unread:
        target.reconcile(inv)
    assert unread.value.code == "native_transfer.target_driver_fault" and "reconcile" in unread.value.detail
    faults.error = None
    assert target.reconcile(inv) == receipt


def test_a_bulk_copy_conversion_fault_is_coded_and_stages_nothing() -> None:
    harness, faults = MsSqlHarness(ImportBackend.BCP), _Faults()
    target = _target(harness, faults)
    inv, plan = contract.full(), plan_of(harness, contract.full())
    target.prepare(inv)
    faults.bulk = ValueError("cannot convert value for column 3")
    with pytest.raises(DponeError) as refused:
        target.load_chunk(inv, 0, contract.chunk(contract.rows_for(5)))
    assert refused.value.code == "native_transfer.target_driver_fault" and "load chunk 0" in refused.value.detail
    assert harness.staged_rows(plan, 0) == []


STAGING_ALTERED = {
    # what ALTER TABLE ... ALTER COLUMN leaves in sys.columns; the stored values stay the source's
    "widened": ("k", "BIGINT", False),
    "nullable": ("id", "DECIMAL(20,0)", True),
}


@pytest.mark.parametrize("action", sorted(STAGING_ALTERED))
def test_a_staged_column_altered_after_verification_is_refused_at_publication(action: str) -> None:
    """A staging column retyped or made nullable between verification and publication: the publishing transaction
    refuses on the staging schema, and the old target stays exactly as it was."""
    harness = MsSqlHarness(ImportBackend.BCP)
    inv, plan = contract.full(), plan_of(harness, contract.full())
    old = contract.rows_for(3, start=900)
    harness.seed_target(plan, old)
    staged = contract.stage(harness, inv, [contract.rows_for(20)])
    name, type_name, nullable = STAGING_ALTERED[action]
    with harness.server.mutex:
        table = harness.server.tables[tsql.staging(plan)]
        table.columns[table.position(name)] = Column(name, type_name, nullable)
    with pytest.raises(DponeError) as refused:
        harness.target.publish(inv, staged)
    assert refused.value.code == "native_transfer.target_staging_schema_changed"
    assert f"column {name}" in refused.value.detail
    assert harness.target.reconcile(inv) is None
    assert contract.digest_of(plan, harness.read_target(plan)) == contract.digest_of(plan, old)
