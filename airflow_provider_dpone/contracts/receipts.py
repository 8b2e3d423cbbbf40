"""The sealed-artifact receipt: the immutable, replayable input of one publication.

The receipt is what the authority binds (never a path): a fresh process reopens the artifact from the
content-addressed store by ``sha256`` and verifies it against this receipt before every member load. The
``content_digest`` is the canonical typed multiset digest of the artifact's rows, computed while the artifact was
written; it is the reference every member's candidate must equal (a member's own value is never the reference).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, StrictBool, StrictStr

from airflow_provider_dpone.contracts.authority_fields import CLOSED, Hex64, NonNegative
from airflow_provider_dpone.contracts.identities import schema_digest


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

    @property
    def schema_pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple((column.name, column.type) for column in self.columns)

    @property
    def schema_digest(self) -> str:
        return schema_digest(self.schema_pairs)
