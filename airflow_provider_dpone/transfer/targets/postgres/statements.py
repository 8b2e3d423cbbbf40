"""Every SQL statement the PostgreSQL transfer target sends, built from a validated plan.

Identifiers only ever come from the plan (validated) and reach SQL through ``quote_postgres``; values travel as
server-side parameters, except inside COPY, which takes none: there the only inlined value is the chunk ordinal, an
``int`` rendered by Python.
"""

from __future__ import annotations

from typing import Final

from airflow_provider_dpone.core.identifiers import quote_postgres
from airflow_provider_dpone.transfer.values.target import (
    CHUNK_COLUMN,
    RECEIPT_TABLE,
    ROW_COLUMN,
    PublicationMode,
    TargetPlan,
)
from airflow_provider_dpone.transfer.values.target_types import ColumnType, StorageKind

COPY_TYPES: Final[dict[StorageKind, str]] = {
    StorageKind.UINT64: "numeric",
    StorageKind.DECIMAL: "numeric",
    StorageKind.BINARY: "bytea",
    StorageKind.TEXT: "text",
    StorageKind.BOOLEAN: "bool",
    StorageKind.DATE: "date",
    StorageKind.DATETIME: "timestamptz",
    StorageKind.UUID: "uuid",
}
_INTEGER_COPY_TYPES: Final[dict[str, str]] = {"smallint": "int2", "integer": "int4", "bigint": "int8"}


def copy_type(column: ColumnType) -> str:
    """The psycopg type name of a column for binary COPY (binary COPY needs the exact wire type)."""
    if column.storage is StorageKind.INTEGER:
        return _INTEGER_COPY_TYPES[column.postgres]
    return COPY_TYPES[column.storage]


def qualified(schema: str, table: str) -> str:
    return f"{quote_postgres(schema)}.{quote_postgres(table)}"


def _columns(plan: TargetPlan) -> str:
    return ", ".join(quote_postgres(name) for name in plan.column_names)


def _definitions(plan: TargetPlan) -> list[str]:
    return [
        f"{quote_postgres(c.name)} {c.column_type.postgres}{'' if c.column_type.nullable else ' NOT NULL'}"
        for c in plan.columns
    ]


SET_LOCK_TIMEOUT: Final[str] = "SELECT set_config('lock_timeout', %s, true)"
LOCK_EXCLUSIVE: Final[str] = "SELECT pg_advisory_xact_lock(%s)"
LOCK_SHARED: Final[str] = "SELECT pg_advisory_xact_lock_shared(%s)"
SET_LOCK_TIMEOUT_BULK: Final[str] = "SELECT set_config('lock_timeout', $1, true)"
LOCK_EXCLUSIVE_BULK: Final[str] = "SELECT pg_advisory_xact_lock($1)"
LOCK_SHARED_BULK: Final[str] = "SELECT pg_advisory_xact_lock_shared($1)"
"""The same statements for the bulk (ADBC) connection, whose parameters are positional ``$n``."""
READ_BY_INDEX: Final[str] = "SELECT set_config('enable_seqscan', 'off', true)"
"""For the rest of the transaction, read one chunk through the staging index, never by scanning all of staging.
Staging is never analyzed (``STAGING_STORAGE``), so the planner has no statistics to choose by."""
RELATION_KIND_BULK: Final[str] = (
    "SELECT c.relkind FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = $1 AND c.relname = $2"
)
RELATION_KIND: Final[str] = (
    "SELECT c.relkind FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND c.relname = %s"
)
TABLE_COLUMNS: Final[str] = (
    "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull, "
    "a.attgenerated <> '' OR a.attidentity = 'a' "
    "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
)
"""Per column: name, type, not-null, and whether an INSERT cannot write it (a generated column, ``attgenerated``; an
identity column ``GENERATED ALWAYS``, ``attidentity = 'a'``: both refuse an explicit value)."""


def create_receipt_table(plan: TargetPlan) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS {qualified(plan.target_schema, RECEIPT_TABLE)} ("
        "publication_id char(64) PRIMARY KEY, invocation_id varchar(128) NOT NULL, "
        "target_schema varchar(128) NOT NULL, target_table varchar(128) NOT NULL, mode varchar(16) NOT NULL, "
        "row_count bigint NOT NULL, digest char(64) NOT NULL, "
        "committed_at timestamp(6) with time zone NOT NULL DEFAULT clock_timestamp())"
    )


