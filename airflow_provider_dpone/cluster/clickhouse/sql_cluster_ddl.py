"""SQL of publication and cleanup: the one correlated ``ON CLUSTER`` statement per permit, and its queue entry.

Dispatch renders exactly one of::

    EXCHANGE TABLES db.target AND db.candidate ON CLUSTER c SETTINGS ...   -- existing target: UUIDs swap
    RENAME TABLE db.candidate TO db.target ON CLUSTER c SETTINGS ...       -- absent target: the UUID moves
    DROP TABLE db.candidate ON CLUSTER c SYNC SETTINGS ...                 -- cleanup of the exact predecessor
    CREATE TABLE db.candidate UUID 'u' ON CLUSTER c (...) ENGINE = Replicated...  -- internal mode's one candidate

with the protocol's typed :class:`DispatchSettings` -- ``distributed_ddl_output_mode = 'throw'`` (the initiator
reports per-host results and fails loudly), ``skip_unavailable_shards = 0`` and the ``log_comment`` that carries the
correlation token -- plus a bounded ``distributed_ddl_task_timeout``. The settings are a *query-level* ``SETTINGS``
clause, which ClickHouse applies to the query and then removes from the statement it queues
(``executeDDLQueryOnCluster`` → ``ASTQueryWithOutput::resetOutputASTIfExist``; for the ``CREATE``,
``InterpreterSetQuery::applySettingsFromQuery`` first moves them out of the engine's settings): the queued ``query``
never carries the token, the entry's settings map does (``DDLLogEntry::setSettingsIfRequired``), so the one entry of a
permit is found by ``settings['log_comment']`` alone. Queue observation reads only that entry's rows, one per host,
and :func:`queue_entries` is the one parser of those rows, for the adapter's sync read, the trigger's async one and
the void proof.

The coordinator's start time (the void proof of ``cluster/protocol/void_permit.py``) is its clock minus ``uptime()``. Uptime
counts whole seconds, so one more second is subtracted: the answer is a lower bound, never later than the start.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

from airflow_provider_dpone.cluster.clickhouse.literals import settings_clause, string_literal, uuid_literal
from airflow_provider_dpone.cluster.clickhouse.sql_member import table_definition
from airflow_provider_dpone.cluster.ports import (
    DdlIntent,
    DispatchSettings,
    HostDdlState,
    QueueEntry,
    QueueHost,
)
from airflow_provider_dpone.cluster.values.clickhouse_engines import EngineClass, classify_engine
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import qualified_clickhouse, quote_clickhouse, validate_identifier

DEFAULT_TASK_TIMEOUT_SECONDS: Final[int] = 120
SERVER_IDENTITY: Final[str] = (
    "SELECT toString(serverUUID()), hostName(), toUnixTimestamp64Milli(now64(3)) - (toUInt64(uptime()) + 1) * 1000"
)
_TOKEN: Final[re.Pattern[str]] = re.compile(r"[0-9a-f]{32}")
_STATES: Final[frozenset[str]] = frozenset(state.value for state in HostDdlState)


def ddl_settings(settings: DispatchSettings, *, task_timeout_seconds: int) -> dict[str, str | int]:
    """The query-level settings of a dispatch: the protocol's typed ones exactly, plus the bounded task timeout.

    The correlation token must appear in ``log_comment`` (the only setting that carries free text), because that is
    where the queue entry's settings map carries it; a ``log_comment`` without the token is refused.
    """
    if settings.correlation_token not in settings.log_comment:
        raise ValueError("log_comment must carry the correlation token")
    return {
        "distributed_ddl_output_mode": settings.distributed_ddl_output_mode,
        "distributed_ddl_task_timeout": task_timeout_seconds,
        "skip_unavailable_shards": settings.skip_unavailable_shards,
        "log_comment": settings.log_comment,
    }


def render(
    intent: DdlIntent, dispatch: DispatchSettings, *, task_timeout_seconds: int = DEFAULT_TASK_TIMEOUT_SECONDS
) -> str:
    """The one ``ON CLUSTER`` statement of a permit."""
    cluster = quote_clickhouse(intent.cluster)
    settings = settings_clause(ddl_settings(dispatch, task_timeout_seconds=task_timeout_seconds))
    if intent.kind == "exchange":
        left = qualified_clickhouse(intent.database, intent.left)
        right = qualified_clickhouse(intent.database, intent.right)
        return f"EXCHANGE TABLES {left} AND {right} ON CLUSTER {cluster}{settings}"
    if intent.kind == "rename":
        source = qualified_clickhouse(intent.database, intent.source)
        target = qualified_clickhouse(intent.database, intent.target)
        return f"RENAME TABLE {source} TO {target} ON CLUSTER {cluster}{settings}"
    if intent.kind == "drop":
        return f"DROP TABLE {qualified_clickhouse(intent.database, intent.table)} ON CLUSTER {cluster} SYNC{settings}"
    if classify_engine(intent.spec.engine) is not EngineClass.REPLICATED_MERGE_TREE:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED", "replicated candidate engine")
    table = qualified_clickhouse(intent.database, intent.table)
    definition = table_definition(intent.spec)
    return f"CREATE TABLE {table} UUID {uuid_literal(intent.uuid)} ON CLUSTER {cluster} {definition}{settings}"


def queue_entry(cluster: str, correlation_token: str) -> str:
    """Every host row of every queue entry of ``cluster`` whose ``log_comment`` setting carries ``correlation_token``
    (the entry's settings map: the queued query text has no ``SETTINGS`` clause on a server)."""
    if not _TOKEN.fullmatch(correlation_token):
        raise ValueError("correlation token must be 32 lower-case hex digits")
    name = string_literal(validate_identifier(cluster, what="cluster"))
    needle = string_literal(correlation_token)
    return (
        "SELECT entry, host, port, toString(status), exception_code FROM system.distributed_ddl_queue"
        f" WHERE cluster = {name} AND position(settings['log_comment'], {needle}) > 0 ORDER BY entry, host, port"
    )


def queue_entries(rows: Iterable[Sequence[Any]], *, entry: str | None = None) -> tuple[QueueEntry, ...]:
    """The rows of :func:`queue_entry` (``entry, host, port, status, exception_code``) grouped by entry, in name
    order; with ``entry``, that entry's only. A status outside :class:`HostDdlState` is ``Unknown``."""
    grouped: dict[str, list[QueueHost]] = {}
    for name, host, port, status, code in rows:
        if entry is not None and name != entry:
            continue
        state = HostDdlState(status) if status in _STATES else HostDdlState.UNKNOWN
        parsed = QueueHost(state, None if code is None else int(code), str(host or ""), int(port or 0))
        grouped.setdefault(str(name), []).append(parsed)
    return tuple(QueueEntry(name, tuple(grouped[name])) for name in sorted(grouped))
