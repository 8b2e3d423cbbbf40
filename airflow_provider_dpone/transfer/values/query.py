"""The one data SELECT, described as values: query shape, ordered projection/conversion and typed parameters.

The profile binds the digests of these three descriptors; the adapter renders SQL only from a
:class:`SnapshotQuery` and recomputes the digests before execution, so the query that runs is provably the query
that was admitted. The descriptors hold no relation coordinates and no rendered SQL.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from airflow_provider_dpone.core.canonical import tagged_digest
from airflow_provider_dpone.core.columns import MAX_COLUMNS, NativeColumn
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.raw_snapshot import QueryRecord, SettingRecord
from airflow_provider_dpone.transfer.values.row_digest import RowDigest
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow, format_utc

SHAPE_KIND: Final = "dpone.clickhouse-snapshot-select.v1"
PROVENANCE_COLUMNS: Final = ("_part", "_part_offset")
PROVENANCE_TYPES: Final = ("LowCardinality(String)", "UInt64")
WINDOW_PARAMETER_TYPE: Final = "DateTime64(6, 'UTC')"


class SnapshotQuery(BaseModel):
    """Everything the adapter may use to render and run the data SELECT."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    relation: RelationRef
    projection: tuple[NativeColumn, ...] = Field(min_length=1, max_length=MAX_COLUMNS)
    window: UtcWindow | None
    provenance: bool
    settings: tuple[SettingRecord, ...]
    vendor_query_id: str
    block_rows: int = Field(ge=1)
    expected: QueryRecord | None
    row_digest: RowDigest = RowDigest.TYPED_SHA256

    def settings_dict(self) -> dict[str, str]:
        return {record.name: record.value for record in self.settings}


def window_parameter_text(value: dt.datetime) -> str:
    """A window bound as the ClickHouse DateTime64 parameter literal (its canonical UTC text, space-separated)."""
    return format_utc(value).replace("T", " ").removesuffix("Z")


def shape_descriptor(query: SnapshotQuery) -> dict[str, Any]:
    """The normalized, versioned query shape: no FINAL, grouping, ordering, sampling, limit or offset."""
    return {
        "kind": SHAPE_KIND,
        "source": "one_relation",
        "final": False,
        "group_by": False,
        "order_by": False,
        "sample": False,
        "limit": None,
        "offset": None,
        "predicate": None if query.window is None else {"column": query.window.column, "op": "half_open"},
        "provenance": list(PROVENANCE_COLUMNS) if query.provenance else [],
        # bound only when not the first method, so the shapes (and digests) admitted before it stay what they were
        **({} if query.row_digest is RowDigest.TYPED_SHA256 else {"row_digest": query.row_digest.value}),
    }


def projection_descriptor(query: SnapshotQuery) -> list[dict[str, Any]]:
    """The ordered projection and its conversion (source type to logical type)."""
    return [column.model_dump(mode="json") for column in query.projection]


def parameters_descriptor(query: SnapshotQuery) -> dict[str, Any]:
    """Canonical typed parameters of the predicate (microsecond UTC instants, compared exactly by the server)."""
    if query.window is None:
        return {}
    return {
        "dpone_window_start": {"type": WINDOW_PARAMETER_TYPE, "value": window_parameter_text(query.window.start)},
        "dpone_window_end": {"type": WINDOW_PARAMETER_TYPE, "value": window_parameter_text(query.window.end)},
    }


def query_record(query: SnapshotQuery) -> QueryRecord:
    return QueryRecord(
        query_shape_sha256=tagged_digest("dpone.query-shape.v1", shape_descriptor(query)),
        projection_sha256=tagged_digest("dpone.query-projection.v1", projection_descriptor(query)),
        parameters_sha256=tagged_digest("dpone.query-parameters.v1", parameters_descriptor(query)),
    )


def verify_query(query: SnapshotQuery) -> None:
    """Recompute the three descriptor digests and require the ones the profile bound (raw mode)."""
    if query.expected is not None and query_record(query) != query.expected:
        raise DponeError("native_transfer.source_snapshot_drift", "rendered query differs from the admitted profile")
