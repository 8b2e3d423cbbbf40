"""Checksum-bearing physical profile of the source parts, and the query's touched-part coverage.

The physical profile is provenance and a race detector, not a row-content digest: it lists the active base and patch
parts (with delete-mask state and the server's file checksums) of the bounded partition set before and after the one
SELECT. Equal before/after profiles give ``endpoint_authority_agreement`` only; they never prove that nothing
changed in between.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal

from pydantic import Field

from airflow_provider_dpone.core.canonical import Closed, digest, tagged_digest

PHYSICAL_KIND: Final = "dpone.clickhouse-physical-profile.v1"
MAX_PARTS: Final[int] = 10_000
"""The fixed implementation cap on the parts of one profile: exceeding it fails before data I/O."""


class PhysicalPart(Closed):
    name: str
    partition_id: str
    kind: Literal["base", "patch"]
    rows: int = Field(ge=0)
    level: int = Field(ge=0)
    data_version: int = Field(ge=0)
    min_block: int
    max_block: int
    checksum: str
    has_lightweight_delete: bool


class PhysicalProfile(Closed):
    """Active parts of the relation within the bounded partitions (``None`` means every partition)."""

    kind: Literal["dpone.clickhouse-physical-profile.v1"] = PHYSICAL_KIND
    relation_uuid: str
    partition_ids: tuple[str, ...] | None
    parts: tuple[PhysicalPart, ...] = Field(max_length=MAX_PARTS)

    def sha256(self) -> str:
        return digest(self.model_dump(mode="json"))

    def base_parts(self) -> dict[str, PhysicalPart]:
        return {part.name: part for part in self.parts if part.kind == "base"}


OFFSET_HASH_FUNCTION: Final = "intHash64"
"""The ClickHouse function that hashes one ``_part_offset`` (as ``UInt64``); :func:`offset_hash` is its definition."""
OFFSET_HASH_SEED: Final[int] = 0x4CF2D2BAAE6DA887
OFFSET_HASH_MULTIPLIERS: Final[tuple[int, int]] = (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53)
_MASK64: Final[int] = (1 << 64) - 1


def offset_hash(offset: int) -> int:
    """ClickHouse's ``intHash64``: MurmurHash3's 64-bit finalizer of the offset XOR a fixed seed.

    The function is part of ClickHouse's on-disk compatibility (sampling keys such as ``SAMPLE BY intHash64(id)``
    select stored rows by it), so it cannot change between server versions without breaking those tables.
    """
    x = (offset & _MASK64) ^ OFFSET_HASH_SEED
    for multiplier in OFFSET_HASH_MULTIPLIERS:
        x ^= x >> 33
        x = (x * multiplier) & _MASK64
    return x ^ (x >> 33)


class PartCoverage(Closed):
    """Selected rows of one base part: count, bounds and the multiset hash of the selected offsets.

    ``offsets_hash_sum`` is the sum modulo 2**64 of :func:`offset_hash` over the selected offsets: order-independent,
    duplicate-sensitive, and unlike moments (sum, sum of squares) it does not agree for two different offset sets
    except by a 64-bit hash collision.
    """

    part: str
    rows: int = Field(ge=1)
    min_offset: int = Field(ge=0)
    max_offset: int = Field(ge=0)
    offsets_hash_sum: int = Field(ge=0, le=_MASK64)


def coverage_sha256(entries: Iterable[PartCoverage]) -> str:
    """Digest of the touched-part coverage, sorted by part name (independent of arrival order)."""
    ordered = sorted(entries, key=lambda entry: entry.part)
    return tagged_digest("dpone.clickhouse-part-coverage.v2", [entry.model_dump(mode="json") for entry in ordered])
