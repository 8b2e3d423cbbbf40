"""Every T-SQL statement the SQL Server transfer target sends, built from a validated plan.

This module is the only place T-SQL text is written. Identifiers come only from the plan (validated) and reach SQL
through ``quote_tsql``; every value, including object names passed to ``OBJECT_ID``/``sp_rename`` and the lock
resource, is a driver parameter (``%s``, pymssql's paramstyle), never text spliced into a literal. The only inlined
numbers are the session's lock timeout and type precisions, both ``int`` rendered by Python. Each builder's output
has a golden file under ``tests/transfer/targets/golden/tsql/`` and passes a T-SQL parse check.
"""

from __future__ import annotations

from typing import Final, Literal

from airflow_provider_dpone.core.identifiers import quote_tsql
from airflow_provider_dpone.core.typed_digest import LogicalType
from airflow_provider_dpone.transfer.values.target import CHUNK_COLUMN, RECEIPT_TABLE, ROW_COLUMN, TargetPlan

CHUNK: Final[str] = quote_tsql(CHUNK_COLUMN)
ROW: Final[str] = quote_tsql(ROW_COLUMN)


def qualified(schema: str, table: str) -> str:
    return f"{quote_tsql(schema)}.{quote_tsql(table)}"


def staging(plan: TargetPlan) -> str:
    return qualified(plan.target_schema, plan.staging_table)


def target(plan: TargetPlan) -> str:
    return qualified(plan.target_schema, plan.target_table)


def receipts(plan: TargetPlan) -> str:
    return qualified(plan.target_schema, RECEIPT_TABLE)


def _columns(plan: TargetPlan) -> str:
    return ", ".join(quote_tsql(name) for name in plan.column_names)


def session_settings(lock_timeout_ms: int) -> str:
    """XACT_ABORT: any runtime error dooms the whole transaction; NOCOUNT OFF: row counts are relied on; the ANSI
    options the load and the digest depend on, each set explicitly (``checks.SESSION_OPTIONS`` says why, and
    the same batch reads them back as ``@@OPTIONS``, which ``checks.check_options`` checks on every connection);
    LOCK_TIMEOUT: no unbounded waits."""
    return (
        "SET XACT_ABORT ON; SET NOCOUNT OFF; SET ANSI_PADDING ON; SET ANSI_WARNINGS ON; SET ANSI_NULLS ON; "
        "SET CONCAT_NULL_YIELDS_NULL ON; SET QUOTED_IDENTIFIER ON; SET ARITHABORT ON; "
        f"SET LOCK_TIMEOUT {int(lock_timeout_ms)};\nSELECT @@OPTIONS AS session_options;"
    )


def applock(mode: Literal["Exclusive", "Shared"]) -> str:
    """Take a transaction-owned application lock; returns sp_getapplock's code (>= 0: granted) and @@TRANCOUNT.

    Without an open transaction sp_getapplock cannot take a transaction-owned lock (it answers -999, which would read
    as "in flight" forever), so it is not called and the open-transaction count tells the caller why.
    """
    return (
        "DECLARE @dpone_lock_result INT = -999;\n"
        "IF @@TRANCOUNT > 0\n"
        f"    EXEC @dpone_lock_result = sp_getapplock @Resource = %s, @LockMode = N'{mode}', "
        "@LockOwner = N'Transaction', @LockTimeout = %s;\n"
        "SELECT @dpone_lock_result AS lock_result, @@TRANCOUNT AS open_transactions;"
    )


