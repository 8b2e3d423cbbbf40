"""SQL of content verification: the server-side, NULL-safe, duplicate-sensitive multiset digest of a table.

One definition, used for the artifact's reference (over a temporary table the artifact bytes were loaded into, see
``reference_digest``), for the source query it was extracted from (``source_content``) and for every member's
candidate and target of the same record: ``count(), sum(reinterpretAsUInt256(reverse(<typed row SHA-256>)))``, the
row hash of ``sql_row_hash`` over the columns in table order, summed modulo 2**256 -- exactly
:class:`~airflow_provider_dpone.core.typed_digest.MultisetDigest` (the transfer's digest), so the canonical value is
:func:`~airflow_provider_dpone.core.typed_digest.native_multiset_digest` (costs: ``docs/perf-publication.md``). The
``version`` every function takes is the receipt's ``content_digest_version`` (version 2, the only one).

Why this shape:

* every column is encoded NULL-safely (a NULL field is its own byte), so ``NULL``, ``0`` and ``''`` differ and no row
  is skipped;
* ``sum`` (wrapping at the type's width) is a multiset hash: independent of row order, part layout and block
  boundaries, but a duplicated row adds its hash twice (``groupBitXor`` would cancel duplicates);
* the count is carried separately, so "same sum, different count" is still a difference;
* rows never travel to the worker: the server returns two numbers.

The limits are documented in ``docs/publication-sql.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from airflow_provider_dpone.cluster.clickhouse.literals import string_literal
from airflow_provider_dpone.cluster.values.receipts import ContentDigestVersion
from airflow_provider_dpone.core.canonical import tagged_digest
from airflow_provider_dpone.core.clickhouse.row_hash import row_hash_sum_expression
from airflow_provider_dpone.core.identifiers import qualified_clickhouse, quote_clickhouse, validate_identifier
from airflow_provider_dpone.core.typed_digest import MODULUS, native_multiset_digest

COUNT_ONLY: Final[str] = "count()"


def aggregates(columns: Sequence[tuple[str, str]], version: ContentDigestVersion) -> str:
    """``count(), <sum of row hashes as decimal text>`` over ``columns`` in table order."""
    return f"count(), {row_hash_sum_expression(columns)}"


def content_digest(row_count: int, hash_sum: int, version: ContentDigestVersion) -> str:
    """The canonical hex digest of one table content (count and multiset sum)."""
    if isinstance(row_count, bool) or not isinstance(row_count, int) or row_count < 0:
        raise ValueError("row_count must be a non-negative integer")
    if isinstance(hash_sum, bool) or not isinstance(hash_sum, int) or not 0 <= hash_sum < MODULUS:
        raise ValueError("hash_sum must be an unsigned integer below 2**256")
    return native_multiset_digest(row_count, hash_sum)


DEFAULT_VERIFICATION_SECONDS: Final[int] = 600
"""The server-side bound of one content verification read, in seconds."""


def verification_settings(seconds: int = DEFAULT_VERIFICATION_SECONDS) -> dict[str, int | str]:
    """The settings every content verification read carries: the server stops it at ``seconds`` (Code 159)."""
    return {"max_execution_time": seconds, "timeout_overflow_mode": "throw"}


def _uuid_of(database: str, table: str) -> str:
    db = string_literal(validate_identifier(database, what="database"))
    name = string_literal(validate_identifier(table, what="table"))
    return f"(SELECT toString(uuid) FROM system.tables WHERE database = {db} AND name = {name})"


def table_content(
    database: str, table: str, columns: Sequence[tuple[str, str]] | None, version: ContentDigestVersion
) -> str:
    """Count (and, given ``columns``, the multiset sum) of ``database.table`` plus the table's UUID *in the same
    statement*.

    The UUID binds the numbers to one physical table: if the name was exchanged between a metadata read and this
    read, the adapter sees a different UUID and refuses the observation instead of attributing content to the wrong
    table.
    """
    numbers = COUNT_ONLY if columns is None else aggregates(columns, version)
    return f"SELECT {numbers}, {_uuid_of(database, table)} FROM {qualified_clickhouse(database, table)}"


def part_content(
    database: str,
    table: str,
    columns: Sequence[tuple[str, str]],
    version: ContentDigestVersion,
    parts: Sequence[str] | None = None,
) -> str:
    """Count and multiset sum *per active part* (``GROUP BY _part``) of ``database.table``, only of the parts named
    in ``parts`` when given, as one row: ``[(part, count, sum)]`` of the parts the read actually saw, and the UUID.

    The sums add up to :func:`table_content`'s (the digest is a sum over rows), and the names say which parts were
    read, so a caller can tell whether a merge replaced parts between its listing and this read (its cost against
    the one-group read: docs/perf-publication.md).
    """
    numbers = f"count() AS c, {row_hash_sum_expression(columns)} AS s"
    where = "" if parts is None else f" WHERE _part IN ({', '.join(string_literal(part) for part in parts)})"
    return (
        f"SELECT groupArray((p, c, s)), {_uuid_of(database, table)} FROM (SELECT _part AS p, {numbers}"
        f" FROM {qualified_clickhouse(database, table)}{where} GROUP BY _part)"
    )


PARTS_TAG: Final[str] = "dpone.clickhouse.active-parts.v1"


def active_parts(database: str, table: str) -> str:
    """A scalar subquery: ``(parts, rows, uuid)``, the active parts of ``database.table`` (name and
    ``hash_of_all_files``, by name), the rows they hold (``system.parts.rows``: a lightweight delete's masked rows
    included) and the table's UUID, read *before* the parts (a scalar subquery is evaluated before the query around
    it runs). Sent in the metadata statement, so before the content read: parts equal to these later mean the
    digested rows are the rows still there (a part's name is never reused, and any write or merge replaces parts).
    The UUID must equal the metadata's and the content's: an exchange of the name in between is refused."""
    db = string_literal(validate_identifier(database, what="database"))
    name = string_literal(validate_identifier(table, what="table"))
    return (
        f"(SELECT (groupArray((name, hash_of_all_files)), sum(rows), {_uuid_of(database, table)}) FROM (SELECT name,"
        f" hash_of_all_files, rows FROM system.parts WHERE database = {db} AND table = {name} AND active ORDER BY name))"
    )


def listed_parts(database: str, table: str) -> str:
    """The active parts and the UUID alone (:func:`active_parts` as a statement): the listing after a per-part read."""
    return f"SELECT {active_parts(database, table)}"


def parts_digest(uuid: str, parts: Iterable[tuple[str, str]]) -> str:
    """The canonical hex digest of one table's active part set."""
    return tagged_digest(PARTS_TAG, uuid, *(f"{name}:{checksum}" for name, checksum in parts))


def temporary_content(table: str, columns: Sequence[tuple[str, str]], version: ContentDigestVersion) -> str:
    """Count and multiset sum of a session's temporary table (the artifact's reference)."""
    return f"SELECT {aggregates(columns, version)} FROM {quote_clickhouse(table)}"


def source_content(query: str, columns: Sequence[tuple[str, str]], version: ContentDigestVersion) -> str:
    """Count and multiset sum of the rows the source ``query`` returns, computed by the source engine over its own
    values (the artifact's anchor at the source). The query is the subquery as given, on lines of its own, so a
    trailing comment cannot swallow the closing parenthesis."""
    return f"SELECT {aggregates(columns, version)} FROM (\n{query}\n)"