def select_receipt(plan: TargetPlan) -> str:
    return (
        "SELECT publication_id, invocation_id, target_schema, target_table, mode, row_count, digest, committed_at "
        f"FROM {qualified(plan.target_schema, RECEIPT_TABLE)} WHERE publication_id = %s"
    )


def insert_receipt(plan: TargetPlan) -> str:
    return (
        f"INSERT INTO {qualified(plan.target_schema, RECEIPT_TABLE)} "
        "(publication_id, invocation_id, target_schema, target_table, mode, row_count, digest) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING committed_at"
    )


def drop_staging(plan: TargetPlan) -> str:
    return f"DROP TABLE IF EXISTS {qualified(plan.target_schema, plan.staging_table)}"


def drop_retired(plan: TargetPlan) -> str:
    return f"DROP TABLE IF EXISTS {qualified(plan.target_schema, plan.retired_table)}"


STAGING_STORAGE: Final[str] = "autovacuum_enabled"
"""Off on staging while it loads: vacuuming or analyzing a table that is written once, read per chunk and then
published or dropped competes with the load for the CPU. A full-refresh swap resets it, so the published table has
the server's default."""


def create_staging(plan: TargetPlan) -> str:
    """Window replace stages UNLOGGED (transient, never published as-is); full refresh stages the future table."""
    unlogged = "UNLOGGED " if plan.mode is PublicationMode.WINDOW_REPLACE else ""
    positions = [f"{quote_postgres(CHUNK_COLUMN)} integer NOT NULL", f"{quote_postgres(ROW_COLUMN)} integer NOT NULL"]
    definitions = ", ".join([*positions, *_definitions(plan)])
    staging = qualified(plan.target_schema, plan.staging_table)
    return f"CREATE {unlogged}TABLE {staging} ({definitions}) WITH ({STAGING_STORAGE} = false)"


def create_staging_index(plan: TargetPlan) -> str:
    """A B-tree on the chunk ordinal: the already-loaded check and the reads of one chunk cost the same however much
    is staged. A BRIN was cheaper to keep up at 1M rows, but every BRIN lookup reads the whole index and rows that COPY
    puts into earlier pages widen old ranges, so its lookups grew with staging: quadratic in chunks (measurements in
    docs/perf-transfer.md).
    """
    return (
        f"CREATE INDEX {quote_postgres(plan.staging_index)} ON {qualified(plan.target_schema, plan.staging_table)} "
        f"({quote_postgres(CHUNK_COLUMN)})"
    )


def chunk_present(plan: TargetPlan) -> str:
    return (
        f"SELECT EXISTS (SELECT 1 FROM {qualified(plan.target_schema, plan.staging_table)} "
        f"WHERE {quote_postgres(CHUNK_COLUMN)} = %s)"
    )


def chunk_present_bulk(plan: TargetPlan) -> str:
    return chunk_present(plan).replace("%s", "$1")


def copy_out_chunk(plan: TargetPlan, ordinal: int) -> str:
    return (
        f"COPY (SELECT {_columns(plan)} FROM {qualified(plan.target_schema, plan.staging_table)} "
        f"WHERE {quote_postgres(CHUNK_COLUMN)} = {int(ordinal)}) TO STDOUT (FORMAT BINARY)"
    )


def copy_out_window(plan: TargetPlan) -> str:
    """The target's rows inside the replaced window (bounds bound client-side: COPY takes no server parameters)."""
    return (
        f"COPY (SELECT {_columns(plan)} FROM {qualified(plan.target_schema, plan.target_table)} "
        f"WHERE {window_predicate(plan)}) TO STDOUT (FORMAT BINARY)"
    )


def chunk_counts(plan: TargetPlan) -> str:
    chunk = quote_postgres(CHUNK_COLUMN)
    return f"SELECT {chunk}, count(*) FROM {qualified(plan.target_schema, plan.staging_table)} GROUP BY {chunk}"


WRITER: Final[str] = "xmin::text::bigint"
"""A row's writer: the id of the transaction that inserted this row version (any UPDATE writes a new version)."""


def chunk_writers(plan: TargetPlan) -> str:
    """Per staged ordinal: its rows, and the least and greatest writer among them."""
    chunk = quote_postgres(CHUNK_COLUMN)
    staging = qualified(plan.target_schema, plan.staging_table)
    return f"SELECT {chunk}, count(*), min({WRITER}), max({WRITER}) FROM {staging} GROUP BY {chunk}"


