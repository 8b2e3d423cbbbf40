"""The native route's exactness corpus and recovery matrix, written once and run on every target.

A target's test module subclasses :class:`RouteCorpus` (``class TestRouteOnPostgres(RouteCorpus): ...``) and provides
three fixtures: ``admin`` (a ClickHouse client on the source), ``db`` (a fresh source database) and ``make_route``
(``make_route(root, relation, **fields)``: a :class:`PgRoute` bound to that module's target harness and source, whose
``harness.faults`` arms COMMIT faults and ``harness.settle_in_flight`` finishes a held COMMIT). PostgreSQL runs it
here; SQL Server runs it under ``make test-real``, once with BCP and once with parameterized batches.

Published rows are compared, as a multiset, with ``SELECT *`` of the source, never with ``FINAL``. Kills are process
deaths at named route checkpoints (:func:`crash_at`) and COMMIT faults of the publishing transaction.
"""

from __future__ import annotations

import collections
import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow
from tests.support.fakes.transfer_target import Fault
from tests.support.transfer.native_route_chdb import read_rows
from tests.support.transfer.native_route_corpus import CORPUS, EVENTS_TABLE, CorpusTable
from tests.support.transfer.native_route_pg import Crash, PgRoute, crash_at

JANUARY = UtcWindow.of("ts", dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 2, 1, tzinfo=dt.UTC))
KILLS_AFTER_EOF = ("stage_complete", "prepared", "loaded", "publish_acknowledged")
"""Process deaths after the sealed EOF; the last is during publication: committed, acknowledgement not journaled."""


class MakeRoute(Protocol):
    def __call__(self, root: Path, relation: RelationRef, **fields: Any) -> PgRoute: ...


def at_publish(route: PgRoute, fault: Fault) -> Callable[[str], None]:
    """A checkpoint that arms ``fault`` for the publishing transaction's COMMIT (the next COMMIT after the intent)."""
    return lambda point: route.harness.faults.arm(fault) if point == "publish_intent" else None


def kill_and_restart_source_free(route: PgRoute, point: str) -> None:
    """The process dies at ``point``; its lease expires; the retry may not open the source (it fails if it does)."""
    with pytest.raises(Crash):
        route.run(crash_at(point))
    route.expire_leases()
    route.deny_source = True


def rows_of(admin: Any, relation: RelationRef, where: str = "", *, final: bool = False) -> collections.Counter[Any]:
    table = f"{relation.database}.{relation.table}{' FINAL' if final else ''}"
    return read_rows(admin, f"SELECT * FROM {table} {where}")


