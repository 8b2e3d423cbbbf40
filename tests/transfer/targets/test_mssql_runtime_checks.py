"""The SQL Server target's run-time assumption checks, each fed the failing server answer by the stand-in.

No SQL Server runs here: the stand-in (``tests/support/fakes/mssql_server.py``) answers ``@@TRANCOUNT``, ``@@OPTIONS``,
``sys.dm_exec_connections.protocol_version``, ``sys.triggers`` and the bulk-copy probe the way a misconfigured server
would, and each test asserts the refusal code and that nothing was created or left behind.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer_options import ImportBackend
from airflow_provider_dpone.transfer.targets.mssql import tsql
from airflow_provider_dpone.transfer.targets.mssql.checks import (
    ANSI_PADDING,
    NOCOUNT,
    PROBE_ORDINAL,
    SESSION_OPTIONS,
    XACT_ABORT,
    tds_level,
)
from airflow_provider_dpone.transfer.targets.mssql.target import MsSqlTransferTarget
from airflow_provider_dpone.transfer.values.target import PublicationMode, TargetColumn, TargetPlan
from tests.support.fakes.mssql_server import Column, EmulatedServer, Table
from tests.support.fakes.transfer_target import Fault, SimulatedCrash
from tests.support.fixtures.target_harness import bind, chunk, evidence

pytestmark = pytest.mark.unit

PLAN = TargetPlan(
    invocation_id="checks-invocation-0001",
    target_schema="dbo",
    target_table="events",
    columns=(
        TargetColumn(name="id", source_type="UInt64"),
        TargetColumn(name="payload", source_type="String"),
        TargetColumn(name="tag", source_type="FixedString(4)"),
        TargetColumn(name="ts", source_type="DateTime64(6, 'UTC')"),
        TargetColumn(name="u", source_type="UUID"),
    ),
    mode=PublicationMode.FULL_REFRESH,
)
TABLE, INV = bind(PLAN)


def _target(server: EmulatedServer, backend: ImportBackend = ImportBackend.BCP) -> MsSqlTransferTarget:
    return MsSqlTransferTarget(server.connect, TABLE, import_backend=backend, lock_timeout_ms=1_000)


def _refused(server: EmulatedServer, code: str, backend: ImportBackend = ImportBackend.BCP) -> None:
    with pytest.raises(DponeError, match=f"native_transfer.{code}") as refused:
        _target(server, backend).prepare(INV)
    assert refused.value.code == f"native_transfer.{code}"
    assert tsql.staging(PLAN) not in server.tables  # nothing prepared was committed


def test_a_healthy_server_passes_and_the_probe_row_is_rolled_back() -> None:
    server = EmulatedServer()
    _target(server).prepare(INV)
    assert server.tables[tsql.staging(PLAN)].rows == []
    assert len(server.bcp_rows) == 1  # the probe: loaded, rolled back, observed absent
    assert "session_facts" in server.statements() and "triggers" in server.statements()


def test_autocommit_is_refused_before_sp_getapplock_is_called() -> None:
    server = EmulatedServer()
    server.autocommit = True
    _refused(server, "target_transaction_required")
    assert server.statements(1) == ["session", "applock"]
    applock = next(c for c in server.calls if c.statement == "applock")
    assert applock.sql is not None and "IF @@TRANCOUNT > 0\n    EXEC" in applock.sql


def test_autocommit_refuses_every_locked_call_not_as_in_flight() -> None:
    server = EmulatedServer()
    _target(server).prepare(INV)
    server.autocommit = True
    for call in (lambda t: t.reconcile(INV), lambda t: t.load_chunk(INV, 0, chunk(INV, [])), lambda t: t.cleanup(INV)):
        with pytest.raises(DponeError, match="target_transaction_required"):
            call(_target(server))


REQUIRED = sum(bit for _, bit, on in SESSION_OPTIONS if on)  # every option the route needs ON (NOCOUNT stays OFF)


@pytest.mark.parametrize(
    ("options", "shown"),
    [(REQUIRED | NOCOUNT, "NOCOUNT ON"), (REQUIRED & ~XACT_ABORT, "XACT_ABORT OFF")]
    + [(REQUIRED & ~bit, f"{name} OFF") for name, bit, on in SESSION_OPTIONS if on and name != "XACT_ABORT"],
    ids=lambda value: str(value).split()[0] if isinstance(value, str) else None,
)
def test_effective_session_options_that_differ_are_refused(options: int, shown: str) -> None:
    """The options as the session reads them back after its SETs (a pooler or a logon trigger may reset them)."""
    server = EmulatedServer()
    server.session_options = options
    with pytest.raises(DponeError, match=rf"\[{shown}\]"):
        _target(server).prepare(INV)
    _refused(server, "target_session_unsupported")


def test_every_connection_sets_the_session_options_from_db_library_defaults() -> None:
    """A DB-Library login starts with ANSI_PADDING, ANSI_WARNINGS, ANSI_NULLS, CONCAT_NULL_YIELDS_NULL,
    QUOTED_IDENTIFIER and ARITHABORT OFF: each connection the target opens leaves its settings with all of them ON."""
    server = EmulatedServer()
    assert server.login_options == 0
    target = _target(server)
    target.prepare(INV)
    target.load_chunk(INV, 0, chunk(INV, CHUNK))
    target.verify_chunk(INV, evidence(PLAN, 0, CHUNK))
    assert len(server.connections) >= 3
    assert {c.options for c in server.connections.values()} == {REQUIRED}


def test_a_session_whose_options_are_reset_is_refused_before_its_first_statement() -> None:
    """Not only at prepare: a load on a connection a pooler reset after its SETs never reaches the chunk."""
    server = EmulatedServer()
    target = _target(server)
    target.prepare(INV)
    server.session_options = REQUIRED & ~ANSI_PADDING
    with pytest.raises(DponeError, match=r"target_session_unsupported.*ANSI_PADDING OFF"):
        target.load_chunk(INV, 0, chunk(INV, CHUNK))
    last = max(server.connections)
    assert server.statements(last) == ["session"]


def test_a_tds_version_older_than_7_3_is_refused() -> None:
    server = EmulatedServer()
    server.protocol_version = 0x72090002  # TDS 7.2: DATETIME2 and DATE would travel as text
    _refused(server, "target_tds_version_unsupported")


@pytest.mark.parametrize(
    ("driver_tds", "accepted"), [((7, 4), True), ((7, 2), False), (None, False)], ids=["7.4", "7.2", "unknown"]
)
def test_without_view_server_state_the_driver_negotiated_version_decides(
    driver_tds: tuple[int, int] | None, accepted: bool
) -> None:
    server = EmulatedServer()
    server.view_server_state = False
    server.driver_tds = driver_tds
    if accepted:
        _target(server).prepare(INV)
    else:
        _refused(server, "target_tds_version_unsupported")


def test_protocol_versions_decode_as_the_dmv_spells_them() -> None:
    assert tds_level(0x730B0003) == (7, 3)
    assert tds_level(0x730A0003) == (7, 3)
    assert tds_level(0x74000004) == (7, 4)
    assert tds_level(0x72090002) == (7, 2)
    assert tds_level(0x71000001) == (7, 1)


@pytest.mark.parametrize("which", ["target", "staging"])
def test_triggers_on_the_target_or_the_staging_table_are_refused(which: str) -> None:
    server = EmulatedServer()
    server.tables[tsql.target(PLAN)] = Table([Column("id", "DECIMAL(20,0)", False)])
    server.triggers.add(tsql.target(PLAN) if which == "target" else tsql.staging(PLAN))
    _refused(server, "target_triggers_present")


def test_a_bulk_copy_that_commits_on_its_own_is_refused_and_its_probe_row_removed() -> None:
    server = EmulatedServer()
    server.bulk_commits_alone = True
    with pytest.raises(DponeError, match="target_bulk_outside_transaction"):
        _target(server).prepare(INV)
    assert server.tables[tsql.staging(PLAN)].rows == []  # the surviving probe row was deleted and committed


def test_the_parameterized_backend_needs_no_bulk_probe() -> None:
    server = EmulatedServer()
    server.bulk_commits_alone = True
    _target(server, ImportBackend.SQLCLIENT).prepare(INV)
    assert server.bcp_rows == [] and "bulk_copy" not in server.statements()


CHUNK = [(7, b"seven", b"tag7", dt.datetime(2026, 1, 1, 12, 0, 0, 1, tzinfo=dt.UTC), uuid.UUID(int=7))]


def _published_rows(server: EmulatedServer) -> list[list[object]] | None:
    table = server.tables.get(tsql.target(PLAN))
    return None if table is None else table.rows


def test_a_probe_row_left_by_a_crash_is_refused_by_publication_and_gone_after_the_next_prepare() -> None:
    """The probe row committed on its own, then the process died before its deletion committed: staging keeps a row
    under ordinal -1. Publication counts rows per ordinal and requires exactly the requested ordinals, so it refuses
    that staging instead of publishing the probe row; the next prepare recreates staging empty."""
    server = EmulatedServer()
    server.bulk_commits_alone = True
    server.faults.before_next_commit(lambda: server.faults.arm(Fault.CRASH_BEFORE_COMMIT))  # the 2nd: the deletion
    with pytest.raises(SimulatedCrash):
        _target(server).prepare(INV)
    assert [row[0] for row in server.tables[tsql.staging(PLAN)].rows] == [PROBE_ORDINAL], "the orphaned probe row"

    server.bulk_commits_alone = False  # the cause is fixed; a caller loads into this staging without preparing again
    request = [evidence(PLAN, 0, CHUNK)]
    target = _target(server)
    target.load_chunk(INV, 0, chunk(INV, CHUNK))
    assert target.verify_chunk(INV, request[0]) == request[0]
    with pytest.raises(DponeError) as refused:
        target.publish(INV, request)
    assert refused.value.code == "native_transfer.target_staging_incomplete"
    assert "-1" in str(refused.value), "the unexpected ordinal is named"
    assert _published_rows(server) is None and target.reconcile(INV) is None

    target.prepare(INV)  # a retry always prepares first: staging is recreated empty, the probe rolls back cleanly
    assert server.tables[tsql.staging(PLAN)].rows == []
    target.load_chunk(INV, 0, chunk(INV, CHUNK))
    target.publish(INV, request)
    assert [row[0] for row in _published_rows(server) or []] == [Decimal(7)], "the chunk's row only"


# -- the driver -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["2.3.5", "2.4.4", "2.4.4.dev1", "1.0"])
def test_a_pymssql_older_than_2_4_5_is_refused_before_any_connection(
    monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    """Its bulk copy garbles or refuses NVARCHAR (pymssql issues #725, #917): the version pymssql reports decides."""
    import pymssql

    monkeypatch.setattr(pymssql, "__version__", version)
    server = EmulatedServer()
    _refused(server, "target_driver_unsupported")
    assert server.calls == []  # not even a connection


@pytest.mark.parametrize("version", ["2.4.5", "2.4.6", "2.5.0rc1", "3.0"])
def test_pymssql_2_4_5_and_later_are_admitted(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    import pymssql

    monkeypatch.setattr(pymssql, "__version__", version)
    _target(EmulatedServer()).prepare(INV)
