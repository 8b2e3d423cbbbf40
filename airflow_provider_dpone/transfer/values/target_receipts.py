"""What a publication asks the target for (every verified chunk) and the receipt the target writes when it commits.

The typed digest of a chunk is carried as its row count plus the modular sum of row hashes (``typed_sum``), exactly
as the source records it in each chunk receipt: sums fold across chunks, so the publication digest of the whole
invocation is derived from the verified chunks without reading any row again.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Final

from pydantic import Field, field_validator, model_validator

from airflow_provider_dpone.core.canonical import Closed, tagged_digest
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.typed_digest import MODULUS, MultisetDigest, native_multiset_digest
from airflow_provider_dpone.transfer.values.target import PublicationMode

_HEX64: Final[re.Pattern[str]] = re.compile(r"[0-9a-f]{64}")
MAX_CHUNKS: Final[int] = 1_000_000


def _hex64(value: str) -> str:
    if not _HEX64.fullmatch(value):
        raise ValueError("must be 64 lower-case hex digits")
    return value


class ChunkEvidence(Closed):
    """One chunk's ordinal, row count and typed sum (hex): as the source's receipt records them, and as a target
    recomputes them from what it stores (the two must be equal)."""

    ordinal: int = Field(ge=0, le=2**31 - 1)
    rows: int = Field(ge=0)
    typed_sum: str

    @field_validator("typed_sum")
    @classmethod
    def _sum_hex(cls, value: str) -> str:
        return _hex64(value)

    @property
    def digest(self) -> str:
        return native_multiset_digest(self.rows, int(self.typed_sum, 16))

    @classmethod
    def of(cls, ordinal: int, accumulated: MultisetDigest) -> ChunkEvidence:
        """The expectation of a chunk whose rows were accumulated into ``accumulated``."""
        return cls(ordinal=ordinal, rows=accumulated.rows, typed_sum=f"{accumulated.total:064x}")


class TargetPublication(Closed):
    """Every chunk of the invocation, contiguous from ordinal 0 (zero chunks publish an empty replacement)."""

    chunks: tuple[ChunkEvidence, ...] = Field(default=(), max_length=MAX_CHUNKS)

    @model_validator(mode="after")
    def _contiguous(self) -> TargetPublication:
        if [chunk.ordinal for chunk in self.chunks] != list(range(len(self.chunks))):
            raise DponeError("native_transfer.target_plan_invalid", "publication chunks must be contiguous from 0")
        return self

    @property
    def rows(self) -> int:
        return sum(chunk.rows for chunk in self.chunks)

    @property
    def typed_sum(self) -> int:
        return sum(int(chunk.typed_sum, 16) for chunk in self.chunks) % MODULUS

    @property
    def digest(self) -> str:
        return native_multiset_digest(self.rows, self.typed_sum)

    @property
    def chunk_rows(self) -> dict[int, int]:
        """Rows per ordinal, leaving out empty chunks (they have no rows in staging to count)."""
        return {chunk.ordinal: chunk.rows for chunk in self.chunks if chunk.rows}


class TargetPublicationReceipt(Closed):
    """Proof, read from the target, that the invocation's one publication committed: the row its publishing
    transaction wrote into ``__dpone_publication_receipts`` (``digest`` is the workload digest it published)."""

    publication_id: str
    invocation_id: str
    target_schema: str
    target_table: str
    mode: PublicationMode
    rows: int = Field(ge=0)
    digest: str
    committed_at: dt.datetime

    @field_validator("publication_id", "digest")
    @classmethod
    def _ids_hex(cls, value: str) -> str:
        return _hex64(value)

    @field_validator("committed_at")
    @classmethod
    def _utc(cls, value: dt.datetime) -> dt.datetime:
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return aware.astimezone(dt.UTC)

    def require_matches(self, request: TargetPublication) -> TargetPublicationReceipt:
        """Refuse a receipt whose rows or digest differ from what this invocation asked to publish."""
        if self.rows != request.rows or self.digest != request.digest:
            raise DponeError(
                "native_transfer.target_receipt_conflict",
                f"publication {self.publication_id[:16]}: receipt rows {self.rows}, requested {request.rows}",
            )
        return self

    @property
    def receipt_sha256(self) -> str:
        """The digest of the receipt row as the target stored it (what the route journals)."""
        return tagged_digest("dpone.target-receipt.v1", self.model_dump(mode="json"))
