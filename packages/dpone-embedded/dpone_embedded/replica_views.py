"""``system.replicas`` and ``system.tables`` of a process that holds replicas, as a server shows them.

The same technique as ``system.distributed_ddl_queue``: a reference to the system table is rewritten into a
subquery fed by query parameters, so ``WHERE``, ``ORDER BY``, aggregates and every format keep working.

- ``system.replicas`` becomes ``format(JSONEachRow, <the engine's own column list>, <one row per replica>)``; the
  columns the emulation does not model keep their defaults.
- ``system.tables`` becomes the engine's ``system.tables`` with ``engine``, ``engine_full`` and
  ``create_table_query`` replaced, keyed by table UUID, for the replicated tables: the replicated engine with the
  path and replica name as the table's metadata holds them (``{database}``/``{table}`` unfolded, ``{uuid}``,
  ``{shard}``, ``{replica}`` kept), and without the local deduplication setting the emulation added.
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING

from dpone_embedded.httpwire import escape_param
from dpone_embedded.replication import Replica
from dpone_embedded.sqltext import quote_string, replace_table_reference

if TYPE_CHECKING:
    from dpone_embedded.replicas import Replication

STALE_SECONDS = 2.0
"""A process whose worker has not been seen for this long is down: its replicas are not active."""

_REPLICAS = ("__embedded_replicas_structure", "__embedded_replicas_rows")
REPLICAS_TABLE_SQL = f"format(JSONEachRow, {{{_REPLICAS[0]}:String}}, {{{_REPLICAS[1]}:String}})"

_UUIDS = "__embedded_replicated_uuids"
_SHOWN = {
    "engine": "__embedded_replicated_engine",
    "engine_full": "__embedded_replicated_engine_full",
    "create_table_query": "__embedded_replicated_create_table_query",
}
_TABLES_SQL = (
    "(SELECT * REPLACE ("
    + ", ".join(
        f"transform(toString(uuid), {{{_UUIDS}:Array(String)}}, {{{param}:Array(String)}}, {column}) AS {column}"
        for column, param in _SHOWN.items()
    )
    + "){alias} FROM system.tables)"
)
_TABLE_COLUMN = re.compile(r"\btable\b")
"""``table`` is an ALIAS column of ``system.tables``: ``*`` leaves it out, so the subquery adds it only when used."""


def rewrite_reads(replication: Replication, sql: str, params: dict[str, str]) -> str:
    """``sql`` with its ``system.replicas``/``system.tables`` references rewritten; their data goes to ``params``."""
    if "replicas" in sql:
        rewritten = replace_table_reference(sql, "system", "replicas", REPLICAS_TABLE_SQL)
        if rewritten != sql:
            params.update(_replicas_params(replication))
            sql = rewritten
    if "tables" in sql:
        alias = ", name AS table" if _TABLE_COLUMN.search(sql) else ""
        rewritten = replace_table_reference(sql, "system", "tables", _TABLES_SQL.replace("{alias}", alias))
        if rewritten != sql:
            params.update(_tables_params(replication))
            sql = rewritten
    return sql


def _replicas_params(replication: Replication) -> dict[str, str]:
    member = replication.spec.name
    states = replication.log.state(member)
    names = {
        str(uuid): (str(db), str(name))
        for uuid, db, name in replication.rows(
            "SELECT toString(uuid), database, name FROM system.tables WHERE toString(uuid) IN {u:Array(String)}",
            {"u": _array([state.replica.uuid for state in states])},
        )
    }
    live = replication.store.live_targets(STALE_SECONDS) | {member}
    now = time.time()
    lines = []
    for state in states:
        replica, oldest = state.replica, state.queue_oldest
        if replica.uuid not in names:  # dropped or detached here: a server lists attached tables only
            continue
        active = {name: int(process in live) for name, process in state.peers.items()}
        queued_at = int(oldest.create_time) if oldest else 0
        row = {
            "database": names[replica.uuid][0],
            "table": names[replica.uuid][1],
            "uuid": replica.uuid,
            "engine": replica.engine,
            "is_leader": 1,
            "can_become_leader": 1,
            "future_parts": state.queue_size,
            "zookeeper_name": "default",
            "zookeeper_path": replica.path,
            "replica_name": replica.replica_name,
            "replica_path": replica.replica_path,
            "columns_version": -1,
            "queue_size": state.queue_size,
            "inserts_in_queue": state.queue_size,
            "queue_oldest_time": queued_at,
            "inserts_oldest_time": queued_at,
            "oldest_part_to_get": oldest.part_name if oldest else "",
            "log_max_index": state.log_max_index,
            "log_pointer": replica.log_pointer,
            "last_queue_update": int(replica.last_queue_update),
            "absolute_delay": max(0, int(now - oldest.create_time)) if oldest else 0,
            "total_replicas": len(active),
            "active_replicas": sum(active.values()),
            "replica_is_active": active,
        }
        lines.append(json.dumps(row))
    return {
        _REPLICAS[0]: escape_param(replication.replicas_structure),
        _REPLICAS[1]: escape_param("\n".join(lines)),
    }


def _tables_params(replication: Replication) -> dict[str, str]:
    replicas = {replica.uuid: replica for replica, _ in replication.log.replicas(replication.spec.name)}
    found = replication.rows(
        "SELECT toString(uuid), engine_full, create_table_query FROM system.tables"
        " WHERE toString(uuid) IN {u:Array(String)}",
        {"u": _array(list(replicas))},
    )
    shown = [(replicas[str(uuid)], str(full), str(query)) for uuid, full, query in found]
    return {
        _UUIDS: _array([replica.uuid for replica, _, _ in shown]),
        _SHOWN["engine"]: _array([replica.engine for replica, _, _ in shown]),
        _SHOWN["engine_full"]: _array([replicated_text(full, replica) for replica, full, _ in shown]),
        _SHOWN["create_table_query"]: _array([replicated_text(query, replica) for replica, _, query in shown]),
    }


def replicated_text(text: str, replica: Replica) -> str:
    """``engine_full`` or ``create_table_query`` of the local table, as ClickHouse shows the replicated one."""
    local = replica.engine.removeprefix("Replicated")
    if text.startswith(local):
        start = 0
    else:
        found = text.find(f"ENGINE = {local}")
        if found < 0:
            return text
        start = found + len("ENGINE = ")
    end = start + len(local)
    arguments = [quote_string(replica.path_template), quote_string(replica.replica_template)]
    if text[end : end + 1] == "(":
        depth, close = 0, end
        for close in range(end, len(text)):
            depth += {"(": 1, ")": -1}.get(text[close], 0)
            if depth == 0:
                break
        if text[end + 1 : close].strip():
            arguments.append(text[end + 1 : close])
        end = close + 1
    shown = text[:start] + f"{replica.engine}({', '.join(arguments)})" + text[end:]
    if replica.local_setting:
        shown = shown.replace(f"{replica.local_setting}, ", "", 1).replace(f" SETTINGS {replica.local_setting}", "")
    return shown


def _array(values: list[str]) -> str:
    """An ``Array(String)`` query parameter value (an array literal; arrays are not escaped a second time)."""
    return "[" + ", ".join(quote_string(value) for value in values) + "]"