SESSION_FACTS: Final[str] = (
    "DECLARE @dpone_protocol INT = NULL;\n"
    "IF HAS_PERMS_BY_NAME(NULL, NULL, N'VIEW SERVER STATE') = 1\n"
    "    SELECT @dpone_protocol = c.[protocol_version] FROM sys.dm_exec_connections AS c "
    "WHERE c.[session_id] = @@SPID;\n"
    "SELECT @@OPTIONS AS session_options, @@TRANCOUNT AS open_transactions, @dpone_protocol AS protocol_version;"
)
"""The effective session options, the open-transaction count and the negotiated TDS version (NULL when the login
may not read ``sys.dm_exec_connections``: reading it without VIEW SERVER STATE would be an error that dooms the
transaction under XACT_ABORT)."""
TRIGGERS: Final[str] = (
    "SELECT COUNT_BIG(*) FROM sys.triggers AS t WHERE t.[parent_id] IN (OBJECT_ID(%s), OBJECT_ID(%s));"
)


OBJECT_TYPE: Final[str] = "SELECT o.[type] FROM sys.objects AS o WHERE o.[object_id] = OBJECT_ID(%s);"
TABLE_COLUMNS: Final[str] = (
    "SELECT c.[name], TYPE_NAME(c.[user_type_id]) AS type_name, c.[max_length], c.[precision], c.[scale], "
    "c.[is_nullable], c.[is_ansi_padded] FROM sys.columns AS c WHERE c.[object_id] = OBJECT_ID(%s, N'U') "
    "ORDER BY c.[column_id];"
)


def create_receipt_table(plan: TargetPlan) -> str:
    return (
        "IF OBJECT_ID(%s, N'U') IS NULL\n"
        f"CREATE TABLE {receipts(plan)} ("
        "[publication_id] CHAR(64) NOT NULL PRIMARY KEY, [invocation_id] VARCHAR(128) NOT NULL, "
        "[target_schema] NVARCHAR(128) NOT NULL, [target_table] NVARCHAR(128) NOT NULL, "
        "[mode] VARCHAR(16) NOT NULL, [row_count] BIGINT NOT NULL, [digest] CHAR(64) NOT NULL, "
        "[committed_at] DATETIME2(6) NOT NULL);"
    )


def select_receipt(plan: TargetPlan) -> str:
    return (
        "SELECT [publication_id], [invocation_id], [target_schema], [target_table], [mode], [row_count], [digest], "
        f"[committed_at] FROM {receipts(plan)} WHERE [publication_id] = %s;"
    )


def insert_receipt(plan: TargetPlan) -> str:
    return (
        f"INSERT INTO {receipts(plan)} ([publication_id], [invocation_id], [target_schema], [target_table], [mode], "
        "[row_count], [digest], [committed_at]) OUTPUT inserted.[committed_at] "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, SYSUTCDATETIME());"
    )


def drop_staging(plan: TargetPlan) -> str:
    return f"DROP TABLE IF EXISTS {staging(plan)};"


def drop_retired(plan: TargetPlan) -> str:
    return f"DROP TABLE IF EXISTS {qualified(plan.target_schema, plan.retired_table)};"


def create_staging(plan: TargetPlan) -> str:
    """The chunk ordinal and each row's position in its chunk (read-back verification aligns rows by it), then the
    planned columns."""
    definitions = [f"{CHUNK} INT NOT NULL", f"{ROW} INT NOT NULL"] + [
        f"{quote_tsql(c.name)} {c.column_type.tsql} {'NULL' if c.column_type.nullable else 'NOT NULL'}"
        for c in plan.columns
    ]
    return f"CREATE TABLE {staging(plan)} ({', '.join(definitions)});"


def create_staging_index(plan: TargetPlan) -> str:
    """A nonclustered index on the ordinal: chunk lookups without scans, dropped (metadata only) before a swap."""
    return f"CREATE NONCLUSTERED INDEX {quote_tsql(plan.staging_index)} ON {staging(plan)} ({CHUNK});"


def chunk_present(plan: TargetPlan) -> str:
    return f"SELECT TOP (1) 1 FROM {staging(plan)} WHERE {CHUNK} = %s;"


def delete_chunk(plan: TargetPlan) -> str:
    return f"DELETE FROM {staging(plan)} WHERE {CHUNK} = %s;"


def chunk_counts(plan: TargetPlan) -> str:
    return f"SELECT {CHUNK}, COUNT_BIG(*) FROM {staging(plan)} GROUP BY {CHUNK};"


