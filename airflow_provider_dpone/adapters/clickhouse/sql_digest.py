"""SQL of content verification: the server-side, NULL-safe, duplicate-sensitive multiset digest of a table.

One expression pair is the whole definition, used for the artifact's reference (over a temporary table the artifact
bytes were loaded into, see ``reference_digest``) and for every member's candidate and target::

    count(), sum(reinterpretAsUInt128(sipHash128(tuple(*))))

Why this shape:

* ``tuple(*)`` hashes every column in table order. ``sipHash64(*)``/``cityHash64(*)`` with several arguments return
  NULL as soon as one argument is NULL, and ``sum`` skips NULLs: rows with a NULL would not count at all. A tuple is
  one non-NULL value whose hash covers the NULL map, so ``NULL`` and ``0`` hash differently.
* ``sum`` (modulo 2**128, ClickHouse's UInt128 wrap-around) is a multiset hash: independent of row order, part
  layout and block boundaries, but a duplicated row adds its hash twice. ``groupBitXor`` would cancel duplicates.
* The count is carried separately, so "same sum, different count" is still a difference.
* Rows never travel to the worker: the server returns two numbers.

The canonical digest binds both numbers and the algorithm's version into one SHA-256 hex string (what
``TableObservation.content_digest`` and ``ArtifactReceipt.content_digest`` hold). The limits are documented in
``docs/publication-sql.md``: SipHash-128 with ClickHouse's fixed key is not a cryptographic commitment; it detects
accidental divergence (lost, partial, duplicated or different rows), which is what staging verification needs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from airflow_provider_dpone.adapters.clickhouse.literals import string_literal
from airflow_provider_dpone.contracts.canonical import tagged_digest
from airflow_provider_dpone.contracts.identifiers import qualified_clickhouse, quote_clickhouse, validate_identifier

DIGEST_TAG: Final[str] = "dpone.clickhouse.content-digest.v1"
ALGORITHM: Final[str] = "count+sum(reinterpretAsUInt128(sipHash128(tuple(*))))"
AGGREGATES: Final[str] = "count(), toString(sum(reinterpretAsUInt128(sipHash128(tuple(*)))))"
"""``toString``: a UInt128 travels as decimal text, so no client-side integer width can truncate it."""
COUNT_ONLY: Final[str] = "count()"
UINT128_MODULUS: Final[int] = 2**128


def content_digest(row_count: int, hash_sum: int) -> str:
    """The canonical hex digest of one table content (count and multiset sum, domain-separated)."""
    if isinstance(row_count, bool) or not isinstance(row_count, int) or row_count < 0:
        raise ValueError("row_count must be a non-negative integer")
    if isinstance(hash_sum, bool) or not isinstance(hash_sum, int) or not 0 <= hash_sum < UINT128_MODULUS:
        raise ValueError("hash_sum must be a UInt128")
    return tagged_digest(DIGEST_TAG, ALGORITHM, row_count, str(hash_sum))


EMPTY_CONTENT_DIGEST: Final[str] = content_digest(0, 0)
"""The digest of an empty table: an empty generation is still one exact, identifiable content."""


def _uuid_of(database: str, table: str) -> str:
    db = string_literal(validate_identifier(database, what="database"))
    name = string_literal(validate_identifier(table, what="table"))
    return f"(SELECT toString(uuid) FROM system.tables WHERE database = {db} AND name = {name})"


def table_content(database: str, table: str, *, with_digest: bool) -> str:
    """Count (and multiset sum) of ``database.table`` plus the table's UUID *in the same statement*.

    The UUID binds the numbers to one physical table: if the name was exchanged between a metadata read and this
    read, the adapter sees a different UUID and refuses the observation instead of attributing content to the wrong
    table.
    """
    aggregates = AGGREGATES if with_digest else COUNT_ONLY
    return f"SELECT {aggregates}, {_uuid_of(database, table)} FROM {qualified_clickhouse(database, table)}"


PARTS_TAG: Final[str] = "dpone.clickhouse.active-parts.v1"


def table_parts(database: str, table: str) -> str:
    """The active parts of ``database.table`` (name and ``hash_of_all_files``, by name) plus the table's UUID in the
    same statement. Sent *before* the content read, so parts equal to these later mean the digested rows are the
    rows still there: a part's name is never reused, and any write or merge replaces parts."""
    db = string_literal(validate_identifier(database, what="database"))
    name = string_literal(validate_identifier(table, what="table"))
    return (
        f"SELECT groupArray((name, hash_of_all_files)), {_uuid_of(database, table)} FROM (SELECT name,"
        f" hash_of_all_files FROM system.parts WHERE database = {db} AND table = {name} AND active ORDER BY name)"
    )


def parts_digest(uuid: str, parts: Iterable[tuple[str, str]]) -> str:
    """The canonical hex digest of one table's active part set."""
    return tagged_digest(PARTS_TAG, uuid, *(f"{name}:{checksum}" for name, checksum in parts))


def temporary_content(table: str) -> str:
    """Count and multiset sum of a session's temporary table (the artifact's reference)."""
    return f"SELECT {AGGREGATES} FROM {quote_clickhouse(table)}"
