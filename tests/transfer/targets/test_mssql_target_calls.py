"""The SQL Server target's call sequences, on the recording DB-API fake, with injected connection failures.

The outcome-level scenarios run in the shared contract suite; these tests pin what goes over the wire: one COMMIT per
mutation and nothing after it, no statement replayed after a lost acknowledgement, reconcile and verify that never
mutate, and a lock refusal that stops a call before it reads or writes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer_options import ImportBackend
from airflow_provider_dpone.transfer.targets.mssql import tsql
from airflow_provider_dpone.transfer.targets.mssql.arrow_bcp import bcp_rows
from airflow_provider_dpone.transfer.targets.mssql.loaders import BCP_SINGLE_BATCH, sqlclient_rows_per_statement
from airflow_provider_dpone.transfer.targets.mssql.schema import describe_tsql_type
from airflow_provider_dpone.transfer.targets.mssql.target import MsSqlTransferTarget
from airflow_provider_dpone.transfer.targets.mssql.values import sqlclient_row_encoder
from airflow_provider_dpone.transfer.values.row_digest import RowDigest
from airflow_provider_dpone.transfer.values.target import PublicationMode, TargetColumn, TargetPlan
from airflow_provider_dpone.transfer.values.target_receipts import ChunkEvidence
from tests.support.fakes.mssql_server import Column, EmulatedServer, Table
from tests.support.fakes.transfer_target import Fault
from tests.support.fixtures.target_harness import bind, chunk, evidence

pytestmark = pytest.mark.unit

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
TABLE, INV = bind(PLAN)
T0 = dt.datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
ROWS = [(2**64 - 1, Decimal("1234567890123456789012345678.0123456789"), T0), (0, None, T0)]


def _expectation(rows: list[tuple[object, ...]], ordinal: int = 0) -> ChunkEvidence:
    return evidence(PLAN, ordinal, rows)


def _setup(backend: ImportBackend = ImportBackend.BCP) -> tuple[EmulatedServer, MsSqlTransferTarget]:
    server = EmulatedServer()
    server.tables[tsql.target(PLAN)] = Table([Column("id", "DECIMAL(20,0)", False)], [[Decimal(7)]])
    return server, MsSqlTransferTarget(server.connect, TABLE, import_backend=backend, lock_timeout_ms=1_000)


def _staged(server: EmulatedServer, target: MsSqlTransferTarget) -> list[ChunkEvidence]:
    target.prepare(INV)
    target.load_chunk(INV, 0, chunk(INV, ROWS))
    assert target.verify_chunk(INV, _expectation(ROWS)) == _expectation(ROWS)
    return [_expectation(ROWS)]


def _last_connection(server: EmulatedServer) -> int:
    return max(c.connection for c in server.calls)


def test_full_refresh_publication_is_one_transaction_with_its_receipt() -> None:
    server, target = _setup()
    request = _staged(server, target)
    target.publish(INV, request)
    assert server.statements(_last_connection(server)) == [
        "session", "applock", "object_type", "select_receipt", "object_type", "lock_staging", "table_columns",
        "chunk_counts",
        "chunk_digest", "object_type", "drop_index", "drop_column", "rename", "rename", "drop_table", "insert_receipt", "commit",
    ]  # fmt: skip
    assert server.calls[-1].kind == "close"
    assert tsql.target(PLAN) in server.tables and tsql.staging(PLAN) not in server.tables


def test_lost_ack_is_never_followed_by_a_replay() -> None:
    server, target = _setup()
    request = _staged(server, target)
    server.faults.arm(Fault.LOST_ACK)
    with pytest.raises(DponeError, match="target_publication_outcome_unknown"):
        target.publish(INV, request)
    publisher = _last_connection(server)
    assert server.statements(publisher).count("commit") == 1
    assert server.statements(publisher)[-1] == "commit"
    assert target.reconcile(INV) is not None
    reconciler = _last_connection(server)
    assert not MUTATIONS & set(server.statements(reconciler))
    assert server.statements(reconciler)[-1] == "rollback"
    with pytest.raises(DponeError, match="target_publication_already_committed"):
        target.publish(INV, request)
    assert not MUTATIONS & set(server.statements(_last_connection(server)))


@pytest.mark.parametrize("statement", ["rename", "drop_table", "insert_receipt", "chunk_counts"])
def test_connection_drop_before_commit_is_a_definite_failure(statement: str) -> None:
    server, target = _setup()
    request = _staged(server, target)
    server.drop_at = statement
    with pytest.raises(DponeError, match="target_publication_failed"):
        target.publish(INV, request)
    assert "commit" not in server.statements(_last_connection(server))
    assert target.reconcile(INV) is None
    assert server.tables[tsql.target(PLAN)].rows == [[Decimal(7)]]  # the old table, untouched
    assert target.publish(INV, request).rows == 2  # absent is final: the same invocation publishes once


def test_commit_that_never_arrived_is_unknown_then_absent() -> None:
    server, target = _setup()
    request = _staged(server, target)
    server.faults.arm(Fault.COMMIT_DROPPED)
    with pytest.raises(DponeError, match="target_publication_outcome_unknown"):
        target.publish(INV, request)
    assert target.reconcile(INV) is None
    assert sum(1 for c in server.calls if c.kind == "commit") == 3  # prepare, load, publish: no second try


def test_reconcile_stops_at_a_refused_lock_before_reading() -> None:
    server, target = _setup()
    request = _staged(server, target)
    server.faults.arm(Fault.IN_FLIGHT)
    with pytest.raises(DponeError, match="target_publication_outcome_unknown"):
        target.publish(INV, request)
    with pytest.raises(DponeError, match="target_publication_in_flight"):
        target.reconcile(INV)
    assert server.statements(_last_connection(server)) == ["session", "applock"]
    server.settle(commit=True)
    assert target.reconcile(INV) is not None


def test_bcp_load_is_one_single_batch_bulk_copy_in_one_transaction() -> None:
    server, target = _setup()
    target.prepare(INV)
    target.load_chunk(INV, 0, chunk(INV, ROWS))
    loader = _last_connection(server)
    assert server.statements(loader) == [
        "session", "applock", "applock", "object_type", "chunk_present", "bulk_copy", "commit",
    ]  # fmt: skip
    bulk = next(c for c in server.calls if c.kind == "bulk_copy")
    assert bulk.params == (tsql.staging(PLAN), BCP_SINGLE_BATCH)


def test_sqlclient_load_sends_bounded_batches() -> None:
    server, target = _setup(ImportBackend.SQLCLIENT)
    target.prepare(INV)
    per_statement = sqlclient_rows_per_statement(PLAN)
    rows = [(i, None, T0) for i in range(per_statement * 2 + 1)]
    target.load_chunk(INV, 0, chunk(INV, rows))
    inserts = [c for c in server.calls if c.statement == "insert_values"]
    assert [len(c.params or ()) // 5 for c in inserts] == [per_statement, per_statement, 1]  # ordinal, position, 3
    assert target.verify_chunk(INV, _expectation(rows)) == _expectation(rows)


@pytest.mark.parametrize("backend", list(ImportBackend))
def test_a_refused_value_leaves_no_commit(backend: ImportBackend) -> None:
    server, target = _setup(backend)
    target.prepare(INV)
    staged = chunk(INV, ROWS).set_column(0, "id", pa.array([None, 0], pa.uint64()))  # NULL in a non-nullable column
    with pytest.raises(DponeError, match="target_value_invalid"):
        target.load_chunk(INV, 0, staged)
    assert "commit" not in server.statements(_last_connection(server))
    assert target.verify_chunk(INV, _expectation([])) == _expectation([])


def test_verify_only_reads() -> None:
    server, target = _setup()
    _staged(server, target)
    assert not MUTATIONS & set(server.statements(_last_connection(server)))


def test_prepare_after_commit_runs_no_ddl_on_staging() -> None:
    server, target = _setup()
    target.publish(INV, _staged(server, target))
    with pytest.raises(DponeError, match="target_publication_already_committed"):
        target.prepare(INV)
    kinds = server.statements(_last_connection(server))
    assert "drop_table_if_exists" not in kinds and "create_staging" not in kinds and "commit" not in kinds


def test_encoders_carry_exact_text_where_pymssql_would_lose_precision() -> None:
    columns = [c.column_type for c in PLAN.columns]
    (bcp, empty), _ = bcp_rows(chunk(INV, ROWS), PLAN)
    assert not empty
    assert list(bcp) == [
        "18446744073709551615",
        "1234567890123456789012345678.0123456789",
        "2026-03-01 12:00:00.123456",
    ]
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
    target = MsSqlTransferTarget(server.connect, TABLE)
    with pytest.raises(DponeError, match="target_unavailable"):
        target.reconcile(INV)
    assert [c.kind for c in server.calls] == ["connect", "execute", "close"]


def test_a_plan_hashed_with_the_postgresql_record_digest_is_refused_before_any_statement() -> None:
    """SQL Server computes the typed digest only: a chunk plan sealed with another method is a coded refusal."""
    server, target = _setup()
    invocation = dataclasses.replace(INV, row_digest=RowDigest.PG_RECORD_SHA256)
    with pytest.raises(DponeError) as info:
        target.verify_chunk(invocation, _expectation(ROWS))
    assert info.value.code == "native_transfer.row_digest_unsupported"
    assert server.calls == []  # refused before it connects
    assert target.row_digests == (RowDigest.TYPED_SHA256,)
