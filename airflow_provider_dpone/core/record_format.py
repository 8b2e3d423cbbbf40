"""A stored record another build wrote: one refusal, never a migration.

Every durable record this provider reads -- the publication authority record, the transfer journal's records and its
stage objects -- is read only in the formats this build writes. A record in any other format is refused with
``DPONE_RECORD_FORMAT_UNSUPPORTED``, whose detail names the format found, the build that wrote it and this build;
nothing is read from it, converted or rewritten. Formats written only by pre-release builds (before 0.1.0) are named
here so the refusal can say so; every other unknown format is another build's. The versions the specification keeps
(the internal authority record v1 and v2, their receipts, quality replay v1, the legacy source binding) are formats
this build writes, not compatibility.
"""

from __future__ import annotations

from typing import Final

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from airflow_provider_dpone import __version__
from airflow_provider_dpone.core.errors import DponeError

FORMAT_UNSUPPORTED: Final[str] = "DPONE_RECORD_FORMAT_UNSUPPORTED"
ERROR_TYPE: Final[str] = "record_format_unsupported"
"""The pydantic error type a model raises for a field of another build's format (:func:`format_error`)."""

PRE_RELEASE: Final[str] = "a pre-release dpone build (before 0.1.0)"
"""The writer of a format only builds before 0.1.0 wrote."""
ANOTHER_BUILD: Final[str] = "a build other than this one"
"""The writer of a format this build does not know (a later build, or not dpone)."""


def format_name(value: object) -> str:
    """A format name read from a record, as a refusal shows it: a bounded, name-like string, else ``?`` (a detail
    never carries arbitrary stored text)."""
    text = value if isinstance(value, str) else ""
    return text if 0 < len(text) <= 96 and all(c.isalnum() or c in ".-_" for c in text) else "?"


def detail(found: str, writer: str) -> str:
    """``<format found>: written by <writer>; this build is dpone <version>``."""
    return f"{found}: written by {writer}; this build is dpone {__version__}"


def refusal(found: str, writer: str = ANOTHER_BUILD) -> DponeError:
    """The refusal of a record in format ``found`` (what the record holds, named as the reader sees it)."""
    return DponeError(FORMAT_UNSUPPORTED, detail(found, writer))


def format_error(found: str, writer: str = PRE_RELEASE) -> PydanticCustomError:
    """Raised by a model's validator for a field in another build's format; :func:`refusal_of` turns it into the
    refusal when the record is decoded."""
    return PydanticCustomError(ERROR_TYPE, "{detail}", {"detail": detail(found, writer)})


def refusal_of(error: ValidationError, record: str) -> DponeError | None:
    """The refusal a failed validation of ``record`` (the record's kind and format, as the reader names it) carries:
    the first field of another build's format; ``None`` when no field is of another build's format."""
    for item in error.errors():
        if item["type"] == ERROR_TYPE:
            return DponeError(FORMAT_UNSUPPORTED, f"{record}, {item['msg']}")
    return None
