"""A replicated table's Keeper path and replica name, resolved from its engine arguments as ClickHouse does.

Without path/name arguments (or when the first argument is not a literal, as in ``ReplicatedReplacingMergeTree(ver)``)
the server's ``default_replica_path``/``default_replica_name`` apply. ``{database}`` and ``{table}`` are unfolded when
the table is created, so the table's metadata (``engine_full``) keeps them fixed across ``RENAME``; ``{uuid}``,
``{shard}`` and ``{replica}`` stay in the metadata and are expanded into the path the replica actually uses.
``{uuid}`` is allowed only in the path and only when the ``CREATE`` names its UUID (which every ``ON CLUSTER`` entry
does). Errors carry ClickHouse's codes and messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from dpone_embedded.replicated_sql import EngineArg

Fail = Callable[[int, str], Exception]
"""Builds the ClickHouse exception for a code and message (``Engine.error``)."""

_UUID_MACRO = (
    "Macro 'uuid' in engine arguments is only supported when the UUID is explicitly specified, used within an ON "
    "CLUSTER query, or when using the Replicated database engine"
)
_MAX_LEVEL = 10


def engine_arguments(
    fail: Fail, args: Sequence[EngineArg], default_path: str, default_name: str
) -> tuple[str, str, tuple[EngineArg, ...]]:
    """``(path, replica name, the remaining arguments)`` of a ``Replicated*MergeTree(...)`` clause."""
    if len(args) >= 2 and args[0].constant and args[1].constant:
        if args[0].literal is None:
            raise fail(36, "Path in ZooKeeper must be a string literal")
        if args[1].literal is None:
            raise fail(36, "Replica name must be a string literal")
        return args[0].literal, args[1].literal, tuple(args[2:])
    if not args or not args[0].constant:
        return default_path, default_name, tuple(args)
    raise fail(36, "Expected two string literal arguments: zookeeper_path and replica_name")


def expand_special(template: str, database: str, table: str) -> str:
    """The metadata form: ``{database}`` and ``{table}`` unfolded, every other macro kept."""
    return template.replace("{database}", database).replace("{table}", table)


def expand(
    fail: Fail,
    template: str,
    macros: Mapping[str, str],
    database: str,
    table: str,
    uuid: str | None,
    level: int = 0,
) -> str:
    """Every macro expanded (recursively); ``uuid`` is ``None`` where ``{uuid}`` is not allowed."""
    if "{" not in template:
        return template
    if level >= _MAX_LEVEL:
        raise fail(62, f"Too deep recursion while expanding macros: '{template}'")
    out: list[str] = []
    position = 0
    while (begin := template.find("{", position)) >= 0:
        out.append(template[position:begin])
        end = template.find("}", begin + 1)
        if end < 0:
            raise fail(62, f"Unbalanced {{ and }} in string with macros: '{template}'")
        name = template[begin + 1 : end]
        if name in macros:
            out.append(macros[name])
        elif name == "database" and database:
            out.append(database)
        elif name == "table" and table:
            out.append(table)
        elif name == "uuid":
            if uuid is None:
                raise fail(36, _UUID_MACRO)
            out.append(uuid)
        else:
            raise fail(
                139,
                f"No macro '{name}' in config while processing substitutions in '{template}' at '{begin + 1}'"
                " or macro is not supported here",
            )
        position = end + 1
    out.append(template[position:])
    return expand(fail, "".join(out), macros, database, table, uuid, level + 1)


def zookeeper_path(fail: Fail, path: str) -> str:
    """The path as Keeper names it: it must be absolute; a trailing slash is dropped."""
    if not path.startswith("/"):
        raise fail(36, f"ZooKeeper path must starts with '/', got '{path}'")
    return path.rstrip("/") or "/"
