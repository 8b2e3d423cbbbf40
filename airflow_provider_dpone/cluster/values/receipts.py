"""The sealed-artifact receipt: the immutable, replayable input of one publication.

The receipt is what the authority binds (never a path): a fresh process reopens the artifact from the
content-addressed store by ``sha256`` and verifies it against this receipt before every member load. The
``content_digest`` is the canonical typed multiset digest of the artifact's rows, computed while the artifact was
written; it is the reference every member's candidate must equal (a member's own value is never the reference).

``content_digest_version`` names the function that produced ``content_digest``, and every member digest of the same
record is computed with it: version 2, the typed SHA-256 multiset of :mod:`~airflow_provider_dpone.core.typed_digest`
(the same row hash the transfer route uses). A receipt without it, or of another version, was written by another build
and is refused (``DPONE_RECORD_FORMAT_UNSUPPORTED``, ``core/record_format.py``).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, Field, StrictBool, StrictStr, model_validator

from airflow_provider_dpone.cluster.values.identities import schema_digest
from airflow_provider_dpone.core.canonical import CLOSED, Hex64, NonNegative
from airflow_provider_dpone.core.record_format import ANOTHER_BUILD, PRE_RELEASE, format_error

ContentDigestVersion = Literal[2]
CONTENT_DIGEST_V2: Final = 2
"""``count`` and the sum modulo 2**256 of each row's typed SHA-256 (``core.typed_digest.row_hash``)."""
CURRENT_CONTENT_DIGEST: Final = CONTENT_DIGEST_V2
"""The version a new receipt, and everything observed for it, is computed with."""


def require_digest_version(version: object, what: str) -> None:
    """Refuse a content digest ``version`` other than this build's: absent or 1 (``sipHash128``) is a pre-release
    build's, any other another build's (``DPONE_RECORD_FORMAT_UNSUPPORTED``); never verified with another function."""
    if version != CONTENT_DIGEST_V2:
        known = type(version) is int and 0 < version < CONTENT_DIGEST_V2
        found = f"{what} content digest version {version if type(version) is int else '?'}"
        raise format_error(found, PRE_RELEASE if known else ANOTHER_BUILD)


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
    content_digest_version: ContentDigestVersion

    @model_validator(mode="before")
    @classmethod
    def _digest_version_of_this_build(cls, data: Any) -> Any:
        """A receipt without a digest version was written before versions existed (version 1)."""
        if isinstance(data, dict):
            require_digest_version(data.get("content_digest_version", 1), "artifact receipt")
        return data

    @property
    def schema_pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple((column.name, column.type) for column in self.columns)

    @property
    def schema_digest(self) -> str:
        return schema_digest(self.schema_pairs)