def lock_staging(plan: TargetPlan) -> str:
    """A shared table lock on staging held to the end of the publishing transaction: every writer waits for it, so
    what the transaction verifies is what it publishes."""
    return f"SELECT COUNT_BIG(*) FROM {staging(plan)} WITH (TABLOCK, HOLDLOCK);"


def insert_values(plan: TargetPlan, rows: int) -> str:
    """The parameterized-batch ("SqlClient") load: ``rows`` rows, every value CAST to its column type.

    The CAST pins each value's type: a multi-row VALUES list otherwise types a column by its widest literal.
    """
    casts = ", ".join(
        ["CAST(%s AS INT)", "CAST(%s AS INT)", *(f"CAST(%s AS {c.column_type.tsql})" for c in plan.columns)]
    )
    tuples = ",\n".join(f"({casts})" for _ in range(rows))
    return f"INSERT INTO {staging(plan)} ({CHUNK}, {ROW}, {_columns(plan)}) VALUES\n{tuples};"


def window_predicate(plan: TargetPlan, alias: str = "") -> str:
    """Inside the replaced window (half-open; the bounds are the two parameters), the column qualified by ``alias``
    when one is given."""
    window = plan.window
    assert window is not None
    column = next(c for c in plan.columns if c.name == window.column)
    bound = "DATE" if column.column_type.logical is LogicalType.DATE else "DATETIME2(7)"
    name = f"{alias}{'.' if alias else ''}{quote_tsql(window.column)}"
    return f"{name} >= CAST(%s AS {bound}) AND {name} < CAST(%s AS {bound})"


def rows_outside_window(plan: TargetPlan) -> str:
    assert plan.window is not None
    name = quote_tsql(plan.window.column)
    return f"SELECT COUNT_BIG(*) FROM {staging(plan)} WHERE {name} IS NULL OR NOT ({window_predicate(plan)});"


def lock_target(plan: TargetPlan) -> str:
    """An exclusive table lock on the target, taken before the window is deleted and held to the end of the
    publishing transaction ("Table hints (Transact-SQL)": ``TABLOCKX`` takes an exclusive lock on the table;
    ``HOLDLOCK`` holds it until the transaction completes): every other writer (and, under locking READ COMMITTED,
    every reader) waits, so no row enters or leaves the window between the delete and the digest of what the window
    then holds. Reads only the window's rows (the lock is on the table whatever the predicate reads)."""
    return f"SELECT COUNT_BIG(*) FROM {target(plan)} WITH (TABLOCKX, HOLDLOCK) WHERE {window_predicate(plan)};"


def delete_window(plan: TargetPlan) -> str:
    return f"DELETE FROM {target(plan)} WHERE {window_predicate(plan)};"


def insert_from_staging(plan: TargetPlan) -> str:
    return f"INSERT INTO {target(plan)} ({_columns(plan)}) SELECT {_columns(plan)} FROM {staging(plan)};"


RENAME: Final[str] = "EXEC sp_rename @objname = %s, @newname = %s, @objtype = N'OBJECT';"


def full_refresh_swap(plan: TargetPlan, *, target_exists: bool) -> list[tuple[str, tuple[str, ...]]]:
    """Turn staging into the target (statement, parameters): drop the ordinal index, the ordinal and position
    columns, rename, drop old."""
    steps: list[tuple[str, tuple[str, ...]]] = [
        (f"DROP INDEX {quote_tsql(plan.staging_index)} ON {staging(plan)};", ()),
        (f"ALTER TABLE {staging(plan)} DROP COLUMN {CHUNK}, {ROW};", ()),
    ]
    if target_exists:
        steps.append((RENAME, (target(plan), plan.retired_table)))
    steps.append((RENAME, (staging(plan), plan.target_table)))
    if target_exists:
        steps.append((f"DROP TABLE {qualified(plan.target_schema, plan.retired_table)};", ()))
    return steps
