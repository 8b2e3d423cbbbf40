"""The stand-in's SQL Server locking, against SQL Server's documented rules (not against the adapter).

From "Transaction locking and row versioning guide" and "Lock escalation" (SQL Server documentation): under the
default READ COMMITTED isolation level (locking, no READ_COMMITTED_SNAPSHOT) a reader takes shared locks and waits
for an incompatible exclusive lock; rows a transaction inserts stay exclusively locked until it ends; one statement
that acquires at least 5,000 locks on one table escalates them to a table lock (a bulk load without TABLOCK is such a
statement); a wait past the session's LOCK_TIMEOUT fails with error 1222. The adapter's reads of staging (a chunk's
verification) are checked to wait and time out exactly where those rules say, and nowhere else.
"""

from __future__ import annotations

import threading
import time

import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer_options import ImportBackend
from airflow_provider_dpone.transfer.targets.mssql import tsql
from airflow_provider_dpone.transfer.targets.mssql.target import MsSqlTransferTarget
from airflow_provider_dpone.transfer.values.target import PublicationMode, TargetColumn, TargetPlan
from tests.support.fakes.mssql_server import EmulatedServer, FakeConnection
from tests.support.fixtures.target_harness import bind, chunk, evidence

pytestmark = pytest.mark.unit

PLAN = TargetPlan(
    invocation_id="locking-invocation-0001",
    target_schema="dbo",
    target_table="t",
    columns=(TargetColumn(name="k", source_type="Int64"),),
    mode=PublicationMode.FULL_REFRESH,
)
TIMEOUT_MS = 200


def _staged(backend: ImportBackend = ImportBackend.BCP) -> tuple[EmulatedServer, MsSqlTransferTarget]:
    """Chunks 0 and 1 committed."""
    server = EmulatedServer()
    table, invocation = bind(PLAN)
    target = MsSqlTransferTarget(server.connect, table, import_backend=backend, lock_timeout_ms=TIMEOUT_MS)
    target.prepare(invocation)
    for ordinal in (0, 1):
        target.load_chunk(invocation, ordinal, chunk(invocation, [(ordinal * 10 + i,) for i in range(3)]))
    return server, target


def _open_bulk_load(server: EmulatedServer, ordinal: int, rows: int) -> FakeConnection:
    """Another transaction's bulk load (one INSERT BULK statement, no TABLOCK) of ``rows`` rows, not committed."""
    conn = server.connect()
    conn.cursor().execute(tsql.session_settings(30_000))
    conn.bulk_copy(tsql.staging(PLAN), [(ordinal, i, i) for i in range(rows)])
    return conn


def _verify(target: MsSqlTransferTarget, ordinal: int) -> bool:
    rows = [(ordinal * 10 + i,) for i in range(3)]
    expected = evidence(PLAN, ordinal, rows)
    return target.verify_chunk(bind(PLAN)[1], expected) == expected


def test_a_bulk_load_below_the_escalation_threshold_does_not_block_a_read_of_another_chunk() -> None:
    server, target = _staged()
    load = _open_bulk_load(server, 2, 4999)
    assert _verify(target, 0)  # the seek on chunk 0 ends at chunk 1's committed rows
    assert server.escalations == 0 and not server.lock_waits
    load.rollback()


def test_a_bulk_load_of_5000_rows_escalates_and_a_reader_times_out_after_lock_timeout() -> None:
    server, target = _staged()
    load = _open_bulk_load(server, 2, 5000)
    assert server.escalations == 1
    started = time.monotonic()
    with pytest.raises(DponeError) as refused:
        _verify(target, 0)
    assert refused.value.code == "native_transfer.target_unavailable" and "1222" in str(refused.value)
    assert time.monotonic() - started >= TIMEOUT_MS / 1000
    assert server.lock_timeouts == 1
    load.rollback()
    assert _verify(target, 0)  # the table lock ended with the transaction


def test_a_waiting_reader_proceeds_when_the_load_commits_within_its_lock_timeout() -> None:
    server, target = _staged()
    load = _open_bulk_load(server, 2, 5000)
    timer = threading.Timer(TIMEOUT_MS / 4000, load.commit)
    timer.start()
    assert _verify(target, 0)
    timer.join()
    assert server.lock_waits and server.lock_timeouts == 0


def test_the_seek_waits_for_a_locked_row_just_after_its_chunk() -> None:
    """The seek on chunk 1 reads the first key after it to find its end: chunk 2's uncommitted row."""
    server, target = _staged()
    load = _open_bulk_load(server, 2, 1)
    with pytest.raises(DponeError, match="1222"):
        _verify(target, 1)
    assert _verify(target, 0)
    load.rollback()


@pytest.mark.parametrize(("backend", "waits"), [(ImportBackend.BCP, True), (ImportBackend.SQLCLIENT, False)])
def test_the_adapters_own_chunk_load_blocks_a_reader_only_when_one_statement_escalates(
    backend: ImportBackend, waits: bool
) -> None:
    """A 5,000-row chunk: BCP sends it as one INSERT BULK (escalates to a table lock); parameter batches send at most
    1,000 rows per INSERT (row locks only). Chunk 0 is read while the chunk-2 transaction is complete, not committed."""
    server, target = _staged(backend)
    _, invocation = bind(PLAN)
    outcome: list[object] = []

    def read_chunk_0() -> None:
        try:
            outcome.append(_verify(target, 0))
        except DponeError as exc:
            outcome.append(exc.code)

    server.faults.before_next_commit(read_chunk_0)
    target.load_chunk(invocation, 2, chunk(invocation, [(i,) for i in range(5000)]))
    assert outcome == (["native_transfer.target_unavailable"] if waits else [True])
    assert server.escalations == int(waits)
