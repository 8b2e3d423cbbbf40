"""Constrained field types shared by every manifest route.

Each type carries its own rule so that a rule cannot be forgotten where a field is declared: names go through
:func:`validate_identifier`, connection ids are Airflow connection *names* (never URIs, so no credential can ride in a
manifest), timestamps are fixed UTC instants. Violations raise pydantic custom errors whose *type* the loader maps to a
stable code (``dpone_identifier`` -> ``DPONE_IDENTIFIER_INVALID``, ``dpone_window`` -> ``DPONE_MANIFEST_WINDOW_INVALID``);
their messages never contain the offending text.

``DocType`` markers name a type for the generated manifest reference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BeforeValidator, Field, StrictStr, model_validator
from pydantic_core import PydanticCustomError

from airflow_provider_dpone.core.canonical import Closed
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import validate_identifier

IDENTIFIER_ERROR: Final[str] = "dpone_identifier"
WINDOW_ERROR: Final[str] = "dpone_window"


@dataclass(frozen=True)
class DocType:
    """Names a constrained type in the generated reference (``identifier``, ``connection id``, ...)."""

    name: str


def identifier_value(value: str) -> str:
    """Validate a name, failing with the ``dpone_identifier`` error type (mapped to ``DPONE_IDENTIFIER_INVALID``)."""
    try:
        return validate_identifier(value, what="name")
    except DponeError as exc:
        reason = exc.detail.partition(": ")[2] or exc.detail
        raise PydanticCustomError(IDENTIFIER_ERROR, "not a plain identifier: {reason}", {"reason": reason}) from None


Identifier = Annotated[StrictStr, AfterValidator(identifier_value), DocType("identifier")]
"""A database, schema, table, column or cluster name: ``[A-Za-z_][A-Za-z0-9_]*``, at most 128 characters."""

ConnectionId = Annotated[
    StrictStr,
    Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,249}$"),
    DocType("connection id"),
]
"""An Airflow connection id (letters, digits, ``_ . -``); the connection itself holds hosts and secrets."""

ManifestName = Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"), DocType("name")]

Sha256Hex = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$"), DocType("sha256 hex")]

MAX_QUERY_CHARS: Final[int] = 256 * 1024


def _query(value: str) -> str:
    if "\x00" in value:
        raise ValueError("NUL character in query")
    stripped = value.strip()
    if not stripped:
        raise ValueError("query is blank")
    return stripped


SqlQuery = Annotated[StrictStr, Field(max_length=MAX_QUERY_CHARS), AfterValidator(_query), DocType("SQL text (SELECT)")]
"""A source query; surrounding whitespace is not part of it (YAML block styles differ only there)."""

_STORE_URI: Final[re.Pattern[str]] = re.compile(r"^(file|s3|gs|gcs|abfs|az|memory)://[^\s@?#\x00]*$")


def _store_uri(value: str) -> str:
    if not _STORE_URI.fullmatch(value):
        raise ValueError(
            "store_uri must be <scheme>://<path> with scheme file, s3, gs, gcs, abfs, az or memory, "
            "and no user info, query or fragment"
        )
    return value


StoreUri = Annotated[StrictStr, Field(max_length=1024), AfterValidator(_store_uri), DocType("object store URI")]

_UTC_TEXT: Final[re.Pattern[str]] = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,6})?(Z|\+00:00)$"
)


def _utc_instant(value: Any) -> datetime:
    if isinstance(value, datetime):
        offset = value.utcoffset()
        if offset is None or offset.total_seconds() != 0:
            raise PydanticCustomError(WINDOW_ERROR, "timestamp must be timezone-aware UTC")
        return value.astimezone(UTC)
    if not isinstance(value, str) or not _UTC_TEXT.fullmatch(value):
        raise PydanticCustomError(
            WINDOW_ERROR,
            "timestamp must be an explicit UTC instant like 2026-09-01T00:00:00Z (no local time, date-only, "
            "wall-clock word or template)",
        )
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        raise PydanticCustomError(WINDOW_ERROR, "timestamp is not a calendar instant") from None


UtcTimestamp = Annotated[datetime, BeforeValidator(_utc_instant), DocType("UTC timestamp")]


def render_utc(instant: datetime) -> str:
    """The one text form of a window bound: ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``."""
    text = instant.astimezone(UTC).isoformat()
    return text.replace("+00:00", "Z")


class LoadStrategy(StrEnum):
    FULL_REFRESH = "full_refresh"
    PARTITION_REPLACE = "partition_replace"


class Window(Closed):
    """A fixed UTC half-open interval ``[start, end)`` over one column, frozen in the manifest."""

    column: Identifier = Field(description="Column the window filters on (a UTC timestamp column of the source).")
    start: UtcTimestamp = Field(description="Inclusive lower bound, an explicit UTC instant.")
    end: UtcTimestamp = Field(description="Exclusive upper bound, an explicit UTC instant after start.")

    @model_validator(mode="after")
    def _ordered(self) -> Window:
        if not self.start < self.end:
            raise PydanticCustomError(WINDOW_ERROR, "start must be before end (half-open [start, end))")
        return self


def check_window_for_strategy(strategy: LoadStrategy, window: Window | None) -> None:
    """``partition_replace`` needs a window; ``full_refresh`` must not carry one (it would be silently ignored)."""
    if strategy is LoadStrategy.PARTITION_REPLACE and window is None:
        raise PydanticCustomError(WINDOW_ERROR, "partition_replace requires load.window")
    if strategy is LoadStrategy.FULL_REFRESH and window is not None:
        raise PydanticCustomError(WINDOW_ERROR, "load.window is only allowed with strategy partition_replace")


class SinkOptions(Closed):
    """Options every sink accepts."""

    durable_quality_replay: bool = Field(
        default=False,
        strict=True,
        description="Record durable, replayable quality evidence (strict boolean): supported only on the internal "
        "replicated cluster full refresh; true on any other route is refused before any I/O.",
    )


ManifestVersion = Literal[1]
