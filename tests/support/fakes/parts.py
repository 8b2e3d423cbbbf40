"""The fake's MergeTree parts: enough of ClickHouse's part lifecycle for per-part content digests.

A fake table keeps its rows in one list; its parts are derived from how the list changed since they were last seen:
an INSERT is one new part (:func:`append`), rows appended otherwise since are one more part, a merge (``FakeTable.merges`` moved on) makes one part of all
rows, and rows that shrank under the parts (a rewrite) start over with one part. A part's name is never reused and
its checksum covers its rows, so a part whose rows changed is another part, as on the server.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_provider_dpone.cluster.values.part_digests import PartDigest, part_key, recorded, sum_text
from airflow_provider_dpone.cluster.values.receipts import ContentDigestVersion

if TYPE_CHECKING:  # the world imports the fakes that write parts
    from tests.support.fakes.world import FakeTable

Row = tuple[object, ...]
Part = tuple[str, str, tuple[Row, ...]]
"""(name, checksum, rows) of one active part."""


def active_parts(table: FakeTable) -> list[Part]:
    covered = sum(count for _, count in table.parts)
    if table.merges != table.parts_merges or covered > len(table.rows):
        table.parts_merges = table.merges
        table.parts = [_new(table, len(table.rows))] if table.rows else []
    elif covered < len(table.rows):
        table.parts.append(_new(table, len(table.rows) - covered))
    parts, offset = [], 0
    for name, count in table.parts:
        rows = tuple(table.rows[offset : offset + count])
        offset += count
        files = tuple(row[: len(row) - table.added_columns] for row in rows)
        parts.append((name, hashlib.sha256(repr((name, files)).encode()).hexdigest()[:32], rows))
    return parts


def add_column(table: FakeTable, column: tuple[str, str], default: object) -> None:
    """``ALTER TABLE ... ADD COLUMN``: a metadata-only alter. ClickHouse runs no mutation for it
    (``AlterCommand::isRequireMutationStage``, src/Storages/AlterCommands.cpp, is false for ``ADD_COLUMN``), so every
    part keeps its name and files (its ``hash_of_all_files``), while every row reads the column's default."""
    active_parts(table)
    table.columns = (*table.columns, column)
    table.rows[:] = [(*row, default) for row in table.rows]
    table.added_columns += 1


def append(table: FakeTable, rows: Sequence[Row]) -> None:
    """One INSERT (or fetched part) of ``rows``: one new part after the ones already there."""
    active_parts(table)
    table.rows.extend(rows)
    if rows:
        table.parts.append(_new(table, len(rows)))


def merge(table: FakeTable, start: int, stop: int) -> None:
    """A background merge of the active parts ``start:stop`` (in name order) into one new part; the rows stay."""
    active_parts(table)  # the parts as they are now
    merged = table.parts[start:stop]
    table.parts[start:stop] = [_new(table, sum(count for _, count in merged))]


def parts_digest(table: FakeTable) -> str:
    """The fake's active-parts fingerprint (names and checksums): it changes with every write and every merge."""
    listed = [(name, checksum) for name, checksum, _ in active_parts(table)]
    return hashlib.sha256(repr((table.uuid, listed)).encode()).hexdigest()


def drop_part(table: FakeTable, index: int) -> None:
    """``ALTER TABLE ... DROP PART``: the part's rows leave, the other parts stay as they are."""
    parts = active_parts(table)
    offset = sum(len(rows) for _, _, rows in parts[:index])
    del table.rows[offset : offset + len(parts[index][2])]
    del table.parts[index]


def content(
    table: FakeTable, version: ContentDigestVersion, known: tuple[PartDigest, ...]
) -> tuple[str, tuple[PartDigest, ...], int]:
    """The content digest summed over the active parts, reading only those not ``known``: digest, facts, parts read."""
    from tests.support.fakes.world import content_sums, digest_of

    facts = recorded(known)
    parts: list[PartDigest] = []
    read = 0
    for name, checksum, rows in active_parts(table):
        key = part_key(name, checksum)
        fact = facts.get(key)
        if fact is None:
            count, total = content_sums(table.columns, rows, version)
            fact = PartDigest(part=key, rows=count, sum=sum_text(total))
            read += 1
        parts.append(fact)
    total = sum(int(fact.sum, 16) for fact in parts) % 2**256
    digest = digest_of(sum(fact.rows for fact in parts), total, version)
    return digest, tuple(sorted(parts, key=lambda fact: fact.part)), read


def _new(table: FakeTable, count: int) -> tuple[str, int]:
    table.blocks += 1
    return f"all_{table.blocks}_{table.blocks}_0", count
