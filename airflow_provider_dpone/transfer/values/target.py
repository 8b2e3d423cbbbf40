"""The target plan: what one invocation publishes where, and the deterministic names it owns in the target.

A plan is built once per invocation (by the route, from the manifest and the admitted source schema) and passed to
every call of the transfer-target port. Everything a retry needs is derived from it deterministically: the staging
table, the retired-table name of a full refresh, the publication id and its lock key. So a same-invocation retry in
another worker process touches exactly the same objects and reads exactly the same receipt, and a different
invocation can never touch them.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Final

from pydantic import Field, model_validator

from airflow_provider_dpone.core.canonical import Closed, tagged_digest
from airflow_provider_dpone.core.columns import MAX_COLUMNS, NativeColumn
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import validate_identifier
from airflow_provider_dpone.core.manifest.transfer import StringMapping
from airflow_provider_dpone.core.typed_digest import LogicalType, TypedColumn
from airflow_provider_dpone.transfer.values.row_digest import RowDigest
from airflow_provider_dpone.transfer.values.target_types import ColumnType, parse_column_type
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow

RESERVED_PREFIX: Final[str] = "__dpone_"
CHUNK_COLUMN: Final[str] = "__dpone_chunk"
ROW_COLUMN: Final[str] = "__dpone_row"
"""Each staged row's position in its chunk (0..rows-1), written by the load."""
RECEIPT_TABLE: Final[str] = "__dpone_publication_receipts"
_INVOCATION_ID: Final[re.Pattern[str]] = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{7,127}")
_NAME_DIGEST_CHARS: Final[int] = 32


class PublicationMode(StrEnum):
    """``full_refresh`` swaps the whole table; ``window_replace`` replaces one UTC half-open window of rows."""

    FULL_REFRESH = "full_refresh"
    WINDOW_REPLACE = "window_replace"


def _plan_error(detail: str) -> DponeError:
    return DponeError("native_transfer.target_plan_invalid", detail)


class TargetColumn(Closed):
    """One published column: its name and the ClickHouse type it comes from (the target type is derived)."""

    name: str
    source_type: str = Field(min_length=1, max_length=256)
    string_mapping: StringMapping = StringMapping.BINARY

    @model_validator(mode="after")
    def _admitted(self) -> TargetColumn:
        validate_identifier(self.name, what="column")
        if self.name.startswith(RESERVED_PREFIX):
            raise _plan_error("column: the __dpone_ prefix is reserved")
        parse_column_type(self.source_type, self.string_mapping)
        return self

    @property
    def column_type(self) -> ColumnType:
        return parse_column_type(self.source_type, self.string_mapping)

    @property
    def typed(self) -> TypedColumn:
        return self.column_type.typed(self.name)


class TargetPlan(Closed):
    """One invocation's publication into one target table."""

    invocation_id: str
    target_schema: str
    target_table: str
    columns: tuple[TargetColumn, ...] = Field(min_length=1, max_length=MAX_COLUMNS)
    mode: PublicationMode
    window: UtcWindow | None = None
    row_digest: RowDigest = RowDigest.TYPED_SHA256

    @model_validator(mode="after")
    def _consistent(self) -> TargetPlan:
        if not _INVOCATION_ID.fullmatch(self.invocation_id):
            raise _plan_error("invocation_id: 8..128 characters of [A-Za-z0-9._:-]")
        validate_identifier(self.target_schema, what="target_schema")
        validate_identifier(self.target_table, what="target_table")
        if self.target_table.startswith(RESERVED_PREFIX):
            raise _plan_error("target_table: the __dpone_ prefix is reserved")
        names = [column.name.lower() for column in self.columns]
        if len(set(names)) != len(names):
            raise _plan_error("columns: duplicate name (names are compared case-insensitively)")
        if (self.mode is PublicationMode.WINDOW_REPLACE) != (self.window is not None):
            raise _plan_error("window: required for window_replace and forbidden for full_refresh")
        if self.window is not None:
            self._check_window(self.window)
        return self

    def _check_window(self, window: UtcWindow) -> None:
        column = next((c for c in self.columns if c.name == window.column), None)
        if column is None:
            raise _plan_error("window.column: not a planned column")
        logical = column.column_type.logical
        if logical is LogicalType.DATE:
            if any(bound.time() != dt.time(0) for bound in (window.start, window.end)):
                raise _plan_error("window: a Date column needs bounds at midnight UTC")
        elif logical is not LogicalType.DATETIME:
            raise _plan_error("window.column: must be a Date or DateTime column")

    def _name_digest(self) -> str:
        return tagged_digest("dpone.target-staging.v1", self.invocation_id, self.target_schema, self.target_table)[
            :_NAME_DIGEST_CHARS
        ]

    @property
    def staging_table(self) -> str:
        """The invocation's staging table: bounded (44 characters, within PostgreSQL's 63) and deterministic."""
        return f"{RESERVED_PREFIX}stg_{self._name_digest()}"

    @property
    def staging_index(self) -> str:
        """The chunk-ordinal index of the staging table (dropped before a full-refresh swap)."""
        return f"{self.staging_table}_c"

    @property
    def retired_table(self) -> str:
        """The name the previous table takes inside a full-refresh transaction, just before it is dropped."""
        return f"{RESERVED_PREFIX}old_{self._name_digest()}"

    @property
    def publication_id(self) -> str:
        """The invocation's one publication: the primary key of its receipt, so it can commit at most once."""
        return tagged_digest(
            "dpone.target-publication.v1",
            self.invocation_id,
            self.target_schema,
            self.target_table,
            self.mode.value,
            None
            if self.window is None
            else {
                "column": self.window.column,
                "start": self.window.start.isoformat(),
                "end": self.window.end.isoformat(),
            },
            [[c.name, c.source_type, c.string_mapping.value] for c in self.columns],
        )

    @property
    def lock_key(self) -> int:
        """A signed 64-bit key of the publication (PostgreSQL advisory locks take a bigint)."""
        return int.from_bytes(bytes.fromhex(self.publication_id[:16]), "big", signed=True)

    @property
    def lock_resource(self) -> str:
        """The application-lock resource name of the publication (SQL Server ``sp_getapplock``, max 255)."""
        return f"dpone.publication.{self.publication_id}"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns)

    @property
    def typed_columns(self) -> tuple[TypedColumn, ...]:
        return tuple(column.typed for column in self.columns)


class TargetTable(Closed):
    """The one target table a target is bound to (from the manifest's sink); every invocation publishes into it."""

    target_schema: str
    table: str
    string_mapping: StringMapping = StringMapping.BINARY

    def plan(
        self,
        invocation_id: str,
        columns: Sequence[NativeColumn],
        window: UtcWindow | None,
        row_digest: RowDigest = RowDigest.TYPED_SHA256,
    ) -> TargetPlan:
        """The deterministic plan of one invocation (validates names and column types; no I/O)."""
        return TargetPlan(
            row_digest=row_digest,
            invocation_id=invocation_id,
            target_schema=self.target_schema,
            target_table=self.table,
            columns=tuple(
                TargetColumn(name=c.name, source_type=c.source_type, string_mapping=self.string_mapping)
                for c in columns
            ),
            mode=PublicationMode.FULL_REFRESH if window is None else PublicationMode.WINDOW_REPLACE,
            window=window,
        )
