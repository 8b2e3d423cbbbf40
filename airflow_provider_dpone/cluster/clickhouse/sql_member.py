"""SQL of per-member staging: observe, create, load and drop a candidate table on one member.

Every statement here runs on one member's direct connection, never ``ON CLUSTER`` and never through a facade:

* **observe** -- the physical UUID, engine and ordered ``(name, type)`` columns from ``system.tables`` /
  ``system.columns`` (and the active parts with their rows, when asked, in the same statement); then count (and
  content digest) with the UUID re-read in the same statement (``sql_digest``): two round trips, one for a
  MergeTree table whose parts were listed and whose content is not asked (its count is its parts' rows);
* **UUID probe** -- the UUID a name holds right now: the guard run immediately before a load or a drop, so a load
  never appends to, and a drop never removes, a table other than the exact one the protocol named;
* **create** -- ``CREATE TABLE ... UUID '<intent>'`` with the exact column list, engine and ``ORDER BY``. Never
  ``IF NOT EXISTS`` (a taken name must be refused, not silently kept) and never ``OR REPLACE``;
* **load** -- one ``INSERT INTO ... (columns) FORMAT Native`` whose body is the artifact's bytes, with a deterministic
  ``query_id`` and ``insert_deduplication_token``, ``async_insert = 0``, the strict Native input settings (a
  column the table lacks, a declared column the bytes lack, or a type that differs is an error, never a silent
  conversion or default), and squashing by bytes only (few parts, so few merges before the barrier);
* **drop** -- ``DROP TABLE ... SYNC`` after the UUID probe showed the exact UUID. The UUID is carried in
  ``log_comment`` so the statement (and its one-shot guard key) names the physical table it is meant for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from airflow_provider_dpone.cluster.clickhouse.column_types import canonical_type
from airflow_provider_dpone.cluster.clickhouse.literals import settings_clause, string_literal, uuid_literal
from airflow_provider_dpone.cluster.clickhouse.sql_catalog import columns_array
from airflow_provider_dpone.cluster.clickhouse.sql_digest import active_parts
from airflow_provider_dpone.cluster.ports import TableSpec
from airflow_provider_dpone.cluster.values.clickhouse_engines import EngineClass, classify_engine
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import qualified_clickhouse, quote_clickhouse, validate_identifier
from airflow_provider_dpone.core.manifest.cluster import PARTITION_FUNCTIONS

STRICT_NATIVE_INPUT: Final[dict[str, str | int]] = {
    "input_format_skip_unknown_fields": 0,
    "input_format_native_allow_types_conversion": 0,
}
"""Native input maps columns *by name*: without these, an unknown column is skipped and a type is converted."""


def _names(database: str, table: str) -> tuple[str, str]:
    return (
        string_literal(validate_identifier(database, what="database")),
        string_literal(validate_identifier(table, what="table")),
    )


def observe_metadata(database: str, table: str, *, with_parts: bool = False) -> str:
    """UUID, engine and ordered columns of one table (no row when the name is free); with ``with_parts`` also its
    active parts, read in this statement, before the content statement (``sql_digest.active_parts``)."""
    db, name = _names(database, table)
    parts = f", {active_parts(database, table)}" if with_parts else ""
    return (
        f"SELECT toString(uuid), engine, {columns_array(database, table)}{parts}"
        f" FROM system.tables WHERE database = {db} AND name = {name}"
    )


def uuid_snapshot(database: str, tables: tuple[str, ...]) -> str:
    """Name and UUID of each of ``tables`` that exists, from one ``system.tables`` read (one snapshot of the
    database: an Atomic database's EXCHANGE swaps both names under one lock, so a pair is never torn)."""
    db = string_literal(validate_identifier(database, what="database"))
    names = ", ".join(string_literal(validate_identifier(table, what="table")) for table in tables)
    return f"SELECT name, toString(uuid) FROM system.tables WHERE database = {db} AND name IN ({names})"


def uuid_probe(database: str, table: str) -> str:
    """The UUID ``database.table`` holds right now (no row when the name is free)."""
    db, name = _names(database, table)
    return f"SELECT toString(uuid) FROM system.tables WHERE database = {db} AND name = {name}"


def create_table(database: str, table: str, uuid: str, spec: TableSpec) -> str:
    """``CREATE TABLE`` with the exact UUID, columns, engine and sorting key (refused if the name is taken)."""
    if classify_engine(spec.engine) is not EngineClass.MERGE_TREE:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED", "candidate engine")
    return f"CREATE TABLE {qualified_clickhouse(database, table)} UUID {uuid_literal(uuid)} {table_definition(spec)}"


def table_definition(spec: TableSpec) -> str:
    """``(columns) ENGINE = <engine> [PARTITION BY <key>] ORDER BY <key>``: the part of a CREATE shared by the
    member-local and the ``ON CLUSTER`` candidate (the engine is a bare name: a replicated one takes the server's
    default replica path)."""
    names = {column.name for column in spec.columns}
    columns = ", ".join(
        f"{quote_clickhouse(column.name)} {canonical_type(column.type, what=f'columns[{index}]')}"
        for index, column in enumerate(spec.columns)
    )
    for key in spec.order_by:
        if key not in names:
            raise DponeError("DPONE_IDENTIFIER_INVALID", "order_by: not a declared column")
    order_by = "tuple()" if not spec.order_by else "(" + ", ".join(quote_clickhouse(key) for key in spec.order_by) + ")"
    partition = "" if spec.partition_by is None else f" PARTITION BY {partition_key(spec.partition_by, names)}"
    return f"({columns}) ENGINE = {spec.engine}{partition} ORDER BY {order_by}"


_PARTITION_CALL: Final[re.Pattern[str]] = re.compile(r"([A-Za-z]+)\(([^()]*)\)")


def partition_key(expression: str, names: set[str]) -> str:
    """The manifest's partition key, rebuilt from its parts: a declared column, or one of the allowed date functions
    (:data:`~airflow_provider_dpone.core.manifest.cluster.PARTITION_FUNCTIONS`) of one; the column is quoted."""
    call = _PARTITION_CALL.fullmatch(expression)
    function, column = call.groups() if call else (None, expression)
    if (function is not None and function not in PARTITION_FUNCTIONS) or column not in names:
        raise DponeError(
            "DPONE_IDENTIFIER_INVALID", "partition_by: not a declared column or an allowed function of one"
        )
    return quote_clickhouse(column) if function is None else f"{function}({quote_clickhouse(column)})"


REPLICA_COLUMNS: Final[tuple[str, ...]] = (
    "zookeeper_path",
    "replica_name",
    "is_readonly",
    "queue_size",
    "inserts_in_queue",
    "log_max_index",
    "log_pointer",
    "total_replicas",
    "active_replicas",
)


def replica_status(database: str, table: str) -> str:
    """This member's ``system.replicas`` row of one table (no row when absent or not replicated)."""
    db, name = _names(database, table)
    return f"SELECT {', '.join(REPLICA_COLUMNS)} FROM system.replicas WHERE database = {db} AND table = {name}"


def sync_replica(database: str, table: str) -> str:
    """``SYSTEM SYNC REPLICA``: wait until this replica fetched every entry of the shared log (bounded by the
    ``receive_timeout`` setting the caller sends; the server answers Code 159 when it elapses)."""
    return f"SYSTEM SYNC REPLICA {qualified_clickhouse(database, table)}"


def load_target(database: str, table: str) -> str:
    """The table expression of the load (clickhouse-connect appends the quoted column list and ``FORMAT Native``)."""
    return qualified_clickhouse(database, table)


def load_statement(database: str, table: str, columns: Sequence[str]) -> str:
    """The exact INSERT statement text of one load (sent as the ``query`` parameter; the body is the artifact)."""
    names = ", ".join(quote_clickhouse(name) for name in columns)
    return f"INSERT INTO {load_target(database, table)} ({names}) FORMAT Native"


LOAD_SQUASHING: Final[dict[str, str | int]] = {"min_insert_block_size_rows": 0}
"""The server squashes a load's blocks by bytes only (``min_insert_block_size_bytes``, 256 MiB by default), not
also at about 1M rows: a large artifact lands in a few parts instead of one per million rows, so background merges,
each of which makes the barrier read its new part again, rarely start before publication. A part's memory stays
bounded by the same byte threshold that already bounds wide rows."""


def load_settings(*, query_id: str, dedup_token: str) -> dict[str, str | int]:
    """Request settings of one load: deterministic ids, synchronous insert, strict Native input, squashed by bytes."""
    return {
        "query_id": query_id,
        "insert_deduplication_token": dedup_token,
        "insert_deduplicate": 1,
        "async_insert": 0,
        **STRICT_NATIVE_INPUT,
        **LOAD_SQUASHING,
    }


def exchange_tables(database: str, left: str, right: str) -> str:
    """``EXCHANGE TABLES`` of two tables of one database on this member only (no ``ON CLUSTER``)."""
    return f"EXCHANGE TABLES {qualified_clickhouse(database, left)} AND {qualified_clickhouse(database, right)}"


def drop_table(database: str, table: str, uuid: str) -> str:
    """``DROP TABLE ... SYNC`` of the table the UUID probe just proved to be ``uuid``."""
    uuid_literal(uuid)  # validates: only a canonical UUID reaches the comment
    return f"DROP TABLE {qualified_clickhouse(database, table)} SYNC{settings_clause({'log_comment': f'dpone:drop:{uuid}'})}"
