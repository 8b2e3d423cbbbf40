"""The sealed-artifact receipt: the immutable, replayable input of one publication.

The receipt is what the authority binds (never a path): a fresh process reopens the artifact from the
content-addressed store by ``sha256`` and verifies it against this receipt before every member load. The
``content_digest`` is the canonical typed multiset digest of the artifact's rows, computed while the artifact was
written; it is the reference every member's candidate must equal (a member's own value is never the reference).

``content_digest_version`` names the function that produced ``content_digest``, and every member digest of the same
record is computed with it. Version 1 (``count + sum(sipHash128(tuple(*)))``) is what records written before
versions existed hold: the field is absent from their payloads, so they still decode byte-canonically and are still
verified with their own function. New receipts carry version 2, the typed SHA-256 multiset of
:mod:`~airflow_provider_dpone.core.typed_digest`: cheaper for the server, and the same row hash the transfer route
uses.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, Field, StrictBool, StrictStr

from airflow_provider_dpone.core.canonical import CLOSED, Hex64, NonNegative
from airflow_provider_dpone.core.identities import schema_digest

ContentDigestVersion = Literal[1, 2]
CONTENT_DIGEST_V1: Final = 1
"""``count`` and ``sum(reinterpretAsUInt128(sipHash128(tuple(*))))`` modulo 2**128 (read and verified, no longer
written)."""
CONTENT_DIGEST_V2: Final = 2
"""``count`` and the sum modulo 2**256 of each row's typed SHA-256 (``core.typed_digest.row_hash``)."""
CURRENT_CONTENT_DIGEST: Final = CONTENT_DIGEST_V2
"""The version a new receipt, and everything observed for it, is computed with."""


class ArtifactColumn(BaseModel):
    model_config = CLOSED

    name: StrictStr = Field(min_length=1)
    type: StrictStr = Field(min_length=1)


class ArtifactReceipt(BaseModel):
    """Identity of one sealed artifact: bytes, rows, wire format and typed schema."""

    model_config = CLOSED

    sha256: Hex64
    byte_size: NonNegative
    row_count: NonNegative
    wire_format: Literal["Native"] = "Native"
    columns: tuple[ArtifactColumn, ...] = Field(min_length=1)
    content_digest: Hex64
    replayable: StrictBool
    content_digest_version: ContentDigestVersion = Field(
        default=CONTENT_DIGEST_V1, exclude_if=lambda version: version == CONTENT_DIGEST_V1
    )
    """Absent (version 1) in the payloads of records written before digest versions."""

    @property
    def schema_pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple((column.name, column.type) for column in self.columns)

    @property
    def schema_digest(self) -> str:
        return schema_digest(self.schema_pairs)
