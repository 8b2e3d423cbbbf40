"""The route end to end into a real PostgreSQL: the shared exactness corpus and recovery matrix of seed 003.

Source: the real ClickHouse engine (in-process). Stage and journal: file:// under tmp. Target: the PostgreSQL adapter
on a throwaway server, through the bridge, with COMMIT faults injected by the harness's connection proxy. The cases
are :class:`~tests.support.transfer.native_route_scenarios.RouteCorpus`, the same ones SQL Server runs under
``make test-real``. "Source-free" is proved by the connector's count and by a client factory that fails the test if
it is called at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import quote_postgres
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from tests.support.fakes.transfer_target import Fault
from tests.support.fixtures.postgres_hostile import DriverFaultHarness, HostileHarness, hostile_role
from tests.support.fixtures.target_harness import PostgresHarness
from tests.support.transfer.native_chdb import admin, db
from tests.support.transfer.native_route_corruption import CorruptionCorpus
from tests.support.transfer.native_route_pg import PgRoute
from tests.support.transfer.native_route_scenarios import EVENTS_TABLE, MakeRoute, RouteCorpus, rows_of

__all__ = ["admin", "db"]  # fixtures shared through tests/support/transfer/native_chdb.py

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture
def harness(postgres_server) -> Iterator[PostgresHarness]:
    created = PostgresHarness(postgres_server.dsn)
    yield created
    created.close()


@pytest.fixture
def make_route(harness: PostgresHarness) -> MakeRoute:
    def make(root: Path, relation: RelationRef, **fields: Any) -> PgRoute:
        return PgRoute(root, relation, harness, **fields)

    return make


class TestRouteOnPostgres(RouteCorpus):
    """Every corpus table and every kill of the matrix, into PostgreSQL."""


class TestCorruptionOnPostgres(CorruptionCorpus):
    """Every corruption of the transfer path, caught before publication into PostgreSQL."""

    def test_a_staged_column_retyped_after_verification_is_refused_at_publication(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, relations: dict[str, RelationRef]
    ) -> None:
        """``id numeric(20,0)`` retyped to ``numeric`` once every chunk was verified: the values hash alike, the
        staging schema does not; nothing is published, and the old target is intact."""
        route, old = self._second(admin, db, make_route, tmp_path, relations["events"])
        altered: list[str] = []

        def after_verification(point: str) -> None:
            if point == "loaded" and not altered:
                schema = quote_postgres(route.harness.schema)
                with psycopg.connect(route.harness.dsn, autocommit=True) as conn:
                    for (name,) in conn.execute(
                        "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename LIKE '__dpone_stg%%'",
                        (route.harness.schema,),
                    ).fetchall():
                        conn.execute(f"ALTER TABLE {schema}.{quote_postgres(name)} ALTER COLUMN id TYPE numeric")
                        altered.append(name)

        self._refused(route, old, "native_transfer.target_staging_schema_changed", checkpoint=after_verification)
        assert altered


def test_a_role_with_hostile_session_settings_publishes_exactly(
    postgres_server: Any, admin: Any, db: str, tmp_path: Path
) -> None:
    """The route end to end as a role whose defaults change DateStyle, TimeZone, the encodings, the isolation level
    and the functions unqualified names resolve to: the target holds exactly the source's raw rows, once."""
    events = EVENTS_TABLE.create(admin, db)
    with hostile_role(postgres_server) as role_dsn:
        harness = HostileHarness(postgres_server.dsn, role_dsn)
        try:
            route = PgRoute(tmp_path, events, harness)
            result = route.run()
            assert result.rows == 7 and route.receipts() == 1
            assert route.target_rows() == rows_of(admin, events)
            assert "publish_absent" not in route.journal_kinds()
        finally:
            harness.close()


def test_a_driver_fault_reading_the_commit_row_is_coded_and_never_reported_absent(
    postgres_server: Any, admin: Any, db: str, tmp_path: Path
) -> None:
    """psycopg cannot hand over the publishing transaction's receipt row (its exception under ``DateStyle=SQL,DMY``):
    the run fails with the driver's code, not as an interrupted publication proven absent; nothing was published;
    once the driver reads again, the next try publishes."""
    events = EVENTS_TABLE.create(admin, db)
    harness = DriverFaultHarness(postgres_server.dsn)
    try:
        route = PgRoute(tmp_path, events, harness)
        harness.error = NotImplementedError("can't parse timestamptz with DateStyle 'SQL, DMY'")
        with pytest.raises(DponeError) as failed:
            route.run()
        assert failed.value.code == "native_transfer.target_driver_fault"
        assert "NotImplementedError" in failed.value.detail
        assert route.receipts() == 0
        harness.error = None
        route.deny_source = True
        assert route.run().rows == 7 and route.receipts() == 1
        assert route.target_rows() == rows_of(admin, events)
    finally:
        harness.close()


def test_a_driver_fault_reading_a_committed_receipt_is_coded_and_never_reported_absent(
    postgres_server: Any, admin: Any, db: str, tmp_path: Path
) -> None:
    """The publication commits, its acknowledgement is lost, and the driver cannot hand over the receipt reconcile
    reads: the run fails with the driver's code, never as absent (nothing is republished); once the driver reads
    again, the next try reconciles the committed publication."""
    events = EVENTS_TABLE.create(admin, db)
    harness = DriverFaultHarness(postgres_server.dsn)

    def unreadable_receipt() -> None:
        harness.error, harness.at = NotImplementedError("can't parse timestamptz"), "receipt"

    def at_publish(point: str) -> None:
        if point == "publish_intent":
            harness.faults.arm(Fault.LOST_ACK)
            harness.faults.before_next_commit(unreadable_receipt)

    try:
        route = PgRoute(tmp_path, events, harness)
        with pytest.raises(DponeError) as unread:
            route.run(at_publish)
        assert unread.value.code == "native_transfer.target_driver_fault"
        assert "reconcile" in unread.value.detail
        assert route.receipts() == 1 and "publish_absent" not in route.journal_kinds()
        harness.error = None
        route.deny_source = True
        assert route.run().rows == 7 and route.receipts() == 1
        kinds = route.journal_kinds()
        assert kinds.count("publish_intent") == 1 and kinds.count("published") == 1 and "publish_absent" not in kinds
        assert route.target_rows() == rows_of(admin, events)
    finally:
        harness.close()
