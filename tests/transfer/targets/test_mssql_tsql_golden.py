"""Every T-SQL statement of the SQL Server target: golden text, a T-SQL parse check, and coverage of what is emitted.

SQL Server cannot run here, so the statement text itself is the reviewed artifact: each builder's output for a
reference plan is compared byte for byte with ``tests/transfer/targets/golden/tsql/<name>.sql`` and must parse with sqlfluff's T-SQL
dialect. Regenerate after an intended change with ``DPONE_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import pytest
import sqlfluff

from airflow_provider_dpone.core.manifest.transfer import StringMapping
from airflow_provider_dpone.core.manifest.transfer_options import ImportBackend
from airflow_provider_dpone.transfer.targets.mssql import digest, tsql
from airflow_provider_dpone.transfer.targets.mssql.target import MsSqlTransferTarget
from airflow_provider_dpone.transfer.values.target import PublicationMode, TargetColumn, TargetPlan
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow
from tests.support.fakes.mssql_server import Column, EmulatedServer, Table
from tests.support.fakes.transfer_target import Fault
from tests.support.fixtures.target_harness import bind, chunk, evidence, sealed_chunk

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).resolve().parent / "golden" / "tsql"
UTC = dt.UTC
COLUMNS = (
    TargetColumn(name="id", source_type="UInt64"),
    TargetColumn(name="i8", source_type="Int8"),
    TargetColumn(name="u8", source_type="UInt8"),
    TargetColumn(name="i16", source_type="Int16"),
    TargetColumn(name="u16", source_type="UInt16"),
    TargetColumn(name="i32", source_type="Int32"),
    TargetColumn(name="u32", source_type="UInt32"),
    TargetColumn(name="i64", source_type="Int64"),
    TargetColumn(name="amount", source_type="Nullable(Decimal(18, 4))"),
    TargetColumn(name="payload", source_type="String"),
    TargetColumn(name="label", source_type="LowCardinality(String)"),
    TargetColumn(name="digest16", source_type="FixedString(16)"),
    TargetColumn(name="flag", source_type="Bool"),
    TargetColumn(name="day", source_type="Date"),
    TargetColumn(name="ts", source_type="DateTime('UTC')"),
    TargetColumn(name="ts3", source_type="DateTime64(3, 'UTC')"),
    TargetColumn(name="u", source_type="Nullable(UUID)"),
)
START, END = dt.datetime(2026, 3, 1, tzinfo=UTC), dt.datetime(2026, 3, 2, tzinfo=UTC)


def _plan(mode: PublicationMode, window_column: str | None = None) -> TargetPlan:
    window = None if window_column is None else UtcWindow(column=window_column, start=START, end=END)
    return TargetPlan(
        invocation_id="golden-invocation-0001",
        target_schema="dbo",
        target_table="events",
        columns=COLUMNS,
        mode=mode,
        window=window,
    )


FULL = _plan(PublicationMode.FULL_REFRESH)
WINDOW = _plan(PublicationMode.WINDOW_REPLACE, "ts3")
DATE_WINDOW = _plan(PublicationMode.WINDOW_REPLACE, "day")
TEXT = FULL.model_copy(
    update={
        "columns": (
            COLUMNS[0],
            TargetColumn(name="note", source_type="Nullable(String)", string_mapping=StringMapping.TEXT),
            COLUMNS[-1],
        )
    }
)
TEXT_WINDOW = WINDOW.model_copy(update={"columns": (*TEXT.columns, COLUMNS[-2])})


def golden_statements() -> dict[str, str]:
    swap = tsql.full_refresh_swap(FULL, target_exists=True)
    return {
        "session_settings": tsql.session_settings(30_000),
        "applock_exclusive": tsql.applock("Exclusive"),
        "applock_shared": tsql.applock("Shared"),
        "session_facts": tsql.SESSION_FACTS,
        "server_version": digest.SERVER_VERSION,
        "chunk_digest": digest.chunk_digest(FULL),
        "chunk_fields_text": digest.chunk_fields(TEXT),
        "triggers": tsql.TRIGGERS,
        "object_type": tsql.OBJECT_TYPE,
        "table_columns": tsql.TABLE_COLUMNS,
        "create_receipt_table": tsql.create_receipt_table(FULL),
        "select_receipt": tsql.select_receipt(FULL),
        "insert_receipt": tsql.insert_receipt(FULL),
        "drop_staging": tsql.drop_staging(FULL),
        "drop_retired": tsql.drop_retired(FULL),
        "create_staging": tsql.create_staging(FULL),
        "create_staging_index": tsql.create_staging_index(FULL),
        "chunk_present": tsql.chunk_present(FULL),
        "delete_chunk": tsql.delete_chunk(FULL),
        "chunk_counts": tsql.chunk_counts(FULL),
        "lock_staging": tsql.lock_staging(FULL),
        "insert_values_2_rows": tsql.insert_values(FULL, 2),
        "rows_outside_window": tsql.rows_outside_window(WINDOW),
        "rows_outside_date_window": tsql.rows_outside_window(DATE_WINDOW),
        "delete_window": tsql.delete_window(WINDOW),
        "delete_date_window": tsql.delete_window(DATE_WINDOW),
        "lock_target": tsql.lock_target(WINDOW),
        "lock_date_target": tsql.lock_target(DATE_WINDOW),
        "window_digest": digest.window_digest(WINDOW),
        "window_date_digest": digest.window_digest(DATE_WINDOW),
        "window_fields_text": digest.window_fields(TEXT_WINDOW),
        "insert_from_staging": tsql.insert_from_staging(WINDOW),
        "swap_drop_index": swap[0][0],
        "swap_drop_column": swap[1][0],
        "swap_rename": tsql.RENAME,
        "swap_drop_retired": swap[4][0],
    }


STATEMENTS = golden_statements()


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_statement_matches_its_golden_file(name: str) -> None:
    path = GOLDEN / f"{name}.sql"
    text = STATEMENTS[name] + "\n"
    if os.environ.get("DPONE_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.read_text() == text


def test_no_stale_golden_files() -> None:
    assert {p.stem for p in GOLDEN.glob("*.sql")} == set(STATEMENTS)


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_statement_parses_as_tsql(name: str) -> None:
    # Driver placeholders become NULL literals: the parse checks the statement's shape, not the values.
    sqlfluff.parse(STATEMENTS[name].replace("%s", "NULL"), dialect="tsql")  # raises APIParsingError if unparsable


def test_the_parse_check_rejects_broken_tsql() -> None:
    with pytest.raises(sqlfluff.api.simple.APIParsingError):
        sqlfluff.parse("EXEC sp_rename @objname = NULL,, @newname;", dialect="tsql")


def test_swap_of_a_first_publication_only_renames_staging() -> None:
    steps = tsql.full_refresh_swap(FULL, target_exists=False)
    assert [s for s, _ in steps] == [STATEMENTS["swap_drop_index"], STATEMENTS["swap_drop_column"], tsql.RENAME]
    assert steps[2][1] == ("[dbo].[" + FULL.staging_table + "]", "events")


def test_rename_passes_the_new_name_unquoted() -> None:
    """sp_rename takes @newname literally: a bracketed new name would become part of the table's name."""
    for _, params in tsql.full_refresh_swap(FULL, target_exists=True):
        if params:
            assert "[" not in params[1] and "]" not in params[1]


