"""Canonical JSON and SHA-256 helpers.

Every digest and identity in the provider is computed over canonical JSON, so two processes on two workers that hold the
same logical value always produce the same bytes. Canonical here means: UTF-8, object keys sorted, no insignificant
whitespace, no floats (their text form is not stable across languages and they are never needed: decimals travel as
strings), only string keys, and a hard size bound so a hostile or corrupt payload cannot exhaust memory.

The constrained scalar types of records, receipts and inventory values (``Hex64``, ``UuidText``, ``MemberId``,
``UInt64``, ...) are here too: each is a closed lexical form (lower-case hex, canonical UUID text, bounded integers),
so a record that passes validation has exactly one canonical JSON encoding, which is what lets a reader compare
payload bytes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StringConstraints

from airflow_provider_dpone.core.errors import DponeError

MAX_CANONICAL_BYTES: Final[int] = 256 * 1024
"""Largest canonical document the provider writes or accepts (authority payloads, receipts, evidence)."""

JsonValue = None | bool | int | str | list["JsonValue"] | dict[str, "JsonValue"]


def _check(value: Any, path: str) -> None:
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        raise DponeError("DPONE_CANONICAL_JSON_INVALID", f"float at {path}: encode decimals as strings")
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise DponeError("DPONE_CANONICAL_JSON_INVALID", f"non-string key at {path}")
            _check(item, f"{path}.{key}")
        return
    raise DponeError("DPONE_CANONICAL_JSON_INVALID", f"unsupported type {type(value).__name__} at {path}")


def canonical_json_bytes(value: Any, *, max_bytes: int = MAX_CANONICAL_BYTES) -> bytes:
    """Encode ``value`` as canonical JSON bytes, refusing floats, non-string keys and oversize documents."""
    _check(value, "$")
    encoded = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8"
    )
    if len(encoded) > max_bytes:
        raise DponeError("DPONE_CANONICAL_JSON_OVERSIZE", f"{len(encoded)} bytes > {max_bytes}")
    return encoded


def canonical_json(value: Any, *, max_bytes: int = MAX_CANONICAL_BYTES) -> str:
    """Canonical JSON as text (see :func:`canonical_json_bytes`)."""
    return canonical_json_bytes(value, max_bytes=max_bytes).decode("utf-8")


def parse_canonical_json(data: bytes | str, *, max_bytes: int = MAX_CANONICAL_BYTES) -> Any:
    """Parse bytes that must already be canonical: any other spelling of the same value is refused.

    Refusing non-canonical input (rather than normalizing it) is what lets a reader prove that the bytes it holds are
    exactly the bytes whose digest was recorded.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(raw) > max_bytes:
        raise DponeError("DPONE_CANONICAL_JSON_OVERSIZE", f"{len(raw)} bytes > {max_bytes}")
    try:
        value = json.loads(raw.decode("utf-8"), parse_float=_refuse_float, parse_constant=_refuse_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
        raise DponeError("DPONE_CANONICAL_JSON_INVALID", f"not JSON: {type(exc).__name__}") from None
    if canonical_json_bytes(value, max_bytes=max_bytes) != raw:
        raise DponeError("DPONE_CANONICAL_JSON_NONCANONICAL", "bytes are not the canonical encoding of their value")
    return value


def _refuse_float(text: str) -> Any:
    raise ValueError("float")


def _refuse_constant(text: str) -> Any:
    raise ValueError("constant")


def sha256_hex(data: bytes | str) -> str:
    """Lower-case hex SHA-256 of bytes (text is encoded as UTF-8)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def digest(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value``."""
    return sha256_hex(canonical_json_bytes(value))


def tagged_digest(tag: str, *parts: Any) -> str:
    """Domain-separated digest ``H(tag, parts...)`` used for every deterministic identity.

    The tag names the kind and version of the identity so that two different identities over the same parts never
    collide (for example a ``member_id`` and a ``target_key`` built from equal strings).
    """
    return digest([tag, *parts])


# --- the closed scalar forms of records -------------------------------------------------------------------------

UINT64_MAX: Final[int] = 2**64 - 1

CLOSED: Final[ConfigDict] = ConfigDict(frozen=True, extra="forbid")
"""Every contract model is frozen and refuses unknown fields."""


class Closed(BaseModel):
    """Base of a contract model: immutable, and unknown keys are errors (a misspelled field never defaults)."""

    model_config = CLOSED


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
