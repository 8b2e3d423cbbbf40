"""``Replicated*MergeTree`` on the embedded cluster: every statement a process runs locally passes through here.

chdb's own replication would hang the engine, so a replicated table is its non-replicated counterpart in the engine
(``ReplicatedReplacingMergeTree(p, r, ver)`` -> ``ReplacingMergeTree(ver)``) plus a replica in the shared
:class:`~dpone_embedded.replication.ReplicationLog`, with ClickHouse's rules: the default path and
name (``default_replica_path``/``default_replica_name`` of the engine), macro expansion, ``REPLICA_ALREADY_EXISTS``.
An insert into such a table is spooled once, deduplicated by block id, inserted locally and logged; every other
replica's worker (:mod:`~dpone_embedded.replica_worker`) inserts the same bytes. ``DROP`` removes
the replica, ``SYSTEM SYNC REPLICA`` waits for the log (once the engine passed its access check), and ``system.replicas``/``system.tables`` show the replicas
as a server does. Statements replication does not carry (``ALTER``, ``TRUNCATE``, ``DELETE``) are refused.
"""

from __future__ import annotations

import json
import re
import time
import uuid as uuids
from collections.abc import Callable
from typing import Any

from dpone_embedded import macros, replica_inserts, replica_views
from dpone_embedded.engine import Engine, EngineError, EngineResult, EngineStream, Handle
from dpone_embedded.httpwire import escape_param
from dpone_embedded.layout import ProcessSpec
from dpone_embedded.replicated_sql import (
    CreateStatement,
    SyncReplica,
    changed_table,
    create_statement,
    drop_statement,
    insert_statement,
    insert_target,
    is_replicated_merge_tree,
    sync_replica,
)
from dpone_embedded.replication import Block, Replica, ReplicaExistsError, ReplicationLog
from dpone_embedded.sinks import Sink
from dpone_embedded.sqltext import (
    QualifiedName,
    first_keyword,
    insert_uuid,
    quote_identifier,
    quote_string,
)
from dpone_embedded.store import Store

POLL_SECONDS = 0.02
BAD_ARGUMENTS = 36
"""The engine's answer to ``SYSTEM SYNC REPLICA`` of a table it does not replicate itself."""
LOCAL_DEDUP_WINDOW = 100
"""``non_replicated_deduplication_window`` of a replica's local table: re-applying a logged block is a no-op."""

_WINDOW = re.compile(r"\breplicated_deduplication_window(_seconds)? = (\d+)")


