"""Distributed DDL (``... ON CLUSTER``), emulated the way ClickHouse's DDLWorker does it.

The initiator formats the statement with the engine (so syntax errors surface at once), applies its ``SETTINGS``
clause to the query and queues the statement without it (as ``executeDDLQueryOnCluster`` does: the clause's settings
show in the entry's ``settings`` map, never in its ``query``), gives a ``CREATE`` the same UUID on every host,
appends one ``query-NNNNNNNNNN`` entry with the statement and its settings to the durable queue, and then reports per-host status exactly as ``DDLOnClusterQueryStatusSource`` does, honouring
``distributed_ddl_output_mode`` and ``distributed_ddl_task_timeout``. One worker per member executes the entries in
order, locally and without the ``ON CLUSTER`` clause, and records Active/Finished with the exception code and text.
An entry that times out on the initiator keeps running on the workers, as on a server.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from dataclasses import dataclass

from dpone_embedded.engine import Engine, EngineError, Handle
from dpone_embedded.faults import HOLD_DDL
from dpone_embedded.httpwire import escape_param
from dpone_embedded.layout import ProcessSpec
from dpone_embedded.replicas import Replication
from dpone_embedded.sqltext import (
    SettingsClause,
    first_keyword,
    insert_uuid,
    on_cluster,
    quote_identifier,
    quote_string,
    settings_clauses,
    tokens,
)
from dpone_embedded.store import ACTIVE, FINISHED, Entry, HostStatus, Store

QUEUE_PATH = "/clickhouse/task_queue/ddl"
ENTRY_VERSION = 5
POLL_SECONDS = 0.02
HEARTBEAT_SECONDS = 0.25
STALE_SECONDS = 2.0

QUEUE_STRUCTURE = (
    "entry String, entry_version Nullable(UInt8), initiator_host Nullable(String), initiator_port Nullable(UInt16), "
    "cluster String, query String, settings Map(String, String), query_create_time DateTime, host Nullable(String), "
    "port Nullable(UInt16), status Nullable(Enum8('Inactive' = 0, 'Active' = 1, 'Finished' = 2, 'Removing' = 3, "
    "'Unknown' = 4)), exception_code Nullable(UInt16), exception_text Nullable(String), "
    "query_finish_time Nullable(DateTime), query_duration_ms Nullable(UInt64)"
)
"""``system.distributed_ddl_queue`` as ClickHouse documents it."""

_QUEUE_PARAMS = ("__embedded_ddl_queue_structure", "__embedded_ddl_queue_rows")
QUEUE_TABLE_SQL = f"format(JSONEachRow, {{{_QUEUE_PARAMS[0]}:String}}, {{{_QUEUE_PARAMS[1]}:String}})"
"""What a ``system.distributed_ddl_queue`` reference is rewritten to; its data rides in two query parameters."""

_RESULT_COLUMNS = (
    "host String, port UInt16, status {int}, error {str}, num_hosts_remaining UInt64, num_hosts_active UInt64"
)
_RESULT_NAMES = ("host", "port", "status", "error", "num_hosts_remaining", "num_hosts_active")
_NON_NULLABLE_MODES = frozenset({"throw", "none", "none_only_active"})
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def queue_params(store: Store) -> dict[str, str]:
    """Query parameters that carry the current queue rows into :data:`QUEUE_TABLE_SQL`."""
    lines = []
    for entry, host in store.queue_rows():
        finished = host.status == FINISHED and host.finish_time is not None
        lines.append(
            json.dumps(
                {
                    "entry": entry.name,
                    "entry_version": ENTRY_VERSION,
                    "initiator_host": entry.initiator_host,
                    "initiator_port": entry.initiator_port,
                    "cluster": entry.cluster,
                    "query": entry.query,
                    "settings": entry.settings,
                    "query_create_time": int(entry.create_time),
                    "host": host.host,
                    "port": host.port,
                    "status": host.status,
                    "exception_code": host.exception_code if finished else None,
                    "exception_text": host.exception_text if finished else None,
                    "query_finish_time": int(host.finish_time) if finished and host.finish_time else None,
                    "query_duration_ms": int((host.finish_time - entry.create_time) * 1000)
                    if finished and host.finish_time
                    else None,
                }
            )
        )
    return {_QUEUE_PARAMS[0]: escape_param(QUEUE_STRUCTURE), _QUEUE_PARAMS[1]: escape_param("\n".join(lines))}


class ServerRestartedError(Exception):
    """The process's server restarted while the initiator held a request: the request died with it, unqueued."""


@dataclass(frozen=True)
class DdlAnswer:
    """What the initiator answers: a result set to format (``select``/``params``), or nothing (``None``)."""

    select: str | None
    params: dict[str, str]


