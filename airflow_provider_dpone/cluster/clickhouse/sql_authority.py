"""SQL of the authority phase: the KeeperMap table ``__dpone_cluster_publication_authority``.

Three statements, all with ``keeper_map_strict_mode = 1``; the two writes also carry ``insert_keeper_max_retries = 0``
(:data:`WRITE`), so the server sends each write's Keeper multi-request once:

* **read** -- the row of one target key with its KeeperMap ``_version`` (0 after the strict insert, +1 per update);
* **strict insert** -- ``INSERT ... VALUES``; in strict mode an existing key fails with ``KEEPER_EXCEPTION``
  (Code 999, "Node exists") and changes nothing;
* **compare-and-set** -- ``ALTER TABLE ... UPDATE <every non-key column> WHERE target_key = k AND _version = N``.
  KeeperMap executes the mutation synchronously; in strict mode it reads the matching keys *with their versions* and
  writes them in one Keeper multi-request conditioned on exactly those versions, so the update applies only while
  the row is still at version ``N`` and a concurrent writer makes it fail rather than be overwritten (ClickHouse docs,
  KeeperMap: "fetching and updating data will succeed only if it's done atomically"). An update whose ``WHERE``
  matches nothing succeeds *without effect*, which is why the adapter proves the outcome by reading the row once
  after the update (see ``authority_store``: no read precedes the write). The primary key is not updatable, so the key never moves.

Why that setting, measured on ClickHouse 26.9 (the embedded engine's ``system.settings``: default 20): KeeperMap's
sink wraps the Keeper multi-request of an ``INSERT`` *and* of the ``ALTER ... UPDATE`` above in a retry loop bounded by
``insert_keeper_max_retries`` (retried on a network error, session expiry or timeout, i.e. exactly when a multi may
have applied and lost its reply; the retry then meets its own write as "Node exists" / "Bad version"). The general
``keeper_max_retries`` bounds only KeeperMap's reads, table checks and ``DELETE`` multi; reads may retry, and the
authority never deletes. A Keeper failure now reaches the adapter as an error it classifies (``authority_store``).

Values are rendered as escaped literals (payloads are canonical JSON the protocol produced, never row data), so the
statement is one self-contained text: no URL parameters that could exceed the server's URI limit.
"""

from __future__ import annotations

from typing import Final

from airflow_provider_dpone.cluster.clickhouse.literals import settings_clause, string_literal, uint_literal
from airflow_provider_dpone.cluster.values.authority.row import (
    AUTHORITY_COLUMNS,
    AUTHORITY_PRIMARY_KEY,
    AUTHORITY_TABLE,
    AuthorityRow,
)
from airflow_provider_dpone.core.identifiers import qualified_clickhouse, quote_clickhouse

STRICT: Final[dict[str, str | int]] = {"keeper_map_strict_mode": 1}
WRITE: Final[dict[str, str | int]] = {**STRICT, "insert_keeper_max_retries": 0}
"""Every authority mutation's settings: strict mode and no server-side resend of its Keeper multi-request."""
COLUMN_NAMES: Final[tuple[str, ...]] = tuple(name for name, _ in AUTHORITY_COLUMNS)
UPDATABLE: Final[tuple[str, ...]] = COLUMN_NAMES[1:]
READ_COLUMNS: Final[tuple[str, ...]] = (*COLUMN_NAMES, "_version")
"""Read order: the seven columns (``payload_sha256`` as ``String``: FixedString reads back as bytes) then the version."""
_KEY: Final[str] = quote_clickhouse(AUTHORITY_PRIMARY_KEY)
_VERSION: Final[str] = quote_clickhouse("_version")


def _value(row: AuthorityRow, column: str) -> str:
    value = getattr(row, column)
    return uint_literal(value) if column == "dispatch_epoch" else string_literal(value)


def read_row(database: str, target_key: str) -> str:
    """The row of ``target_key`` and its ``_version`` (at most one row: the key is the primary key)."""
    columns = ", ".join(
        f"toString({quote_clickhouse(name)})" if name == "payload_sha256" else quote_clickhouse(name)
        for name in READ_COLUMNS
    )
    return (
        f"SELECT {columns} FROM {qualified_clickhouse(database, AUTHORITY_TABLE)}"
        f" WHERE {_KEY} = {string_literal(target_key)}{settings_clause(STRICT)}"
    )


def strict_insert(database: str, row: AuthorityRow) -> str:
    """Strict insert of a new key (fails with Code 999 if the key exists)."""
    names = ", ".join(quote_clickhouse(name) for name in COLUMN_NAMES)
    values = ", ".join(_value(row, name) for name in COLUMN_NAMES)
    return (
        f"INSERT INTO {qualified_clickhouse(database, AUTHORITY_TABLE)} ({names}){settings_clause(WRITE)}"
        f" VALUES ({values})"
    )


def compare_and_set(database: str, row: AuthorityRow, expected_version: int) -> str:
    """Replace every non-key column of ``row.target_key`` iff its version is ``expected_version``."""
    assignments = ", ".join(f"{quote_clickhouse(name)} = {_value(row, name)}" for name in UPDATABLE)
    return (
        f"ALTER TABLE {qualified_clickhouse(database, AUTHORITY_TABLE)} UPDATE {assignments}"
        f" WHERE {_KEY} = {string_literal(row.target_key)} AND {_VERSION} = {uint_literal(expected_version)}"
        f"{settings_clause(WRITE)}"
    )
