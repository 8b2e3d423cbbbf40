"""A MergeTree table's content digest summed per active part, reading only the parts whose facts are not known.

The digest is a sum over rows, so it is the sum of the parts' sums (``cluster/values/part_digests.py``). Two reads:

* *whole* -- one ``GROUP BY _part`` read of every row (``sql_digest.part_content``): its total is exactly the
  one-group digest, and each part it read whose name was in the listing before it is a fact (name, listed checksum,
  rows, sum). A part a merge made meanwhile is summed but not recorded (its checksum was not listed).
* *known parts* -- the listed parts whose key is among the known facts are not read; the others are read by name.
  The parts are listed again after that read: if both listings are equal (names and checksums; an active part never
  becomes active again, so every listed part was active throughout) and the read saw no other part, the table held
  exactly those parts at both moments, and the sum of known and read facts is the digest a whole read would have
  given then. A listed part the read did not see holds no row. Otherwise the newer listing is used and it is tried
  again, at most :data:`ATTEMPTS` times, then the whole table is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from airflow_provider_dpone.cluster.clickhouse import sql_digest
from airflow_provider_dpone.cluster.values.part_digests import (
    MAX_PART_DIGESTS,
    PartDigest,
    part_key,
    recorded,
    sum_text,
)
from airflow_provider_dpone.cluster.values.receipts import ContentDigestVersion
from airflow_provider_dpone.core.errors import UnavailableError
from airflow_provider_dpone.core.typed_digest import MODULUS

ATTEMPTS: Final[int] = 3
"""Reads of the unknown parts before the whole table is read instead (each failed one saw a merge)."""

ListedParts = tuple[tuple[str, str], ...]
"""Active parts as listed: (name, ``hash_of_all_files``), ordered by name."""

Read = Callable[[str, str], list[Any]]
"""A session's read: (statement, what) -> rows; raises :class:`UnavailableError`."""


class TableChangedError(UnavailableError):
    """Another physical table (UUID) answered under the name during the observation."""


@dataclass(frozen=True)
class Content:
    row_count: int
    content_digest: str
    part_digests: tuple[PartDigest, ...] | None
    parts_read: int


@dataclass(frozen=True)
class DigestedTable:
    """The table being digested: where, which physical table (UUID), its schema and the digest version."""

    database: str
    table: str
    uuid: str
    columns: Sequence[tuple[str, str]]
    version: ContentDigestVersion


def listing(answer: Any, uuid: str) -> ListedParts:
    """The parts of an ``active_parts`` answer, refused (:class:`TableChangedError`) when they are another table's."""
    raw, _rows, bound_uuid = answer
    if str(bound_uuid) != uuid:
        raise TableChangedError("the table changed during observation")
    return tuple((str(name), str(checksum)) for name, checksum in raw)


def listed_rows(answer: Any) -> int:
    """The rows the active parts of an ``active_parts`` answer hold, as the server lists them with the parts."""
    return int(answer[1])


def read_content(read: Read, target: DigestedTable, listed: ListedParts, known: Sequence[PartDigest]) -> Content:
    """The content of ``target`` whose parts were ``listed`` just before, reusing the ``known`` facts it can."""
    facts = recorded(known)
    for _ in range(ATTEMPTS):
        keys = {name: part_key(name, checksum) for name, checksum in listed}
        missing = [name for name, key in keys.items() if key not in facts]
        if len(missing) == len(keys):
            break  # nothing known is still active: one whole read
        sums = _read(read, target, missing) if missing else {}
        after = listing(
            read(sql_digest.listed_parts(target.database, target.table), "parts listing")[0][0], target.uuid
        )
        if after == listed and set(sums) <= set(missing):
            parts = {key: facts.get(key) or _fact(key, *sums.get(name, (0, 0))) for name, key in keys.items()}
            return _content(target, ((fact.rows, int(fact.sum, 16)) for fact in parts.values()), parts, len(missing))
        listed = after
    sums = _read(read, target, None)
    checksums = dict(listed)  # a part the read saw but the listing did not (a merge in between) is not recorded
    keys = {name: part_key(name, checksums[name]) for name in sums if name in checksums}
    return _content(target, sums.values(), {key: _fact(key, *sums[name]) for name, key in keys.items()}, len(sums))


def _read(read: Read, target: DigestedTable, parts: Sequence[str] | None) -> dict[str, tuple[int, int]]:
    """(rows, sum) of each part the per-part read saw (only ``parts`` when given)."""
    statement = sql_digest.part_content(target.database, target.table, target.columns, target.version, parts)
    groups, bound_uuid = read(statement, "content read")[0]
    if str(bound_uuid) != target.uuid:
        raise TableChangedError("the table changed during observation")
    return {str(name): (int(rows), int(value)) for name, rows, value in groups}


def _fact(key: str, rows: int, value: int) -> PartDigest:
    return PartDigest(part=key, rows=rows, sum=sum_text(value))


def _bounded(parts: dict[str, PartDigest]) -> tuple[PartDigest, ...] | None:
    if len(parts) > MAX_PART_DIGESTS:
        return None
    return tuple(parts[key] for key in sorted(parts))


def _content(
    target: DigestedTable, sums: Iterable[tuple[int, int]], parts: dict[str, PartDigest], parts_read: int
) -> Content:
    """The table's digest from every part's (rows, sum), with the facts to record of ``parts``."""
    rows = total = 0
    for count, value in sums:
        rows, total = rows + count, total + value
    digest = sql_digest.content_digest(rows, total % MODULUS, target.version)
    return Content(rows, digest, _bounded(parts), parts_read)