class Initiator:
    """Runs ``... ON CLUSTER`` statements received by one process."""

    def __init__(self, spec: ProcessSpec, engine: Engine, store: Store) -> None:
        self._spec = spec
        self._engine = engine
        self._store = store

    def run(self, sql: str, *, handle: Handle | None, database: str | None, settings: dict[str, str]) -> DdlAnswer:
        if settings.get("readonly", "0") not in ("", "0"):
            raise self._engine.error(
                164,
                "Cannot execute query in readonly mode. For queries over HTTP, method GET implies readonly."
                " You should use method POST for modifying queries",
            )
        formatted, applied = self._queued_statement(self._format(sql))
        settings = {**settings, **applied}
        mode, timeout = self._output_settings(handle, settings)
        clause = on_cluster(formatted)
        if clause is None:  # pragma: no cover - the caller found the clause before formatting
            raise self._engine.error(36, "ON CLUSTER clause is missing")
        cluster = clause.cluster.replace("{cluster}", self._spec.default_cluster)
        if cluster not in self._spec.clusters:
            raise self._engine.error(701, f"Requested cluster '{cluster}' not found")
        query = formatted[: clause.start] + f"ON CLUSTER {_cluster_name(cluster)}" + formatted[clause.end :]
        query = _with_uuid(query)
        local = on_cluster(query)
        assert local is not None
        hosts = [(host, int(port)) for host, port in self._spec.clusters[cluster]]
        self._hold(query)
        entry = self._store.enqueue(
            cluster=cluster,
            query=query,
            local_query=local.local_text,
            database=database,
            settings=dict(settings),
            initiator=self._spec.host_id,
            hosts=hosts,
        )
        if timeout == 0:
            return DdlAnswer(None, {})
        rows = self._wait(entry, hosts, mode, timeout)
        if mode in ("none", "none_only_active"):
            return DdlAnswer(None, {})
        nullable = mode not in _NON_NULLABLE_MODES
        columns = _RESULT_COLUMNS.format(
            int="Nullable(Int64)" if nullable else "Int64", str="Nullable(String)" if nullable else "String"
        )
        data = "\n".join(json.dumps(dict(zip(_RESULT_NAMES, row, strict=True))) for row in rows)
        return DdlAnswer(
            "SELECT * FROM format(JSONEachRow, {__ddl_columns:String}, {__ddl_rows:String})",
            {"__ddl_columns": escape_param(columns), "__ddl_rows": escape_param(data)},
        )

    def _hold(self, statement: str) -> None:
        """A stalled initiator (fault :data:`HOLD_DDL`): it keeps a received request and queues nothing until the
        fault is released (then it queues the request, late, as a coordinator woken from SIGSTOP would) or its server
        restarts (then the request dies unqueued: :class:`ServerRestartedError`)."""
        name = self._spec.name
        if self._store.take(name, (HOLD_DDL,), statement) is None:
            return
        started = self._store.started_at(name)
        while self._store.has_fault(name, HOLD_DDL) and self._store.started_at(name) == started:
            time.sleep(POLL_SECONDS)
        if self._store.started_at(name) != started:
            raise ServerRestartedError(name)

    def _output_settings(self, handle: Handle | None, settings: dict[str, str]) -> tuple[str, int]:
        result = self._engine.execute(
            "SELECT getSetting('distributed_ddl_output_mode'), getSetting('distributed_ddl_task_timeout')",
            "TabSeparatedRaw",
            handle=handle,
            settings=settings,
        )
        mode, timeout = result.data.decode().strip().split("\t")
        return mode, int(timeout)

    def _queued_statement(self, formatted: str) -> tuple[str, dict[str, str]]:
        """The statement as ClickHouse queues it, and the settings its ``SETTINGS`` clause applies to the query.

        ``executeQuery`` first applies the clause to the query's context (``InterpreterSetQuery::
        applySettingsFromQuery``, src/Interpreters/InterpreterSetQuery.cpp): a ``CREATE`` whose only clause follows
        its engine has each setting the engine does not know (``MergeTreeSettings``; the double models the
        MergeTree family only) and the context does moved out of the storage's settings, the clause dropped when
        none is left. ``executeDDLQueryOnCluster`` (src/Interpreters/executeDDLQueryOnCluster.cpp) then clones the
        AST and calls ``ASTQueryWithOutput::resetOutputASTIfExist`` (src/Parsers/ASTQueryWithOutput.cpp), which
        removes ``FORMAT``, ``INTO OUTFILE`` and the query-level ``SETTINGS``: the queued ``query`` carries none of
        them, and the context's changed settings reach the entry through ``DDLLogEntry::setSettingsIfRequired``
        (src/Interpreters/DDLTask.cpp), shown in ``system.distributed_ddl_queue.settings``.
        """
        clauses = settings_clauses(formatted)
        if not clauses:
            return formatted, {}
        if first_keyword(formatted) == "CREATE" and len(clauses) == 1:
            storage = clauses[0]
            if not _has_engine(formatted, storage):
                return formatted, {}
            names = [name for name, _ in storage.pairs]
            engine_known = self._names("system.merge_tree_settings", names)
            context_known = self._names("system.settings", names)
            moved = {name for name in names if name not in engine_known and name in context_known}
            kept = [(name, value) for name, value in storage.pairs if name not in moved]
            applied = {name: value for name, value in storage.values().items() if name in moved}
            rest = "SETTINGS " + ", ".join(f"{name} = {value}" for name, value in kept) if kept else ""
            return _splice(formatted, storage, rest), applied
        return _splice(formatted, clauses[-1], ""), clauses[-1].values()

    def _names(self, table: str, names: list[str]) -> set[str]:
        result = self._engine.execute(
            f"SELECT name FROM {table} WHERE has({{n:Array(String)}}, name)",
            "TabSeparatedRaw",
            params={"n": escape_param("[" + ", ".join(quote_string(name) for name in names) + "]")},
        )
        return set(result.data.decode().split())

    def _format(self, sql: str) -> str:
        result = self._engine.execute(
            "SELECT formatQuerySingleLine({q:String})", "TabSeparatedRaw", params={"q": escape_param(sql)}
        )
        return _without_format_clause(result.data.decode().rstrip("\n"))

    def _wait(self, entry: Entry, hosts: list[tuple[str, int]], mode: str, timeout: int) -> list[tuple[object, ...]]:
        """Collect per-host rows in finish order; raise as ClickHouse does for ``mode``.

        ``DistributedQueryStatusSource::generate`` (src/Interpreters/DistributedQueryStatusSource.cpp): the hosts
        executing the task (``num_hosts_active``, "currently executing") are read again only in a round where some
        host finished; the offline hosts (``*_only_active`` only) are counted whole in the timeout message, finished
        or not (``getOfflineHosts``)."""
        throw_on_timeout = mode in ("throw", "none")
        throw_on_timeout_only_active = mode in ("throw_only_active", "none_only_active")
        only_active = mode.endswith("_only_active")
        nullable = mode not in _NON_NULLABLE_MODES
        started = time.monotonic()
        waiting = set(hosts)
        finished: set[tuple[str, int]] = set()
        rows: list[tuple[object, ...]] = []
        first_error: EngineError | None = None
        stop_waiting_offline = False
        active: list[HostStatus] = []
        offline: set[tuple[str, int]] = set()
        while len(finished) < len(waiting):
            elapsed = time.monotonic() - started
            if stop_waiting_offline or (timeout >= 0 and elapsed > timeout):
                unfinished = waiting - finished
                if throw_on_timeout or (throw_on_timeout_only_active and not stop_waiting_offline):
                    if first_error is None:
                        first_error = self._timeout_error(
                            entry,
                            len(unfinished),
                            len(waiting),
                            len(active),
                            len(offline),
                            elapsed,
                            stop_waiting_offline,
                        )
                    break
                for host, port in sorted(unfinished, key=hosts.index):
                    status = None if nullable else 3
                    error = None if nullable else "Unfinished"
                    rows.append((host, port, status, error, len(unfinished), len(active)))
                break
            time.sleep(POLL_SECONDS)
            statuses = self._store.host_statuses(entry.seq)
            if only_active:
                offline = self._store.offline_hosts(STALE_SECONDS) & waiting
                if offline == waiting:
                    offline = set()  # like ClickHouse: never report that every host is offline
                if all(h in finished or h in offline for h in waiting):
                    stop_waiting_offline = True
            fresh = [s for s in statuses if s.status == FINISHED and (s.host, s.port) not in finished]
            fresh.sort(key=lambda s: (s.finish_time or 0.0, hosts.index((s.host, s.port))))
            if fresh:
                active = [s for s in statuses if s.status == ACTIVE]
            for done in fresh:
                finished.add((done.host, done.port))
                code = int(done.exception_code or 0)
                text = done.exception_text or ""
                if code != 0 and first_error is None and mode != "never_throw":
                    first_error = self._engine.error(code, f"There was an error on [{done.host}:{done.port}]: {text}")
                rows.append((done.host, done.port, code, text, len(waiting) - len(finished), len(active)))
        if first_error is not None:
            raise first_error
        return rows

    def _timeout_error(
        self, entry: Entry, unfinished: int, total: int, active: int, inactive: int, elapsed: float, offline: bool
    ) -> EngineError:
        """``DDLOnClusterQueryStatusSource::handleTimeoutExceeded`` (src/Interpreters/DDLOnClusterQueryStatusSource.cpp):
        the waited seconds formatted ``{:.3f}`` (the format string compiled into ClickHouse 26.9, the engine here;
        older releases formatted them ``{}``), the tail left out when the initiator stopped waiting for offline hosts
        (``*_only_active``)."""
        tail = "" if offline else ", which is longer than distributed_ddl_task_timeout"
        return self._engine.error(
            159,
            f"Distributed DDL task {QUEUE_PATH}/{entry.name} is not finished on {unfinished} of {total} hosts "
            f"({active} of them are currently executing the task, {inactive} are inactive). "
            f"They are going to execute the query in background. Was waiting for {elapsed:.3f} seconds{tail}",
        )