def _row(i: int) -> tuple[object, ...]:
    ts = START + dt.timedelta(minutes=i)
    return (2**64 - 1, -128, 255, -(2**15), 2**16 - 1, -(2**31), 2**32 - 1, 2**63 - 1, None, b"\xff\x00", "é".encode(),
            bytes(16), True, ts.date(), ts, ts, None)  # fmt: skip


@pytest.mark.parametrize("backend", list(ImportBackend))
@pytest.mark.parametrize("plan", [FULL, WINDOW, DATE_WINDOW], ids=["full", "window", "date_window"])
def test_every_statement_the_adapter_emits_has_a_golden_file(backend: ImportBackend, plan: TargetPlan) -> None:
    server = EmulatedServer()
    columns = [Column(c.name, c.column_type.tsql, c.column_type.nullable) for c in plan.columns]
    server.tables[tsql.target(plan)] = Table(columns)  # an existing target: the swap renames and drops it
    table, invocation = bind(plan)
    target = MsSqlTransferTarget(server.connect, table, import_backend=backend)
    rows = [_row(i) for i in range(3)]
    target.prepare(invocation)
    target.load_chunk(invocation, 0, sealed_chunk(invocation, 0, rows))
    target.load_chunk(invocation, 1, chunk(invocation, rows))
    chunks = [evidence(plan, 0, rows), evidence(plan, 1, rows)]
    assert [target.verify_chunk(invocation, c) for c in chunks] == chunks
    server.faults.arm(Fault.LOST_ACK)
    with pytest.raises(Exception, match="outcome"):
        target.publish(invocation, chunks)
    target.reconcile(invocation)
    target.cleanup(invocation)
    known = set(STATEMENTS.values())
    known_insert = re.compile(re.escape(STATEMENTS["insert_values_2_rows"].split(" VALUES")[0]) + r" VALUES\n.*", re.S)
    emitted = [c for c in server.calls if c.kind == "execute"]
    assert {"lock_staging", "chunk_digest"} <= {c.statement for c in emitted}
    if plan.window is not None:
        assert {"lock_target", "window_digest"} <= {c.statement for c in emitted}
    for call in emitted:
        assert call.sql is not None
        assert call.sql in known or known_insert.fullmatch(call.sql), f"no golden file for {call.statement}"