class Replication:
    """This process's replicas: the statements that create, fill, wait for, show and drop them."""

    def __init__(self, spec: ProcessSpec, engine: Engine, store: Store) -> None:
        self.spec = spec
        self.engine = engine
        self.store = store
        self.log = ReplicationLog(store, spec.replication_dir)
        self.macros = dict(self.rows("SELECT macro, substitution FROM system.macros"))
        server = dict(
            self.rows(
                "SELECT name, value FROM system.server_settings"
                " WHERE name IN ('default_replica_path', 'default_replica_name')"
            )
        )
        self._default_path, self._default_name = server["default_replica_path"], server["default_replica_name"]
        tree = dict(
            self.rows(
                "SELECT name, value FROM system.merge_tree_settings"
                " WHERE name IN ('replicated_deduplication_window', 'replicated_deduplication_window_seconds')"
            )
        )
        self._window = (
            int(tree["replicated_deduplication_window"]),
            int(tree["replicated_deduplication_window_seconds"]),
        )
        described = self.rows(
            "SELECT name, type FROM system.columns WHERE database = 'system' AND table = 'replicas' ORDER BY position"
        )
        self.replicas_structure = ", ".join(f"{quote_identifier(name)} {kind}" for name, kind in described)

    # -- helpers --------------------------------------------------------------------------------------------------

    def rows(self, sql: str, params: dict[str, str] | None = None, **kwargs: Any) -> list[list[Any]]:
        data = self.engine.execute(sql, "JSONCompactEachRow", params=params, **kwargs).data.decode()
        return [json.loads(line) for line in data.splitlines()]

    def uuid_of(self, database: str, table: str) -> str | None:
        found = self.rows(
            "SELECT toString(uuid) FROM system.tables WHERE database = {d:String} AND name = {t:String}",
            {"d": escape_param(database), "t": escape_param(table)},
        )
        return str(found[0][0]) if found else None

    def name_of(self, uuid: str) -> tuple[str, str] | None:
        """The ``(database, name)`` a table UUID has on this process now (call it under the engine lock)."""
        found = self.rows(
            "SELECT database, name FROM system.tables WHERE uuid = toUUID({u:String})", {"u": escape_param(uuid)}
        )
        return (str(found[0][0]), str(found[0][1])) if found else None

    def _database(self, name: QualifiedName, handle: Handle | None, database: str | None) -> str:
        if name.database is not None:
            return name.database
        if database:
            return database
        return str(self.rows("SELECT currentDatabase()", handle=handle)[0][0])

    def _replica_of(self, name: QualifiedName, handle: Handle | None, database: str | None) -> Replica | None:
        uuid = self.uuid_of(self._database(name, handle, database), name.name)
        return self.log.replica(self.spec.name, uuid) if uuid else None

    # -- statements -----------------------------------------------------------------------------------------------

    def execute(
        self,
        sql: str,
        fmt: str = "TabSeparated",
        *,
        handle: Handle | None = None,
        database: str | None = None,
        settings: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
    ) -> EngineResult:
        """Run one statement on this process, acting for replicated tables where ClickHouse's replication would."""
        settings, params = dict(settings or {}), dict(params or {})
        keyword = first_keyword(sql)
        if keyword == "CREATE" and "Replicated" in sql:
            statement = create_statement(sql)
            if statement is not None and statement.engine and is_replicated_merge_tree(statement.engine.name):
                return self._create(sql, statement, handle, database, settings)
        if self.log.has_replicas(self.spec.name):
            done = self._intercept(keyword, sql, handle, database, settings)
            if done is not None:
                return done
            sql = replica_views.rewrite_reads(self, sql, params)
        return self.engine.execute(sql, fmt, handle=handle, database=database, settings=settings, params=params)

    def stream(
        self,
        sql: str,
        fmt: str,
        *,
        handle: Handle | None,
        database: str | None,
        settings: dict[str, str],
        params: dict[str, str],
    ) -> EngineStream:
        """A ``SELECT`` whose result is produced block by block, reading replicated tables as :meth:`execute` does."""
        params = dict(params)
        if self.log.has_replicas(self.spec.name):
            sql = replica_views.rewrite_reads(self, sql, params)
        return self.engine.stream(sql, fmt, handle=handle, database=database, settings=settings, params=params)

    def _intercept(
        self, keyword: str, sql: str, handle: Handle | None, database: str | None, settings: dict[str, str]
    ) -> EngineResult | None:
        if keyword == "DROP":
            return self._drop(sql, handle, database, settings)
        if keyword == "SYSTEM" and (sync := sync_replica(sql)) is not None:
            replica = self._replica_of(sync.table, handle, database)
            if replica is None:
                return None
            self._check_sync_access(sql, handle, database, settings)
            return self._sync(sync, replica, handle, database, settings)
        if keyword == "INSERT" and (insert := insert_statement(sql)) is not None:
            replica = self._replica_of(insert.table, handle, database)
            return (
                replica_inserts.insert_text(self, sql, insert, replica, handle, database, settings) if replica else None
            )
        if keyword in ("ALTER", "TRUNCATE", "DELETE") and (table := changed_table(sql)) is not None:
            replica = self._replica_of(table, handle, database)
            if replica is not None:
                raise self.engine.error(
                    48, f"{keyword} of a {replica.engine} table is not replicated by the embedded cluster"
                )
        return None

    def _create(
        self,
        sql: str,
        statement: CreateStatement,
        handle: Handle | None,
        database: str | None,
        settings: dict[str, str],
    ) -> EngineResult:
        head, clause = statement.head, statement.engine
        assert clause is not None
        if head.or_replace or clause.fills:
            shape = "CREATE OR REPLACE" if head.or_replace else "CREATE ... AS SELECT"
            raise self.engine.error(48, f"{shape} of a {clause.name} table is not emulated by the embedded cluster")
        db, table = self._database(head.target, handle, database), head.target.name
        if head.if_not_exists and self.uuid_of(db, table) is not None:
            return EngineResult(b"")
        uuid = head.uuid or str(uuids.uuid4())
        path_template, replica_template, rest = macros.engine_arguments(
            self.engine.error, clause.args, self._default_path, self._default_name
        )
        path_template = macros.expand_special(path_template, db, table)
        replica_template = macros.expand_special(replica_template, db, table)
        own = (
            ""
            if "non_replicated_deduplication_window" in sql
            else f"non_replicated_deduplication_window = {LOCAL_DEDUP_WINDOW}"
        )
        replica = Replica(
            path=macros.zookeeper_path(
                self.engine.error, macros.expand(self.engine.error, path_template, self.macros, db, table, head.uuid)
            ),
            replica_name=macros.expand(self.engine.error, replica_template, self.macros, db, table, None),
            member=self.spec.name,
            uuid=uuid,
            engine=clause.name,
            path_template=path_template,
            replica_template=replica_template,
            local_setting=own,
            dedup_window=self._window[0],
            dedup_window_seconds=self._window[1],
        )
        local_engine = clause.name.removeprefix("Replicated") + (f"({', '.join(a.text for a in rest)})" if rest else "")
        local = sql[: clause.start] + local_engine
        if own and clause.settings_at is not None:
            local += sql[clause.end : clause.settings_at] + f" {own}," + sql[clause.settings_at :]
        elif own:
            local += sql[clause.end : clause.tail_at].rstrip() + f" SETTINGS {own} " + sql[clause.tail_at :]
        else:
            local += sql[clause.end :]
        local = insert_uuid(local, uuid)
        try:
            created = self.log.register(replica)
        except ReplicaExistsError as exc:
            raise self.engine.error(253, f"Replica {exc.replica_path} already exists") from None
        try:
            result = self.engine.execute(local, handle=handle, database=database, settings=settings)
        except BaseException:
            if created:
                self.log.unregister(self.spec.name, [uuid])
            raise
        if "replicated_deduplication_window" in sql:
            self._table_window(db, table, uuid)
        return result

    def _table_window(self, db: str, table: str, uuid: str) -> None:
        """The table's own ``replicated_deduplication_window[_seconds]`` settings, where it sets them."""
        found = self.rows(
            "SELECT engine_full FROM system.tables WHERE database = {d:String} AND name = {t:String}",
            {"d": escape_param(db), "t": escape_param(table)},
        )
        window, seconds = self._window
        for suffix, value in _WINDOW.findall(str(found[0][0]) if found else ""):
            window, seconds = (window, int(value)) if suffix else (int(value), seconds)
        self.log.set_dedup_window(self.spec.name, uuid, window, seconds)

    def _drop(
        self, sql: str, handle: Handle | None, database: str | None, settings: dict[str, str]
    ) -> EngineResult | None:
        drop = drop_statement(sql)
        if drop is None:
            return None
        if drop.database is not None:
            found = self.rows(
                "SELECT toString(uuid) FROM system.tables WHERE database = {d:String}",
                {"d": escape_param(drop.database)},
            )
            candidates = [str(row[0]) for row in found]
        else:
            candidates = [self.uuid_of(self._database(t, handle, database), t.name) or "" for t in drop.tables]
        dropped = [uuid for uuid in candidates if uuid and self.log.replica(self.spec.name, uuid) is not None]
        if not dropped:
            return None
        result = self.engine.execute(sql, handle=handle, database=database, settings=settings)
        self.log.unregister(self.spec.name, dropped)
        return result

    def _check_sync_access(
        self, sql: str, handle: Handle | None, database: str | None, settings: dict[str, str]
    ) -> None:
        """The engine's own access check of ``SYSTEM SYNC REPLICA`` (Code 497 without the grant).

        ``InterpreterSystemQuery::syncReplica`` checks ``SYSTEM_SYNC_REPLICA`` on the table before it asks whether the
        table is replicated, and answers ``BAD_ARGUMENTS`` (36, "is not replicated") for the local non-replicated
        table the engine holds here: that answer means the account passed the check, any other error is the
        statement's answer."""
        try:
            self.engine.execute(sql, handle=handle, database=database, settings=settings)
        except EngineError as error:
            if error.code != BAD_ARGUMENTS:
                raise

    def _sync(
        self,
        sync: SyncReplica,
        replica: Replica,
        handle: Handle | None,
        database: str | None,
        settings: dict[str, str],
    ) -> EngineResult:
        """Wait until the replica executed what its queue held when the command started (ClickHouse's
        ``waitForProcessingQueue``), bounded by ``receive_timeout``; ``PULL`` only copies the log into the queue."""
        timeout = float(self.rows("SELECT getSetting('receive_timeout')", handle=handle, settings=settings)[0][0])
        deadline = time.monotonic() + timeout
        member = self.spec.name
        self.log.pull(member, replica.uuid)
        current = self.log.replica(member, replica.uuid)
        target = current.log_pointer if current else 0
        while sync.mode != "PULL":
            if current is None:
                raise self.engine.error(60, f"Table {sync.table.name} does not exist")
            if sync.mode == "STRICT":
                self.log.pull(member, replica.uuid)
                current = self.log.replica(member, replica.uuid) or current
                target = current.log_pointer
            if self.log.waiting(current, target, sync.sources) == 0:
                break
            if time.monotonic() >= deadline:
                named = self.name_of(replica.uuid) or (sync.table.database or "", sync.table.name)
                raise self.engine.error(
                    159,
                    f"SYNC REPLICA {_for_logs(*named)} ({replica.uuid}): command timed out. "
                    "See the 'receive_timeout' setting",
                )
            time.sleep(POLL_SECONDS)
            current = self.log.replica(member, replica.uuid)
        return EngineResult(b"")

    # -- inserts --------------------------------------------------------------------------------------------------

    def insert_stream(
        self,
        head: str,
        clause: str,
        fmt: str,
        statement: Callable[[str], str],
        feed: Callable[[Sink], None],
        *,
        handle: Handle | None,
        database: str | None,
        settings: dict[str, str],
    ) -> EngineResult:
        """An ``INSERT ... FORMAT`` whose data arrives in the request body: ``statement(path)`` is its ``INSERT ...
        FROM INFILE path``, ``feed`` writes the data into a sink (``replica_inserts.py`` for replicated tables)."""
        target = insert_target(head) if self.log.has_replicas(self.spec.name) else None
        replica = self._replica_of(target[0], handle, database) if target else None
        if replica is None or target is None:
            return self.engine.insert_stream(statement, fmt, feed, handle=handle, database=database, settings=settings)
        return replica_inserts.insert_stream(
            self, replica, target[1], clause, fmt, feed, handle=handle, database=database, settings=settings
        )

    def apply(self, uuid: str, block: Block) -> EngineResult:
        """Insert a logged block into this process's table ``uuid`` (idempotent: the token deduplicates it)."""
        with self.engine.lock:  # the name must still be the table's when the insert runs (EXCHANGE moves names)
            named = self.name_of(uuid)
            if named is None:
                raise LookupError(uuid)
            target = f"{quote_identifier(named[0])}.{quote_identifier(named[1])}"
            return self.engine.execute(
                f"INSERT INTO {target} {block.columns} FROM INFILE {quote_string(block.spool)} FORMAT {block.fmt}",
                settings={
                    **block.settings,
                    "insert_deduplication_token": block.token,
                    "insert_deduplicate": "1",
                    "deduplicate_insert": "enable",
                },
            )


def _for_logs(database: str, table: str) -> str:
    """``StorageID::getNameForLogs`` without the UUID: back-quoted where a name is not a plain identifier."""
    plain = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
    return ".".join(name if plain.fullmatch(name) else quote_identifier(name) for name in (database, table) if name)