class DdlWorker(threading.Thread):
    """A member's DDL worker: executes its queue entries in order; paused, it behaves like a down host.

    Entries run through the process's :class:`Replication`, like statements received over HTTP, so an ``ON
    CLUSTER`` create, exchange or drop of a replicated table registers, keeps or removes its replicas.
    """

    def __init__(self, spec: ProcessSpec, engine: Engine, store: Store, replication: Replication) -> None:
        super().__init__(name=f"ddl-worker-{spec.name}", daemon=True)
        self._spec = spec
        self._engine = engine
        self._store = store
        self._replication = replication
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()
        self._store.bell.interrupt()

    def run(self) -> None:
        """Execute pending entries; with none (or paused), sleep until the cluster's bell rings (an entry queued, a
        fault armed or released) or the next heartbeat is due."""
        host, port = self._spec.host_id
        bell = self._store.bell
        beat = 0.0
        while not self._halt.is_set():
            rung = bell.generation()
            paused = self._store.has_fault(self._spec.name, "pause")
            now = time.monotonic()
            if now - beat >= HEARTBEAT_SECONDS:
                self._store.heartbeat(self._spec.name, self._spec.host_id, os.getpid(), paused)
                beat = now
            entry = None if paused else self._store.next_pending(host, port)
            if entry is None:
                bell.wait(rung, beat + HEARTBEAT_SECONDS - time.monotonic())
                continue
            self._execute(entry, host, port)

    def _execute(self, entry: Entry, host: str, port: int) -> None:
        self._store.mark_active(entry.seq, host, port)
        fault = self._store.take(self._spec.name, ("fail_ddl",), entry.query)
        code, text = 0, ""
        if fault is not None:
            failure = self._engine.error(int(fault.code or 0), f"Fault injected on {self._spec.name} for {entry.name}")
            code, text = failure.code, self._versioned(failure.message)
        else:
            try:
                self._run_local(entry)
            except EngineError as exc:
                code, text = exc.code, self._versioned(exc.message)
        self._store.mark_finished(entry.seq, host, port, code, text)

    def _run_local(self, entry: Entry) -> None:
        # ClickHouse's initiator qualifies unqualified names with its current database; here the worker runs the
        # statement in that database when it exists on this member, and as sent (qualified names) otherwise.
        database = entry.database
        if database:
            found = self._engine.execute(
                "SELECT count() FROM system.databases WHERE name = {d:String}", params={"d": escape_param(database)}
            )
            database = database if found.data.strip() == b"1" else None
        self._replication.execute(entry.local_query, database=database, settings=entry.settings)

    def _versioned(self, message: str) -> str:
        return f"{message} (version {self._engine.version} (official build))"


def _without_format_clause(sql: str) -> str:
    """The statement without a top-level ``FORMAT`` clause (the initiator drops it from the queued query)."""
    previous = None
    for token in tokens(sql):
        if previous is not None and previous.upper == "FORMAT" and previous.depth == 0 and token.depth == 0:
            return (sql[: previous.start].rstrip() + " " + sql[token.end :].lstrip()).strip()
        previous = token
    return sql


def _splice(text: str, clause: SettingsClause, replacement: str) -> str:
    """``text`` with ``clause`` replaced (an empty replacement removes it and the space before it)."""
    head, tail = text[: clause.start].rstrip(), text[clause.end :].lstrip()
    return " ".join(part for part in (head, replacement, tail) if part)


def _has_engine(text: str, clause: SettingsClause) -> bool:
    """Whether a top-level ``ENGINE`` precedes ``clause`` (then the clause parsed as the storage's settings)."""
    return any(token.upper == "ENGINE" and token.depth == 0 for token in tokens(text[: clause.start]))


def _with_uuid(query: str) -> str:
    return insert_uuid(query, str(uuid.uuid4()))


def _cluster_name(name: str) -> str:
    return name if _PLAIN_NAME.fullmatch(name) else quote_identifier(name)
