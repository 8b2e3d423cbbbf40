"""Constrained scalar types shared by authority records, receipts and inventory values.

Each type is a closed lexical form (lower-case hex, canonical UUID text, bounded integers) so a record that passes
validation has exactly one canonical JSON encoding, which is what lets a reader compare payload bytes.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import ConfigDict, Field, StrictInt, StringConstraints

UINT64_MAX: Final[int] = 2**64 - 1

CLOSED: Final[ConfigDict] = ConfigDict(frozen=True, extra="forbid")
"""Every contract model is frozen and refuses unknown fields."""

Hex64 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
"""A SHA-256 digest or a digest-derived identity, lower-case hex."""

Token = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]
"""A random 128-bit token (fence token, DDL correlation token, write identity), lower-case hex."""

UuidText = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")]
"""A physical table UUID in canonical lower-case text form."""

MemberId = Annotated[str, StringConstraints(pattern=r"^m[0-9a-f]{16}$")]
"""An opaque member id (see ``identities.member_id``)."""

UInt64 = Annotated[StrictInt, Field(ge=0, le=UINT64_MAX)]
"""A ClickHouse UInt64 value (dispatch epoch, KeeperMap version, counts)."""

NonNegative = Annotated[StrictInt, Field(ge=0)]
"""A count or a size."""

TimestampMs = Annotated[StrictInt, Field(ge=0, le=UINT64_MAX)]
"""Milliseconds since the Unix epoch (UTC), from the injected clock."""
