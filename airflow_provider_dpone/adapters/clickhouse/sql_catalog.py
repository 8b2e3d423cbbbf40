"""SQL of runtime admission: topology and catalog facts (read-only; seed 000 §1, seed 002 preconditions).

* ``system.clusters`` -- every row of the cluster, sorted by ``(shard_num, replica_num)``. The query runs with
  ``skip_unavailable_shards = 0`` and never reads through a ``Distributed``/``remote``/``cluster()`` facade, so an
  unreachable member cannot silently drop out of the inventory: partial inventory is never admission evidence.
* ``system.databases`` -- the engine of the target database on one member (must be ``Atomic``).
* ``system.tables`` + ``system.columns`` -- engine, full engine expression (``engine_full``: the literal Keeper path
  of the authority table), primary key, and the ordered columns with their default kind, in one statement.
"""

from __future__ import annotations

from typing import Final

from airflow_provider_dpone.adapters.clickhouse.literals import settings_clause, string_literal
from airflow_provider_dpone.contracts.identifiers import validate_identifier

NO_SKIP: Final[dict[str, str | int]] = {"skip_unavailable_shards": 0}


def _name(value: str, what: str) -> str:
    """A validated identifier as a string literal (catalog tables compare names as values)."""
    return string_literal(validate_identifier(value, what=what))


def inventory(cluster: str) -> str:
    """Every ``system.clusters`` row of ``cluster``, sorted by position."""
    return (
        "SELECT cluster, shard_num, replica_num, toUInt8(internal_replication), host_name, port"
        f" FROM system.clusters WHERE cluster = {_name(cluster, 'cluster')}"
        f" ORDER BY shard_num, replica_num{settings_clause(NO_SKIP)}"
    )


def database_engine(database: str) -> str:
    """The engine of ``database`` (no row when the database is absent)."""
    return f"SELECT engine FROM system.databases WHERE name = {_name(database, 'database')}"


def columns_array(database: str, table: str) -> str:
    """A scalar subquery: the table's ``(name, type, default_kind)`` tuples ordered by ``position``."""
    return (
        "(SELECT arrayMap(c -> (c.2, c.3, c.4), arraySort(c -> c.1, groupArray((position, name, type, default_kind))))"
        f" FROM system.columns WHERE database = {_name(database, 'database')} AND table = {_name(table, 'table')})"
    )


def table_facts(database: str, table: str) -> str:
    """Engine, ``engine_full``, primary key and ordered columns of one table (no row when absent)."""
    return (
        f"SELECT engine, engine_full, primary_key, {columns_array(database, table)}"
        f" FROM system.tables WHERE database = {_name(database, 'database')} AND name = {_name(table, 'table')}"
    )
