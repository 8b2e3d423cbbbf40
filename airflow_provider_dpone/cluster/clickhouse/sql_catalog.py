"""SQL of runtime admission: topology and catalog facts (read-only).

* ``system.clusters`` -- every row of the cluster, sorted by ``(shard_num, replica_num)``. The query runs with
  ``skip_unavailable_shards = 0`` and never reads through a ``Distributed``/``remote``/``cluster()`` facade, so an
  unreachable member cannot silently drop out of the inventory: partial inventory is never admission evidence. Each
  row also carries ``getSetting('distributed_ddl_entry_format_version')`` as the coordinator answers it to this
  connection's user: below 2, ClickHouse queues an ``ON CLUSTER`` entry without its settings map
  (``DDLLogEntry::setSettingsIfRequired``), where the dispatch's ``log_comment`` is looked up.
* ``system.clusters`` positions -- every cluster's (or one cluster's) rows, or only the rows the answering server
  reports as its own (``is_local``): how the connection check asks a member which member it is.
* ``system.databases`` + ``system.tables`` + ``system.columns`` -- on one member, in one statement (admission runs at
  every entry point, so one request per member): the engine of the target database (must be ``Atomic``), and one
  table's engine, full engine expression (``engine_full``: the literal Keeper path of the authority table), primary
  key and ordered columns with their default kind, and the ``(shard_num, replica_num)`` rows the member's *own*
  ``system.clusters`` marks ``is_local`` (the proof that the endpoint is the member it is mapped to). Each is an
  array scalar subquery, empty when absent, so the statement always answers one row.
"""

from __future__ import annotations

from typing import Final

from airflow_provider_dpone.cluster.clickhouse.literals import settings_clause, string_literal
from airflow_provider_dpone.core.identifiers import validate_identifier

NO_SKIP: Final[dict[str, str | int]] = {"skip_unavailable_shards": 0}


def _name(value: str, what: str) -> str:
    """A validated identifier as a string literal (catalog tables compare names as values)."""
    return string_literal(validate_identifier(value, what=what))


def inventory(cluster: str) -> str:
    """Every ``system.clusters`` row of ``cluster``, sorted by position, each with the reading session's
    ``distributed_ddl_entry_format_version`` (the coordinator's value for this user: no extra request)."""
    return (
        "SELECT cluster, shard_num, replica_num, toUInt8(internal_replication), host_name, port,"
        " toUInt64(getSetting('distributed_ddl_entry_format_version'))"
        f" FROM system.clusters WHERE cluster = {_name(cluster, 'cluster')}"
        f" ORDER BY shard_num, replica_num{settings_clause(NO_SKIP)}"
    )


def columns_array(database: str, table: str) -> str:
    """A scalar subquery: the table's ``(name, type, default_kind)`` tuples ordered by ``position``."""
    return (
        "(SELECT arrayMap(c -> (c.2, c.3, c.4), arraySort(c -> c.1, groupArray((position, name, type, default_kind))))"
        f" FROM system.columns WHERE database = {_name(database, 'database')} AND table = {_name(table, 'table')})"
    )


def admission_facts(cluster: str | None, database: str, table: str) -> str:
    """One row: ``[engine]`` of ``database``, ``[(engine, engine_full, primary_key)]`` of ``table`` (each empty when
    absent), the table's ordered columns, and the ``[(shard_num, replica_num)]`` of ``cluster`` the answering server
    reports as its own (``is_local``, as in :func:`positions`; ``[]`` when no cluster is asked)."""
    db, name = _name(database, "database"), _name(table, "table")
    local = "[]"
    if cluster is not None:
        local = (
            "(SELECT groupArray((toUInt32(shard_num), toUInt32(replica_num))) FROM system.clusters"
            f" WHERE cluster = {_name(cluster, 'cluster')} AND is_local)"
        )
    return (
        f"SELECT (SELECT groupArray(engine) FROM system.databases WHERE name = {db}),"
        " (SELECT groupArray((engine, engine_full, primary_key)) FROM system.tables"
        f" WHERE database = {db} AND name = {name}), {columns_array(database, table)}, {local}"
    )


def positions(cluster: str | None, *, local: bool) -> str:
    """The ``(cluster, shard_num, replica_num, host_name, port)`` rows of ``cluster`` (every cluster when ``None``); with ``local``,
    only the rows the answering server reports as itself (``is_local``: how it recognizes its own host and port in
    ``remote_servers``, the identity ``ON CLUSTER`` DDL relies on)."""
    conditions = ([f"cluster = {_name(cluster, 'cluster')}"] if cluster is not None else []) + (
        ["is_local"] if local else []
    )
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    return (
        f"SELECT cluster, shard_num, replica_num, host_name, port FROM system.clusters{where}"
        f" ORDER BY cluster, shard_num, replica_num{settings_clause(NO_SKIP)}"
    )
