"""How an insert into a replicated table becomes a block of the shared log.

The data is spooled once to the path's spool directory (hashed on the way), then the writer claims the block --
ClickHouse's deduplication check happens here: a block id among the path's recent ones, or in flight, makes the
insert succeed with nothing written -- inserts the spooled bytes into its own table and commits the claim as the
next log entry, which every other replica executes. One ``INSERT`` is one block (no splitting by
``max_insert_block_size``). ``INSERT ... VALUES`` spools its values text; ``INSERT ... SELECT`` spools the query's
result as Native with the target's column types, the block the engine would have written.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpone_embedded.engine import EngineResult, Handle
from dpone_embedded.httpwire import CHUNK, escape_param
from dpone_embedded.replicated_sql import InsertStatement, column_names
from dpone_embedded.replication import Block, Claim, Replica
from dpone_embedded.sinks import Sink, SpoolSink
from dpone_embedded.sqltext import quote_identifier, quote_string

if TYPE_CHECKING:
    from dpone_embedded.replicas import Replication

NOT_CARRIED = frozenset(
    {"database", "readonly", "log_comment", "max_execution_time", "receive_timeout", "send_timeout"}
    | {"insert_deduplicate", "insert_deduplication_token", "deduplicate_insert", "async_insert"}
)
"""Settings of an insert that other replicas do not apply with its bytes (deduplication is the log's)."""

_NOT_INSERTED = frozenset({"MATERIALIZED", "ALIAS", "EPHEMERAL"})


def insert_stream(
    replication: Replication,
    replica: Replica,
    columns: str,
    clause: str,
    fmt: str,
    feed: Callable[[Sink], None],
    *,
    handle: Handle | None,
    database: str | None,
    settings: dict[str, str],
) -> EngineResult:
    """An ``INSERT ... FORMAT`` with its data in the request body (``feed`` delivers it, ``clause`` is the text of
    the statement's ``SETTINGS``)."""
    token = uuid.uuid4().hex
    spool = replication.log.spool_file(replica.path, token, fmt)
    digest = hashlib.sha256(f"{fmt}\0{columns}\0".encode())
    sink = SpoolSink(spool, digest)
    try:
        try:
            feed(sink)
        finally:
            sink.close()
    except BaseException:
        spool.unlink(missing_ok=True)
        raise
    block = Block("", token, str(spool), fmt, columns, {})
    return _replicate(replication, replica, block, digest.hexdigest(), clause, handle, database, settings)


def insert_text(
    replication: Replication,
    sql: str,
    insert: InsertStatement,
    replica: Replica,
    handle: Handle | None,
    database: str | None,
    settings: dict[str, str],
) -> EngineResult:
    """``INSERT ... VALUES`` and ``INSERT ... SELECT`` into a replicated table."""
    token = uuid.uuid4().hex
    if insert.kind == "values":
        spool = replication.log.spool_file(replica.path, token, "Values")
        spool.write_bytes(sql[insert.payload :].encode())
        block = Block("", token, str(spool), "Values", insert.columns, {})
    elif insert.kind == "select":
        spool = replication.log.spool_file(replica.path, token, "Native")
        select = sql[insert.payload :]
        block = _spool_select(replication, select, insert.columns, replica, spool, handle, database, settings)
    else:
        raise replication.engine.error(
            48, f"INSERT ... {insert.kind.upper()} into a {replica.engine} table is not emulated"
        )
    digest = _file_digest(f"{block.fmt}\0{block.columns}\0", spool)
    return _replicate(replication, replica, block, digest, insert.settings, handle, database, settings)


def _spool_select(
    replication: Replication,
    select: str,
    columns: str,
    replica: Replica,
    spool: Path,
    handle: Handle | None,
    database: str | None,
    settings: dict[str, str],
) -> Block:
    with replication.engine.lock:
        named = replication.name_of(replica.uuid)
        if named is None:
            raise replication.engine.error(60, f"Table with UUID {replica.uuid} does not exist")
        described = replication.rows(
            "SELECT name, type, default_kind FROM system.columns WHERE database = {d:String} AND table = {t:String}"
            " ORDER BY position",
            {"d": escape_param(named[0]), "t": escape_param(named[1])},
        )
    types = {str(name): str(kind) for name, kind, _ in described}
    wanted = column_names(columns) if columns else [name for name, _, kind in described if kind not in _NOT_INSERTED]
    if wanted is None or any(name not in types for name in wanted):
        raise replication.engine.error(
            48, f"This column list of an INSERT into a {replica.engine} table is not emulated"
        )
    structure = ", ".join(f"{quote_identifier(name)} {types[name]}" for name in wanted)
    replication.engine.execute(
        f"INSERT INTO FUNCTION file({quote_string(str(spool))}, 'Native', {quote_string(structure)}) {select}",
        handle=handle,
        database=database,
        settings=settings,
    )
    listed = "(" + ", ".join(quote_identifier(name) for name in wanted) + ")"
    return Block("", spool.stem, str(spool), "Native", listed, {})


def _replicate(
    replication: Replication,
    replica: Replica,
    spooled: Block,
    content_digest: str,
    clause: str,
    handle: Handle | None,
    database: str | None,
    settings: dict[str, str],
) -> EngineResult:
    """Claim the block (a duplicate ends here: success, nothing written), insert it locally, log it."""
    effective = dict(
        replication.rows(
            "SELECT name, value FROM system.settings WHERE changed" + (f" SETTINGS {clause}" if clause else ""),
            handle=handle,
            database=database,
            settings=settings,
        )
    )
    carried = {name: str(value) for name, value in effective.items() if name not in NOT_CARRIED}
    block = Block(
        block_id(effective, content_digest), spooled.token, spooled.spool, spooled.fmt, spooled.columns, carried
    )
    member = replication.spec.name
    claim = Claim(replica.path, replica.replica_name, member, replica.uuid, os.getpid(), time.time(), block)
    if not replication.log.claim(claim, replica.dedup_window, replica.dedup_window_seconds):
        Path(block.spool).unlink(missing_ok=True)
        return EngineResult(b"")
    try:
        result = replication.apply(replica.uuid, block)
    except BaseException:
        replication.log.release(block.token)
        raise
    replication.log.commit(block.token)
    return result


def block_id(effective: dict[str, Any], content_digest: str) -> str:
    """ClickHouse's block id: ``<partition>_<hash>`` of the token with the block index (``token_0``), or of the
    block's data; empty when the insert is not deduplicated (in this engine version ``deduplicate_insert``
    supersedes ``insert_deduplicate``, which counts only under ``backward_compatible_choice``)."""
    mode = str(effective.get("deduplicate_insert", "enable"))
    legacy = str(effective.get("insert_deduplicate", "1")) not in ("0", "false", "False")
    if mode == "disable" or (mode == "backward_compatible_choice" and not legacy):
        return ""
    token = str(effective.get("insert_deduplication_token", ""))
    digest = hashlib.sha256(f"{token}_0".encode()).hexdigest() if token else content_digest
    return f"all_{digest[:32]}"


def _file_digest(prefix: str, path: Path) -> str:
    digest = hashlib.sha256(prefix.encode())
    with open(path, "rb") as spooled:
        while chunk := spooled.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