class RouteCorpus:
    """Fidelity, windows and the recovery matrix of seed 003 on one target (fixtures: ``admin``, ``db``,
    ``make_route``)."""

    @pytest.fixture
    def events(self, admin: Any, db: str) -> RelationRef:
        """The narrow corpus table most scenarios publish (7 raw rows, 3 under FINAL)."""
        return EVENTS_TABLE.create(admin, db)

    # ------------------------------------------------------------------------------------------------ fidelity --
    @pytest.mark.parametrize("table", CORPUS, ids=[table.name for table in CORPUS])
    def test_the_corpus_is_published_as_its_raw_multiset(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, table: CorpusTable
    ) -> None:
        relation = table.create(admin, db)
        route = make_route(tmp_path, relation, table=f"{table.name}_copy", string_mapping=table.string_mapping)
        result = route.run()
        raw = rows_of(admin, relation)
        assert sum(raw.values()) == table.rows == result.rows
        assert raw != rows_of(admin, relation, final=True), "the table's FINAL view differs from its raw rows"
        assert route.target_rows() == raw
        assert route.receipts() == 1 and route.last_connections == 1 and len(route.streams) == 1
        assert "FINAL" not in route.streams[0]

    def test_full_refresh_keeps_raw_multiplicity_and_retires_the_stage(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, events: RelationRef
    ) -> None:
        route = make_route(tmp_path, events)
        result = route.run()
        published = route.target_rows()
        assert published != rows_of(admin, events, final=True) and sum(rows_of(admin, events, final=True).values()) == 3
        assert published[(1, 2, 0, b"b", "2026-01-03T00:00:00+00:00", Decimal(2))] == 2, "identical duplicates kept"
        assert result.endpoint_authority_agreement is True
        assert result.stage_retired and not (tmp_path / route.operation / "stage" / result.invocation_id).exists()

    # ------------------------------------------------------------------------------------------------- windows --
    def test_partition_replace_replaces_only_its_window(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, events: RelationRef
    ) -> None:
        make_route(tmp_path / "full", events, operation="a" * 32).run()
        admin.command(f"INSERT INTO {db}.events VALUES (5, 1, 0, 'late', '2026-01-20 00:00:00', 5)")
        admin.command(f"INSERT INTO {db}.events VALUES (6, 1, 0, 'feb', '2026-02-20 00:00:00', 6)")
        route = make_route(tmp_path / "window", events, operation="b" * 32, window=JANUARY)
        result = route.run()
        inside = rows_of(admin, events, "WHERE ts < '2026-02-01 00:00:00'")
        before_feb = rows_of(admin, events, "WHERE ts >= '2026-02-01 00:00:00' AND id != 6")
        assert result.rows == sum(inside.values()) == 6
        assert route.target_rows() == inside + before_feb, "February keeps the full refresh's rows, not the new one"

    def test_an_empty_window_clears_the_target_window(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, events: RelationRef
    ) -> None:
        make_route(tmp_path / "full", events, operation="a" * 32).run()
        admin.command(f"ALTER TABLE {db}.events DELETE WHERE ts < '2026-02-01 00:00:00' SETTINGS mutations_sync = 2")
        route = make_route(tmp_path / "window", events, operation="b" * 32, window=JANUARY)
        assert route.run().rows == 0
        assert route.target_rows() == rows_of(admin, events) and sum(route.target_rows().values()) == 2

    # ------------------------------------------------------------------------------------- kills before EOF --
    def test_a_kill_before_eof_settles_and_reextracts_as_a_new_invocation(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, events: RelationRef
    ) -> None:
        route = make_route(tmp_path, events)
        with pytest.raises(Crash):
            route.run(crash_at("chunk_sealed", occurrence=2))
        first = route.journal_kinds()
        assert "stage_complete" not in first and first.count("chunk") == 2
        with pytest.raises(DponeError) as held:
            route.run()
        assert held.value.code == "native_transfer.custody_held", "a live lease of the killed writer is held custody"
        route.expire_leases()
        result = route.run()
        assert len(result.settled_invocations) == 1 and result.settled_invocations[0] != result.invocation_id
        assert route.last_connections == 1, "re-extraction opens the source once, as a new invocation"
        assert route.target_rows() == rows_of(admin, events) and "invocation_settled" in route.journal_kinds()

    def test_a_failure_before_eof_is_settled_at_once(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, events: RelationRef
    ) -> None:
        route = make_route(tmp_path, events)
        changed: list[bool] = []

        def add_column(point: str) -> None:
            if point == "chunk_sealed" and not changed:
                changed.append(True)
                admin.command(f"ALTER TABLE {db}.events ADD COLUMN extra UInt8")

        with pytest.raises(DponeError) as failed:
            route.run(add_column)
        assert failed.value.code == "native_transfer.source_snapshot_drift"
        assert route.journal_kinds()[-2:] == ["invocation_settled", "lease"]
        admin.command(f"ALTER TABLE {db}.events DROP COLUMN extra")
        result = route.run()
        assert len(result.settled_invocations) == 0 and result.rows == 7, "the settled invocation needs no fencing"

    # -------------------------------------------------------------------------------------- kills after EOF --
    @pytest.mark.parametrize("point", KILLS_AFTER_EOF)
    def test_a_kill_after_eof_completes_from_the_stage_without_the_source(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, events: RelationRef, point: str
    ) -> None:
        route = make_route(tmp_path, events)
        kill_and_restart_source_free(route, point)
        admin.command(f"INSERT INTO {db}.events VALUES (9, 1, 0, 'late', '2026-01-09 00:00:00', 9)")
        result = route.run()
        assert route.last_connections == 0 and result.source_connections == 0
        assert result.rows == 7 and sum(route.target_rows().values()) == 7, "the sealed snapshot, not the later row"
        assert route.journal_kinds().count("publish_intent") == 1 and route.receipts() == 1, "published once"

    # ------------------------------------------------------------------------------ kills during publication --
    @pytest.mark.parametrize("failure", ["killed_after_the_intent", "commit_dropped"])
    def test_a_publication_that_never_committed_is_proven_absent_then_republished(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, events: RelationRef, failure: str
    ) -> None:
        route = make_route(tmp_path, events)
        if failure == "killed_after_the_intent":
            kill_and_restart_source_free(route, "publish_intent")
        checkpoint = at_publish(route, Fault.COMMIT_DROPPED) if failure == "commit_dropped" else None
        with pytest.raises(DponeError) as absent:
            route.run(checkpoint)
        assert absent.value.code == "native_transfer.publication_absent", "an intent without a receipt is absent"
        assert route.receipts() == 0
        route.deny_source = True
        result = route.run()
        assert route.last_connections == 0 and result.rows == 7 and route.receipts() == 1
        assert route.target_rows() == rows_of(admin, events)

    def test_a_lost_commit_acknowledgement_is_reconciled_by_the_receipt(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, events: RelationRef
    ) -> None:
        route = make_route(tmp_path, events)
        result = route.run(at_publish(route, Fault.LOST_ACK))
        kinds = route.journal_kinds()
        assert kinds.count("publish_intent") == 1 and kinds.count("published") == 1 and "publish_absent" not in kinds
        assert route.receipts() == 1 and result.rows == 7 and route.target_rows() == rows_of(admin, events)

    def test_an_in_flight_commit_holds_the_run_and_blocks_other_operations(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, events: RelationRef
    ) -> None:
        route = make_route(tmp_path, events)
        with pytest.raises(DponeError) as held:
            route.run(at_publish(route, Fault.IN_FLIGHT))
        assert held.value.code == "native_transfer.target_publication_in_flight"
        other = make_route(tmp_path, events, operation="c" * 32, clock=route.clock)
        route.expire_leases()
        with pytest.raises(DponeError) as blocked:
            other.run()
        assert blocked.value.code == "native_transfer.custody_held" and other.last_connections == 0
        route.harness.settle_in_flight(None, commit=True)  # the held COMMIT completes
        route.deny_source = True
        result = route.run()
        assert result.rows == 7 and route.receipts() == 1 and "publish_absent" not in route.journal_kinds()
        other.run()
        assert route.receipts() == 2, "after reconciliation the other operation may publish"

    def test_overlapping_operations_on_one_target_never_interleave(
        self, admin: Any, db: str, make_route: MakeRoute, tmp_path: Path, events: RelationRef
    ) -> None:
        first = make_route(tmp_path, events, operation="a" * 32)
        second = make_route(tmp_path, events, operation="b" * 32, clock=first.clock)
        attempts: list[str] = []

        def overlap(point: str) -> None:
            if point == "chunk_sealed" and not attempts:
                with pytest.raises(DponeError) as blocked:
                    second.run()
                attempts.append(blocked.value.code)

        assert first.run(overlap).rows == 7
        assert attempts == ["native_transfer.custody_held"] and second.last_connections == 0
        assert second.run().rows == 7 and first.receipts() == 2
