"""Every PostgreSQL target session is pinned, and every driver exception is a coded failure.

A role's own defaults (``ALTER ROLE ... SET``) change how the server renders values, which functions unqualified
names resolve to and which snapshot a transaction reads: the adapter sets what it depends on in every transaction,
reads it back, and refuses a session where it does not hold. A driver exception outside the DB-API classes (psycopg
cannot parse a value, pyarrow cannot convert one) is ``native_transfer.target_driver_fault``, never a call that
looks interrupted: the publishing transaction it broke is reported as refused, a receipt it could not read is never
"absent".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pyarrow as pa
import pytest

import tests.transfer.targets.test_target_contract as contract
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import quote_postgres
from airflow_provider_dpone.core.manifest.transfer import StringMapping
from airflow_provider_dpone.transfer.targets.postgres import session as pinned
from airflow_provider_dpone.transfer.targets.postgres.target import PostgresTransferTarget
from airflow_provider_dpone.transfer.values.target import RECEIPT_TABLE
from tests.support.fixtures.postgres import PostgresServer
from tests.support.fixtures.postgres_hostile import DriverFaultHarness, HostileHarness, hostile_role
from tests.support.fixtures.target_harness import FaultyConnection, plan_of

pytestmark = pytest.mark.contract


@pytest.fixture
def role_dsn(postgres_server: PostgresServer) -> Iterator[str]:
    with hostile_role(postgres_server) as dsn:
        yield dsn


@pytest.fixture
def hostile(postgres_server: PostgresServer, role_dsn: str) -> Iterator[HostileHarness]:
    made = HostileHarness(postgres_server.dsn, role_dsn)
    try:
        yield made
    finally:
        made.close()


def test_a_role_with_hostile_settings_publishes_exactly_and_verifies(hostile: HostileHarness) -> None:
    """DateStyle SQL/DMY, IntervalStyle sql_standard, TimeZone Pacific/Chatham, extra_float_digits -3, bytea_output
    escape, client_encoding LATIN1, standard_conforming_strings off, REPEATABLE READ, synchronous_commit off and a
    search_path whose first schema shadows sha256, convert_to and the advisory locks: the full refresh stores exactly the source's rows, and
    its receipt reads back."""
    inv, plan = contract.full(), plan_of(hostile, contract.full())
    rows = [*contract.rows_for(40), *contract.rows_for(25, start=40)]
    staged = contract.stage(hostile, inv, [rows[:40], rows[40:]])
    assert staged == [contract.evidence(0, rows[:40]), contract.evidence(1, rows[40:])]
    receipt = hostile.target.publish(inv, staged)
    assert receipt.rows == 65
    assert hostile.target.reconcile(inv) == receipt
    assert contract.digest_of(plan, hostile.read_target(plan)) == contract.digest_of(plan, rows)


def test_a_role_with_hostile_settings_stores_text_exactly(hostile: HostileHarness) -> None:
    """Text travels in the client encoding: under the role's LATIN1, UTF-8 text would be stored as other characters."""
    target = hostile.bind("notes", StringMapping.TEXT)
    inv = contract.TargetInvocation(contract.OPERATION, "inv-text-0001", contract.TEXT_COLUMNS, None)
    rows: contract.Rows = [(1, "é", None), (2, "", "日本"), (3, "a\tb", "ü😀")]
    expected = contract.evidence(0, rows, contract.TEXT_COLUMNS)
    target.prepare(inv)
    target.load_chunk(inv, 0, contract.chunk(rows, contract.TEXT_COLUMNS))
    assert target.verify_chunk(inv, expected) == expected
    assert target.publish(inv, [expected]).rows == 3
    plan = plan_of(hostile, inv, "notes", StringMapping.TEXT)
    assert contract.digest_of(plan, hostile.read_target(plan)) == contract.digest_of(plan, rows)


def test_a_role_with_hostile_settings_replaces_a_window_exactly(hostile: HostileHarness) -> None:
    inv, plan = contract.windowed(), plan_of(hostile, contract.windowed())
    outside, _ = contract._window_seed(hostile, plan)
    new = contract.rows_for(8, start=50)
    receipt = hostile.target.publish(inv, contract.stage(hostile, inv, [new[:5], new[5:]]))
    assert receipt.rows == 8 and hostile.target.reconcile(inv) == receipt
    assert contract.digest_of(plan, hostile.read_target(plan)) == contract.digest_of(plan, outside + new)