STAGING_IDENTITY: Final[str] = (
    "SELECT c.oid::bigint, c.relfilenode::bigint, json_agg(json_build_array(a.attnum, a.attname, a.atttypid::bigint, "
    "a.atttypmod, a.attnotnull) ORDER BY a.attnum)::text FROM pg_catalog.pg_class c "
    "JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid "
    "WHERE c.oid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped GROUP BY c.oid, c.relfilenode"
)
"""The staging table's storage and columns: a TRUNCATE or any rewrite gives it a new ``relfilenode``; a column
dropped, added, renamed or retyped changes the list of (number, name, type, modifier, not-null)."""


STAGING_COLUMNS: Final[str] = (
    "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull, co.collname "
    "FROM pg_catalog.pg_attribute a LEFT JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation "
    "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
)
"""Every live column of staging in order: name, type as the catalog spells it, not-null flag, collation."""
DATA_CHECKSUMS: Final[str] = "SELECT pg_catalog.current_setting('data_checksums')"


def staging_columns(plan: TargetPlan) -> list[tuple[str, str, bool, str | None]]:
    """What :data:`STAGING_COLUMNS` reads from the staging table ``create_staging`` made: the two position columns,
    then every planned column in its type, ``NOT NULL`` unless nullable, text in the database's default collation."""
    positions = [(CHUNK_COLUMN, "integer", True, None), (ROW_COLUMN, "integer", True, None)]
    return positions + [
        (
            c.name,
            c.column_type.postgres,
            not c.column_type.nullable,
            "default" if c.column_type.storage is StorageKind.TEXT else None,
        )
        for c in plan.columns
    ]


def lock_staging(plan: TargetPlan) -> str:
    """``SHARE`` mode until the publishing transaction ends: it conflicts with every writer's ``ROW EXCLUSIVE``, so
    what the transaction verifies is what it publishes."""
    return f"LOCK TABLE {qualified(plan.target_schema, plan.staging_table)} IN SHARE MODE"


def window_predicate(plan: TargetPlan) -> str:
    """Inside the replaced window: the lower and upper bound are the two parameters (half-open)."""
    assert plan.window is not None
    column = quote_postgres(plan.window.column)
    return f"{column} >= %s AND {column} < %s"


def rows_outside_window(plan: TargetPlan) -> str:
    assert plan.window is not None
    column = quote_postgres(plan.window.column)
    return (
        f"SELECT count(*) FROM {qualified(plan.target_schema, plan.staging_table)} "
        f"WHERE {column} IS NULL OR NOT ({window_predicate(plan)})"
    )


def lock_target(plan: TargetPlan) -> str:
    """``SHARE ROW EXCLUSIVE`` on the target until the publishing transaction ends, taken before the window is
    deleted: it conflicts with every other writer's ``ROW EXCLUSIVE`` (and with itself), not with readers, so no
    row enters or leaves the window between the delete and the digest of what the window then holds."""
    return f"LOCK TABLE {qualified(plan.target_schema, plan.target_table)} IN SHARE ROW EXCLUSIVE MODE"


def delete_window(plan: TargetPlan) -> str:
    return f"DELETE FROM {qualified(plan.target_schema, plan.target_table)} WHERE {window_predicate(plan)}"


def insert_from_staging(plan: TargetPlan) -> str:
    return (
        f"INSERT INTO {qualified(plan.target_schema, plan.target_table)} ({_columns(plan)}) "
        f"SELECT {_columns(plan)} FROM {qualified(plan.target_schema, plan.staging_table)}"
    )


def full_refresh_swap(plan: TargetPlan, *, target_exists: bool) -> list[str]:
    """Turn staging into the target: drop the ordinal index and columns, reset the staging-only storage parameter,
    rename, drop the previous table."""
    schema = plan.target_schema
    staging = qualified(schema, plan.staging_table)
    statements = [
        f"DROP INDEX {qualified(schema, plan.staging_index)}",
        f"ALTER TABLE {staging} DROP COLUMN {quote_postgres(CHUNK_COLUMN)}, DROP COLUMN {quote_postgres(ROW_COLUMN)}, "
        f"RESET ({STAGING_STORAGE})",
    ]
    if target_exists:
        statements.append(
            f"ALTER TABLE {qualified(schema, plan.target_table)} RENAME TO {quote_postgres(plan.retired_table)}"
        )
    statements.append(f"ALTER TABLE {staging} RENAME TO {quote_postgres(plan.target_table)}")
    if target_exists:
        statements.append(f"DROP TABLE {qualified(schema, plan.retired_table)}")
    return statements
