"""Per-part content facts: what one immutable MergeTree part contributes to a table's content digest.

The content digest is a multiset sum over rows (``cluster/clickhouse/sql_digest.py``), so a table's count and sum
are the sums of its parts' counts and sums. A part never changes once written: a merge, a mutation or a write makes
new parts under new names, and ``hash_of_all_files`` fingerprints the part's files. So the facts of a part, recorded
once, stay true for as long as that part (name and checksum) is active, and a table whose parts partly changed is
digested by reading only the parts that are not recorded (``docs/publication-sql.md``, "Baseline reuse").

A recorded part is named by :func:`part_key`, an opaque digest of its name and checksum: a part name can carry a
partition value, and records never hold values. Facts are recorded only for tables of at most
:data:`MAX_PART_DIGESTS` active parts; a larger table records none and is digested whole when its parts change.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from pydantic import BaseModel

from airflow_provider_dpone.core.canonical import CLOSED, Hex64, NonNegative, tagged_digest

PART_KEY_TAG: Final[str] = "dpone.clickhouse.part.v1"

MAX_PART_DIGESTS: Final[int] = 32
"""Bound on recorded parts per table: each fact is about 150 bytes of payload, a member records its candidate's and
carries its predecessor's, so 32 parts keep a member under 10 KiB of the record (MAX_AUTHORITY_PAYLOAD_BYTES is
256 KiB). A load squashes by bytes, so 10M narrow rows make 2 parts; merges only reduce the count."""


class PartDigest(BaseModel):
    """One active part's contribution to the content digest of the digest version its owner records: ``rows`` and
    ``sum``, the row-hash sum modulo the version's width, as 64 lower-case hex digits."""

    model_config = CLOSED

    part: Hex64
    rows: NonNegative
    sum: Hex64


def part_key(name: str, checksum: str) -> str:
    """The opaque identity of one immutable part: its name with the server's checksum of its files."""
    return tagged_digest(PART_KEY_TAG, name, checksum)


def sum_text(value: int) -> str:
    """A part's hash sum in its recorded form."""
    return f"{value:064x}"


def recorded(parts: Iterable[PartDigest] | None) -> dict[str, PartDigest]:
    """Recorded facts by part key (none for a record written without them)."""
    return {fact.part: fact for fact in parts or ()}
