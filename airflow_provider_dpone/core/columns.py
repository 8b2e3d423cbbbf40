"""Typed columns of the native transfer route: what the source admitted and what the target must reproduce.

A :class:`NativeColumn` is the admitted shape of one source column: its ClickHouse type text (bound into identities),
its logical type for the typed digest, and the bounds a target needs to map it without loss (decimal precision,
integer width). The logical part is exactly a :class:`~airflow_provider_dpone.core.typed_digest.TypedColumn`, so
source and target hash the same row the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from airflow_provider_dpone.core.canonical import tagged_digest
from airflow_provider_dpone.core.identifiers import validate_identifier
from airflow_provider_dpone.core.typed_digest import LogicalType, TypedColumn

MAX_COLUMNS = 1024
"""Hard bound on the projection width: keeps plans, profiles and journal records bounded."""


class NativeColumn(BaseModel):
    """One admitted column, in projection order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    source_type: str = Field(min_length=1, max_length=256)
    logical: LogicalType
    nullable: bool = False
    scale: int = Field(default=0, ge=0, le=76)
    precision: int | None = Field(default=None, ge=1, le=76)
    integer_bits: int | None = Field(default=None, ge=8, le=64)
    integer_signed: bool | None = None

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        return validate_identifier(value, what="column")

    @property
    def typed(self) -> TypedColumn:
        """The logical column the typed multiset digest encodes by."""
        return TypedColumn(name=self.name, logical=self.logical, nullable=self.nullable, scale=self.scale)


def typed_columns(columns: Sequence[NativeColumn]) -> tuple[TypedColumn, ...]:
    """The typed-digest view of an ordered projection."""
    return tuple(column.typed for column in columns)


def columns_sha256(columns: Sequence[NativeColumn]) -> str:
    """Digest of the ordered projection: binds every stage object and plan to one column layout."""
    return tagged_digest("dpone.native-columns.v1", [column.model_dump(mode="json") for column in columns])
