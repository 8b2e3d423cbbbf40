"""The fixed UTC half-open window of a ``partition_replace`` transfer, from the source read to the target replace.

Bounds are frozen once, as canonical text with microsecond precision and an explicit ``Z``, so the same window
always hashes to the same bytes and never depends on a wall clock or a session time zone. ``start`` is included and
``end`` excluded: adjacent windows tile time without overlap or gap.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Final

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, field_validator, model_validator

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import validate_identifier

_CANONICAL: Final[re.Pattern[str]] = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


def format_utc(value: dt.datetime) -> str:
    """Canonical text of an aware UTC instant; naive or non-UTC values are refused (no implicit calendar)."""
    if value.tzinfo is None or value.utcoffset() != dt.timedelta(0):
        raise DponeError("native_transfer.source_window_invalid", "window bounds must be timezone-aware UTC")
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_utc(text: str) -> dt.datetime:
    """Inverse of :func:`format_utc`; only the canonical spelling is accepted."""
    if not _CANONICAL.fullmatch(text):
        raise DponeError("native_transfer.source_window_invalid", "window bound is not canonical UTC text")
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)


def _bound(value: Any) -> dt.datetime:
    """A bound from its canonical text (how records carry it) or an aware UTC datetime."""
    if isinstance(value, str):
        return parse_utc(value)
    if isinstance(value, dt.datetime):
        format_utc(value)
        return value.astimezone(dt.UTC)
    raise DponeError("native_transfer.source_window_invalid", "window bound is neither UTC text nor a datetime")


UtcBound = Annotated[dt.datetime, BeforeValidator(_bound), PlainSerializer(format_utc)]
"""An aware UTC instant, serialized as its canonical text."""


class UtcWindow(BaseModel):
    """``[start, end)`` on one column, in UTC: what a ``partition_replace`` invocation reads from the source and
    replaces in the target. Serialized with canonical UTC text bounds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    column: str
    start: UtcBound
    end: UtcBound

    @field_validator("column")
    @classmethod
    def _plain_column(cls, value: str) -> str:
        return validate_identifier(value, what="window.column")

    @model_validator(mode="after")
    def _ordered(self) -> UtcWindow:
        if self.start >= self.end:
            raise DponeError("native_transfer.source_window_invalid", "window start must be before end")
        return self

    @classmethod
    def of(cls, column: str, start: dt.datetime, end: dt.datetime) -> UtcWindow:
        return cls(column=column, start=start, end=end)