class _Unpinned:
    """A connection that drops the provider's settings on their way (as a pooler that resets the session would):
    the role's own defaults stay in force."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, statement: str, params: Any = None) -> Any:
        if statement in (pinned.PIN, pinned.SET_ISOLATION):
            return self._conn.execute("SELECT 1")
        return self._conn.execute(statement, params)

    def cursor(self) -> Any:
        cursor = self._conn.cursor()

        class Cursor:
            def __getattr__(self, name: str) -> Any:
                return getattr(cursor, name)

            def __enter__(self) -> Any:
                cursor.__enter__()
                return self

            def __exit__(self, *exc: object) -> Any:
                return cursor.__exit__(*exc)

            def execute(self, statement: str, *args: Any, **kwargs: Any) -> Any:
                if statement in (pinned.PIN, pinned.SET_ISOLATION):
                    return cursor.execute("SELECT 1")
                return cursor.execute(statement, *args, **kwargs)

        return Cursor()


def test_a_session_whose_settings_do_not_hold_is_refused_before_any_change(hostile: HostileHarness) -> None:
    inv, plan = contract.full(), plan_of(hostile, contract.full())

    def unpinned() -> psycopg.Connection[Any]:
        conn = psycopg.connect(hostile.role_dsn, autocommit=False)
        return _Unpinned(FaultyConnection(conn, hostile.faults, hostile.held, psycopg.OperationalError))  # type: ignore[return-value]

    target = PostgresTransferTarget(unpinned, hostile.copy_connect, hostile.bind().table)
    with pytest.raises(DponeError) as refused:
        target.prepare(inv)
    assert refused.value.code == "native_transfer.target_session_unsupported"
    for named in (
        "DateStyle 'SQL, DMY'",
        "search_path",
        "transaction_isolation 'repeatable read'",
        "synchronous_commit",
    ):
        assert named in refused.value.detail
    assert not hostile.staging_exists(plan)


def test_a_bulk_session_whose_settings_do_not_hold_stages_nothing(hostile: HostileHarness) -> None:
    inv, plan = contract.full(), plan_of(hostile, contract.full())
    target = PostgresTransferTarget(hostile._connect, lambda: _Unpinned(hostile.copy_connect()), hostile.bind().table)
    target.prepare(inv)
    with pytest.raises(DponeError) as refused:
        target.load_chunk(inv, 0, contract.chunk(contract.rows_for(10)))
    assert refused.value.code == "native_transfer.target_session_unsupported"
    assert hostile.staged_rows(plan, 0) == []


# -- driver exceptions outside the DB-API classes ----------------------------------------------------------------
def _unicode_error() -> UnicodeDecodeError:
    return UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")


DRIVER_EXCEPTIONS = {
    "psycopg-datestyle": lambda: NotImplementedError("can't parse timestamptz with DateStyle 'SQL, DMY'"),
    "encoding": _unicode_error,
    "overflow": lambda: OverflowError("date value out of range"),
    "unknown-oid": lambda: KeyError(1184),
    "conversion": lambda: TypeError("unexpected type"),
}


@pytest.fixture
def faulty(postgres_server: PostgresServer) -> Iterator[DriverFaultHarness]:
    made = DriverFaultHarness(postgres_server.dsn)
    try:
        yield made
    finally:
        made.close()


@pytest.mark.parametrize("exception", sorted(DRIVER_EXCEPTIONS))
def test_a_driver_fault_reading_the_commit_row_refuses_and_keeps_the_old_target(
    faulty: DriverFaultHarness, exception: str
) -> None:
    """The publishing transaction's receipt row cannot be handed over: a coded refusal naming the class, nothing
    committed (the old target intact, no receipt), and the same staging publishes once the driver reads again."""
    inv, plan = contract.full(), plan_of(faulty, contract.full())
    old = contract.rows_for(3, start=900)
    faulty.seed_target(plan, old)
    rows = contract.rows_for(30)
    staged = contract.stage(faulty, inv, [rows])
    faulty.error = DRIVER_EXCEPTIONS[exception]()
    with pytest.raises(DponeError) as refused:
        faulty.target.publish(inv, staged)
    assert refused.value.code == "native_transfer.target_driver_fault"
    assert type(faulty.error).__name__ in refused.value.detail and "publish" in refused.value.detail
    assert contract.digest_of(plan, faulty.read_target(plan)) == contract.digest_of(plan, old)
    faulty.error = None
    assert faulty.target.reconcile(inv) is None
    assert faulty.target.publish(inv, staged).rows == 30


@pytest.mark.parametrize("exception", sorted(DRIVER_EXCEPTIONS))
def test_a_driver_fault_reading_a_committed_receipt_is_never_absent(faulty: DriverFaultHarness, exception: str) -> None:
    inv = contract.full()
    receipt = faulty.target.publish(inv, contract.stage(faulty, inv, [contract.rows_for(12)]))
    faulty.error, faulty.at = DRIVER_EXCEPTIONS[exception](), "receipt"
    with pytest.raises(DponeError) as unread:
        faulty.target.reconcile(inv)
    assert unread.value.code == "native_transfer.target_driver_fault" and "reconcile" in unread.value.detail
    faulty.error = None
    assert faulty.target.reconcile(inv) == receipt


@pytest.mark.parametrize(
    "error",
    [pa.ArrowInvalid("value out of range"), pa.ArrowTypeError("cannot convert"), pa.ArrowNotImplementedError("no")],
    ids=lambda e: type(e).__name__,
)
def test_a_bulk_driver_conversion_fault_is_coded_and_stages_nothing(
    faulty: DriverFaultHarness, error: Exception
) -> None:
    inv, plan = contract.full(), plan_of(faulty, contract.full())
    faulty.target.prepare(inv)
    faulty.ingest_error = error
    with pytest.raises(DponeError) as refused:
        faulty.target.load_chunk(inv, 0, contract.chunk(contract.rows_for(10)))
    assert refused.value.code == "native_transfer.target_driver_fault"
    assert type(error).__name__ in refused.value.detail
    assert faulty.staged_rows(plan, 0) == []


def test_a_stored_receipt_the_provider_never_wrote_is_a_receipt_conflict(faulty: DriverFaultHarness) -> None:
    """A receipt row changed by hand (a mode no publication has) is read by the driver without fault: it is the
    receipt table's conflict, not the driver's, and never "absent"."""
    inv, plan = contract.full(), plan_of(faulty, contract.full())
    faulty.target.publish(inv, contract.stage(faulty, inv, [contract.rows_for(4)]))
    with psycopg.connect(faulty.dsn, autocommit=True) as admin:
        admin.execute(
            f"UPDATE {quote_postgres(plan.target_schema)}.{RECEIPT_TABLE} SET mode = 'bogus' WHERE publication_id = %s",
            (plan.publication_id,),
        )
    with pytest.raises(DponeError) as conflict:
        faulty.target.reconcile(inv)
    assert conflict.value.code == "native_transfer.target_receipt_conflict"
