"""The SQL Server target's call sequences, on the recording DB-API fake, with injected connection failures.

The outcome-level scenarios run in the shared contract suite; these tests pin what goes over the wire: one COMMIT per
mutation and nothing after it, no statement replayed after a lost acknowledgement, reconcile and verify that never
mutate, and a lock refusal that stops a call before it reads or writes.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from airflow_provider_dpone.adapters.mssql import tsql
from airflow_provider_dpone.adapters.mssql.loaders import BCP_SINGLE_BATCH, sqlclient_rows_per_statement
from airflow_provider_dpone.adapters.mssql.schema import describe_tsql_type
from airflow_provider_dpone.adapters.mssql.target import MsSqlTransferTarget
from airflow_provider_dpone.adapters.mssql.values import bcp_row_encoder, sqlclient_row_encoder
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.native_transfer_options import ImportBackend
from airflow_provider_dpone.contracts.transfer_target import PublicationMode, TargetColumn, TargetPlan
from airflow_provider_dpone.contracts.transfer_target_receipts import (
    ChunkExpectation,
    PublicationRequest,
    PublicationState,
)
from airflow_provider_dpone.contracts.typed_digest import MultisetDigest
from tests.fakes.mssql_server import Column, EmulatedServer, Table
from tests.fakes.transfer_target import Fault

MUTATIONS = {
    "create_receipt_table", "insert_receipt", "drop_table_if_exists", "create_staging", "create_staging_index",
    "delete_chunk", "insert_values", "delete_window", "insert_from_staging", "drop_index", "drop_column", "rename",
    "drop_table", "bulk_copy", "commit",
}  # fmt: skip
PLAN = TargetPlan(
    invocation_id="calls-invocation-01",
    target_schema="dbo",
    target_table="events",
    columns=(
        TargetColumn(name="id", source_type="UInt64"),
        TargetColumn(name="amount", source_type="Nullable(Decimal(38, 10))"),
        TargetColumn(name="ts", source_type="DateTime64(6, 'UTC')"),
    ),
    mode=PublicationMode.FULL_REFRESH,
)
T0 = dt.datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
ROWS = [(2**64 - 1, Decimal("1234567890123456789012345678.0123456789"), T0), (0, None, T0)]


def _expectation(rows: list[tuple[object, ...]], ordinal: int = 0) -> ChunkExpectation:
    acc = MultisetDigest(PLAN.typed_columns)
    acc.add_rows(rows)
    return ChunkExpectation.of(ordinal, acc)


def _setup(backend: ImportBackend = ImportBackend.BCP) -> tuple[EmulatedServer, MsSqlTransferTarget]:
    server = EmulatedServer()
    server.tables[tsql.target(PLAN)] = Table([Column("id", "DECIMAL(20,0)", False)], [[Decimal(7)]])
    return server, MsSqlTransferTarget(server.connect, import_backend=backend, lock_timeout_ms=1_000)


def _staged(server: EmulatedServer, target: MsSqlTransferTarget) -> PublicationRequest:
    target.prepare(PLAN)
    target.load_chunk(PLAN, 0, ROWS)
    target.verify_chunk(PLAN, _expectation(ROWS)).require_matched()
    return PublicationRequest(chunks=(_expectation(ROWS),))


def _last_connection(server: EmulatedServer) -> int:
    return max(c.connection for c in server.calls)


def test_full_refresh_publication_is_one_transaction_with_its_receipt() -> None:
    server, target = _setup()
    request = _staged(server, target)
    target.publish(PLAN, request)
    assert server.statements(_last_connection(server)) == [
        "session", "applock", "object_type", "select_receipt", "object_type", "chunk_counts", "object_type",
        "drop_index", "drop_column", "rename", "rename", "drop_table", "insert_receipt", "commit",
    ]  # fmt: skip
    assert server.calls[-1].kind == "close"
    assert tsql.target(PLAN) in server.tables and tsql.staging(PLAN) not in server.tables


def test_lost_ack_is_never_followed_by_a_replay() -> None:
    server, target = _setup()
    request = _staged(server, target)
    server.faults.arm(Fault.LOST_ACK)
    with pytest.raises(DponeError, match="target_publication_outcome_unknown"):
        target.publish(PLAN, request)
    publisher = _last_connection(server)
    assert server.statements(publisher).count("commit") == 1
    assert server.statements(publisher)[-1] == "commit"
    assert target.reconcile(PLAN).state is PublicationState.COMMITTED
    reconciler = _last_connection(server)
    assert not MUTATIONS & set(server.statements(reconciler))
    assert server.statements(reconciler)[-1] == "rollback"
    with pytest.raises(DponeError, match="target_publication_already_committed"):
        target.publish(PLAN, request)
    assert not MUTATIONS & set(server.statements(_last_connection(server)))


@pytest.mark.parametrize("statement", ["rename", "drop_table", "insert_receipt", "chunk_counts"])
def test_connection_drop_before_commit_is_a_definite_failure(statement: str) -> None:
    server, target = _setup()
    request = _staged(server, target)
    server.drop_at = statement
    with pytest.raises(DponeError, match="target_publication_failed"):
        target.publish(PLAN, request)
    assert "commit" not in server.statements(_last_connection(server))
    assert target.reconcile(PLAN).state is PublicationState.ABSENT
    assert server.tables[tsql.target(PLAN)].rows == [[Decimal(7)]]  # the old table, untouched
    assert target.publish(PLAN, request).rows == 2  # absent is final: the same invocation publishes once


def test_commit_that_never_arrived_is_unknown_then_absent() -> None:
    server, target = _setup()
    request = _staged(server, target)
    server.faults.arm(Fault.COMMIT_DROPPED)
    with pytest.raises(DponeError, match="target_publication_outcome_unknown"):
        target.publish(PLAN, request)
    assert target.reconcile(PLAN).state is PublicationState.ABSENT
    assert sum(1 for c in server.calls if c.kind == "commit") == 3  # prepare, load, publish: no second try


def test_reconcile_stops_at_a_refused_lock_before_reading() -> None:
    server, target = _setup()
    request = _staged(server, target)
    server.faults.arm(Fault.IN_FLIGHT)
    with pytest.raises(DponeError, match="target_publication_outcome_unknown"):
        target.publish(PLAN, request)
    with pytest.raises(DponeError, match="target_publication_in_flight"):
        target.reconcile(PLAN)
    assert server.statements(_last_connection(server)) == ["session", "applock"]
    server.settle(commit=True)
    assert target.reconcile(PLAN).state is PublicationState.COMMITTED


def test_bcp_load_is_one_single_batch_bulk_copy_in_one_transaction() -> None:
    server, target = _setup()
    target.prepare(PLAN)
    target.load_chunk(PLAN, 0, ROWS)
    loader = _last_connection(server)
    assert server.statements(loader) == [
        "session", "applock", "applock", "object_type", "chunk_present", "bulk_copy", "commit",
    ]  # fmt: skip
    bulk = next(c for c in server.calls if c.kind == "bulk_copy")
    assert bulk.params == (tsql.staging(PLAN), BCP_SINGLE_BATCH)


def test_sqlclient_load_sends_bounded_batches() -> None:
    server, target = _setup(ImportBackend.SQLCLIENT)
    target.prepare(PLAN)
    per_statement = sqlclient_rows_per_statement(PLAN)
    rows = [(i, None, T0) for i in range(per_statement * 2 + 1)]
    assert target.load_chunk(PLAN, 0, rows).rows_sent == len(rows)
    inserts = [c for c in server.calls if c.statement == "insert_values"]
    assert [len(c.params or ()) // 4 for c in inserts] == [per_statement, per_statement, 1]
    assert target.verify_chunk(PLAN, _expectation(rows)).matched


@pytest.mark.parametrize("backend", list(ImportBackend))
def test_a_refused_value_leaves_no_commit(backend: ImportBackend) -> None:
    server, target = _setup(backend)
    target.prepare(PLAN)
    with pytest.raises(DponeError, match="target_value_invalid"):
        target.load_chunk(PLAN, 0, [*ROWS, (-1, None, T0)])
    assert "commit" not in server.statements(_last_connection(server))
    assert target.verify_chunk(PLAN, _expectation([])).matched


def test_verify_only_reads() -> None:
    server, target = _setup()
    _staged(server, target)
    assert not MUTATIONS & set(server.statements(_last_connection(server)))


def test_prepare_after_commit_runs_no_ddl_on_staging() -> None:
    server, target = _setup()
    target.publish(PLAN, _staged(server, target))
    with pytest.raises(DponeError, match="target_publication_already_committed"):
        target.prepare(PLAN)
    kinds = server.statements(_last_connection(server))
    assert "drop_table_if_exists" not in kinds and "create_staging" not in kinds and "commit" not in kinds


def test_encoders_carry_exact_text_where_pymssql_would_lose_precision() -> None:
    columns = [c.column_type for c in PLAN.columns]
    bcp = bcp_row_encoder(columns)(ROWS[0])
    assert bcp == ["18446744073709551615", "1234567890123456789012345678.0123456789", "2026-03-01 12:00:00.123456"]
    sqlclient = sqlclient_row_encoder(columns)(ROWS[0])
    assert sqlclient[0] == 2**64 - 1 and sqlclient[2] == "2026-03-01T12:00:00.123456"


@pytest.mark.parametrize(
    ("row", "spelled"),
    [
        (("decimal", 13, 20, 0), "DECIMAL(20,0)"),
        (("numeric", 9, 18, 4), "DECIMAL(18,4)"),
        (("datetime2", 7, 23, 3), "DATETIME2(3)"),
        (("varbinary", -1, 0, 0), "VARBINARY(MAX)"),
        (("nvarchar", -1, 0, 0), "NVARCHAR(MAX)"),
        (("nvarchar", 200, 0, 0), "NVARCHAR(200)"),
        (("binary", 16, 0, 0), "BINARY(16)"),
        (("uniqueidentifier", 16, 0, 0), "UNIQUEIDENTIFIER"),
        (("tinyint", 1, 3, 0), "TINYINT"),
        (("datetime", 8, 23, 3), "DATETIME"),
    ],
)
def test_sys_columns_rows_are_spelled_like_the_type_mapping(row: tuple[str, int, int, int], spelled: str) -> None:
    assert describe_tsql_type(*row) == spelled


def test_a_failing_session_setup_closes_the_connection() -> None:
    server = EmulatedServer()
    server.fail_at = "session"
    target = MsSqlTransferTarget(server.connect)
    with pytest.raises(DponeError, match="target_unavailable"):
        target.reconcile(PLAN)
    assert [c.kind for c in server.calls] == ["connect", "execute", "close"]
