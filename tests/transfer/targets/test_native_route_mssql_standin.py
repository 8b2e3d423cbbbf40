"""The shared route corpus into the SQL Server adapter over the stand-in (``tests/support/fakes/mssql_server.py``).

No SQL Server runs here: this runs :class:`~tests.support.transfer.native_route_scenarios.RouteCorpus` through the
production :class:`MsSqlTransferTarget` (BCP and parameterized batches) on the recording stand-in, with the in-process
ClickHouse engine as the source. It proves the corpus and the SQL Server harness logic run end to end, and what the
stand-in models (value conversion, the BCP bind rules, the T-SQL digest, locks, COMMIT faults); what only a server can
show is left to ``make test-real`` (``test_native_route_mssql_real.py``, the same cases).
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.core.manifest.transfer_options import ImportBackend
from airflow_provider_dpone.transfer.targets.mssql import tsql
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.target import RECEIPT_TABLE
from tests.support.fixtures.target_harness import MsSqlHarness
from tests.support.transfer.native_chdb import admin, db
from tests.support.transfer.native_route_chdb import multiset
from tests.support.transfer.native_route_corpus import CORPUS
from tests.support.transfer.native_route_corruption import CorruptionCorpus
from tests.support.transfer.native_route_pg import PgRoute
from tests.support.transfer.native_route_scenarios import MakeRoute, RouteCorpus, rows_of

__all__ = ["admin", "db"]  # fixtures shared through tests/support/transfer/native_chdb.py

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


class StandInRoute(PgRoute):
    """The route harness with the SQL Server target on the stand-in; rows are read from its committed tables."""

    def _rows(self, table: str) -> list[list[object]]:
        server = self.harness.server  # type: ignore[attr-defined]
        with server.mutex:
            stored = server.tables.get(tsql.qualified(self.harness.schema, table))
            return [] if stored is None else [list(row) for row in stored.rows]

    def target_rows(self) -> collections.Counter[tuple[object, ...]]:
        return multiset(self._rows(self.table))

    def receipts(self) -> int:
        return len(self._rows(RECEIPT_TABLE))

    def tamper_staging(self) -> None:
        """Change the first staged row's first column, in every staging table (as an UPDATE by SQL would)."""
        server = self.harness.server  # type: ignore[attr-defined]
        with server.mutex:
            staged = [table for name, table in server.tables.items() if "__dpone_stg" in name]
            assert staged, "no staging table to tamper with"
            for table in staged:
                row = next(r for r in table.rows if r[0] == 0)
                position = 2  # after the chunk ordinal and the row position
                row[position] = row[position] + 1000

    def rewrite_target_inserts(self, *, change: bool = True) -> None:
        """What the target stores for each row INSERT ... SELECT gives it: ``ver`` plus 1000 (a trigger the
        prepare-time check of ``sys.triggers`` did not see, e.g. one created after it); ``change=False``: the row."""
        server = self.harness.server  # type: ignore[attr-defined]
        target = tsql.qualified(self.harness.schema, self.table)
        position = 1  # id, ver, ...

        def rewrite(row: list[object]) -> list[object]:
            value = row[position]
            return [*row[:position], value + 1000 if change else value, *row[position + 1 :]]  # type: ignore[operator]

        server.insert_rewrites[target] = rewrite


@pytest.fixture(params=[ImportBackend.BCP, ImportBackend.SQLCLIENT], ids=["bcp", "batches"])
def make_route(request: pytest.FixtureRequest) -> MakeRoute:
    harness = MsSqlHarness(request.param)

    def make(root: Path, relation: RelationRef, **fields: Any) -> PgRoute:
        return StandInRoute(root, relation, harness, **fields)  # type: ignore[arg-type]

    return make


class TestRouteOnTheSqlServerStandIn(RouteCorpus):
    """Every corpus table and every kill of the matrix, into the SQL Server adapter over the stand-in."""


class TestCorruptionOnTheSqlServerStandIn(CorruptionCorpus):
    """Every corruption of the transfer path, caught before publication into the SQL Server adapter."""


@pytest.mark.parametrize("backend", [ImportBackend.BCP, ImportBackend.SQLCLIENT], ids=["bcp", "batches"])
def test_the_route_verifies_every_chunk_by_the_digest_sql_server_computes(
    admin: Any, db: str, tmp_path: Path, backend: ImportBackend
) -> None:
    """Every loaded chunk of every corpus table is verified by the T-SQL typed digest over what the server stores,
    once while loading and once more in the publishing transaction, under a table lock on staging."""
    harness = MsSqlHarness(backend)
    for table in CORPUS:
        relation = table.create(admin, db)
        fields = {"table": f"{table.name}_rb", "string_mapping": table.string_mapping}
        route = StandInRoute(tmp_path / table.name, relation, harness, **fields)  # type: ignore[arg-type]
        before = len(harness.server.calls)
        route.run()
        calls = [c for c in harness.server.calls[before:] if c.kind == "execute"]
        loaded = {c.params[0] for c in calls if c.statement == "chunk_present" and c.params and c.params[0] >= 0}
        digested = [c.params[0] for c in calls if c.statement == "chunk_digest" and c.params]
        assert route.target_rows() == rows_of(admin, relation), table.name
        assert loaded and sorted(digested) == sorted([*loaded, *loaded]), table.name
        statements = [c.statement for c in calls]
        assert "lock_staging" in statements, table.name
        locked = statements.index("lock_staging")
        assert statements.count("chunk_digest") - statements[:locked].count("chunk_digest") == len(loaded), table.name


def test_no_verification_waits_on_a_chunk_load_whose_bulk_statement_escalated(
    admin: Any, db: str, tmp_path: Path
) -> None:
    """SQL Server locking under the pipelined route (the stand-in's model of the documented rules): each 5,000-row
    chunk goes as one INSERT BULK, whose locks escalate to a table lock held until the chunk commits; a verifying
    READ COMMITTED read of staging during such a load would wait past LOCK_TIMEOUT (error 1222) and fail as
    ``target_unavailable`` although nothing is wrong. The schedule is the adverse one: every load keeps its locks for
    longer than the lock timeout, and every verification waits for a concurrent load to hold locks, if one exists."""
    admin.command(f"CREATE TABLE {db}.bulk (id UInt64, ver UInt64) ENGINE = ReplacingMergeTree(ver) ORDER BY id")
    admin.command(f"INSERT INTO {db}.bulk SELECT number, 1 FROM numbers(15000)")
    relation = RelationRef(database=db, table="bulk")
    harness = MsSqlHarness(ImportBackend.BCP, lock_timeout_ms=200)
    harness.server.load_seconds, harness.server.adverse_reads = 0.5, 0.3
    route = StandInRoute(tmp_path, relation, harness, table="bulk_copy")  # type: ignore[arg-type]
    route.run(chunk_rows=5000)
    assert route.target_rows() == rows_of(admin, relation)
    assert harness.server.escalations >= 3, "every chunk's bulk statement escalated"
    assert harness.server.lock_timeouts == 0 and not harness.server.lock_waits
