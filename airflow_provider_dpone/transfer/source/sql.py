"""The SQL text of the snapshot source: bounded metadata reads and the one data SELECT.

Every statement here is a read. Values travel as server-side typed parameters (``{name:Type}``), identifiers only
through :func:`~airflow_provider_dpone.core.identifiers.qualified_clickhouse`/``quote_clickhouse``. The data
SELECT is rendered only from a :class:`~airflow_provider_dpone.transfer.values.query.SnapshotQuery` whose
descriptor digests were recomputed first: no FINAL, ORDER BY, GROUP BY, SAMPLE, LIMIT or OFFSET can appear.
"""

from __future__ import annotations

from typing import Any, Final

from airflow_provider_dpone.core.clickhouse.row_hash import ROW_HASH_COLUMN, row_hash_expression
from airflow_provider_dpone.core.identifiers import qualified_clickhouse, quote_clickhouse
from airflow_provider_dpone.transfer.source.pg_record import pg_record_hash
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.query import (
    PROVENANCE_COLUMNS,
    SnapshotQuery,
    parameters_descriptor,
    verify_query,
)
from airflow_provider_dpone.transfer.values.raw_snapshot_physical import OFFSET_HASH_FUNCTION
from airflow_provider_dpone.transfer.values.row_digest import RowDigest

SERVER_SQL: Final = (
    "SELECT version(), revision(), serverTimezone(), getSetting('session_timezone'), toString(serverUUID()), hostName(), "
    "(SELECT groupArray((macro, substitution)) FROM (SELECT macro, substitution FROM system.macros ORDER BY macro))"
)
PROBE_SQL: Final = "SELECT 1"
DATABASE_SQL: Final = "SELECT engine FROM system.databases WHERE name = {database:String}"
TABLE_SQL: Final = (
    "SELECT engine, engine_full, toString(uuid), is_temporary, partition_key, sorting_key, primary_key "
    "FROM system.tables WHERE database = {database:String} AND name = {table:String}"
)
COLUMNS_SQL: Final = (
    "SELECT name, type, default_kind, default_expression, is_in_partition_key, is_in_sorting_key, is_in_primary_key "
    "FROM system.columns WHERE database = {database:String} AND table = {table:String} ORDER BY position"
)


def relation_privilege_probe(relation: RelationRef) -> str:
    """``SELECT *`` of no row: the server checks SELECT on every ordinary column of the relation (ACCESS_DENIED
    otherwise) and reads nothing."""
    return f"SELECT * FROM {qualified_clickhouse(relation.database, relation.table)} LIMIT 0"


PRINCIPAL_SQL: Final = "SELECT currentUser(), currentRoles(), enabledRoles()"
ROW_POLICIES_SQL: Final = (
    "SELECT toString(id), name, select_filter, is_restrictive, apply_to_all, apply_to_list, apply_to_except "
    "FROM system.row_policies WHERE database = {database:String} AND table = {table:String}"
)
SETTINGS_SQL: Final = "SELECT name, value FROM system.settings WHERE name IN {names:Array(String)}"
REPLICA_SQL: Final = (
    "SELECT replica_name, zookeeper_path, replica_path, is_readonly, is_session_expired "
    "FROM system.replicas WHERE database = {database:String} AND table = {table:String}"
)
MUTATIONS_SQL: Final = (
    "SELECT count() FROM system.mutations "
    "WHERE database = {database:String} AND table = {table:String} AND NOT is_done AND NOT is_killed"
)
_PARTS_SELECT: Final = (
    "SELECT name, partition_id, rows, level, data_version, min_block_number, max_block_number, hash_of_all_files, "
    "has_lightweight_delete FROM system.parts "
    "WHERE database = {database:String} AND table = {table:String} AND active"
)
_PARTS_WINDOW: Final = (
    " AND (partition_id IN {partition_ids:Array(String)} OR (startsWith(partition_id, 'patch-') "
    "AND replaceRegexpOne(partition_id, '^patch-[0-9a-f]+-', '') IN {partition_ids:Array(String)}))"
)
_PARTS_TAIL: Final = " ORDER BY name LIMIT {limit:UInt32}"


def parts_sql(bounded: bool) -> str:
    """Active base and patch parts, optionally only of the window's partitions, capped (cap + 1 rows)."""
    return _PARTS_SELECT + (_PARTS_WINDOW if bounded else "") + _PARTS_TAIL


def _selection(query: SnapshotQuery) -> tuple[str, dict[str, Any]]:
    """``FROM <relation> [WHERE <window>]`` and its typed parameters: the rows the data SELECT selects."""
    sql = f" FROM {qualified_clickhouse(query.relation.database, query.relation.table)}"
    parameters: dict[str, Any] = {}
    if query.window is not None:
        descriptor = parameters_descriptor(query)
        column = quote_clickhouse(query.window.column)
        start, end = descriptor["dpone_window_start"], descriptor["dpone_window_end"]
        sql += (
            f" WHERE {column} >= {{dpone_window_start:{start['type']}}}"
            f" AND {column} < {{dpone_window_end:{end['type']}}}"
        )
        parameters = {"dpone_window_start": start["value"], "dpone_window_end": end["value"]}
    return sql, parameters


def _row_hash(query: SnapshotQuery) -> str:
    """Each row's hash (a ``FixedString(32)``) by the query's row digest method (``transfer/values/row_digest.py``)."""
    if query.row_digest is RowDigest.PG_RECORD_SHA256:
        return pg_record_hash(query.projection)
    return row_hash_expression([(column.name, column.source_type) for column in query.projection])


def render_select(query: SnapshotQuery, *, row_hash: bool = True) -> tuple[str, dict[str, Any]]:
    """The one data SELECT and its typed parameters, after re-verifying the admitted descriptor digests.

    ``row_hash`` adds each row's hash (by the query's row digest method) after the projection: derived from the projected values only, it reads
    nothing else and changes no row.
    """
    verify_query(query)
    projection = [quote_clickhouse(column.name) for column in query.projection]
    if row_hash:
        projection.append(f"{_row_hash(query)} AS {ROW_HASH_COLUMN}")
    if query.provenance:
        projection.extend(PROVENANCE_COLUMNS)
    selection, parameters = _selection(query)
    return f"SELECT {', '.join(projection)}{selection}", parameters


def render_selected_rows(query: SnapshotQuery) -> tuple[str, dict[str, Any]]:
    """The server's own account of the rows the data SELECT selects, over the same relation and window.

    Its count and the sum modulo 2**256 of the rows' hashes (by the query's row digest method) (decimal text), recomputed here by the server
    from its own values, never taken from the stream: the anchor the received row hashes are checked against. With
    provenance, one row per part: ``(part, rows, min offset, max offset, sum of the offsets' intHash64, typed sum)``,
    the offsets' sum in ``UInt64`` (wrapping modulo 2**64 exactly as the worker's coverage does); without, one
    ``(count(), typed sum)``.
    """
    verify_query(query)
    selection, parameters = _selection(query)
    typed_sum = f"toString(sum(reinterpretAsUInt256(reverse({_row_hash(query)}))))"
    if not query.provenance:
        return f"SELECT count(), {typed_sum}{selection}", parameters
    offset = "toUInt64(_part_offset)"
    return (
        f"SELECT toString(_part) AS part, count(), min({offset}), max({offset}), "
        f"sum({OFFSET_HASH_FUNCTION}({offset})), {typed_sum}{selection} GROUP BY part ORDER BY part",
        parameters,
    )
