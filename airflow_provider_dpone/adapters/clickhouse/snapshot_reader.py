"""The one data SELECT, streamed in bounded column blocks with hidden provenance split off.

Strings are read as bytes (``query_formats={"String": "bytes"}``): decoding to text on the way in would replace
invalid UTF-8 and change the typed multiset. The result header is checked against the admitted projection before
the first row is used (an empty result may come without a header); ``_part``/``_part_offset`` are removed from the block and handed over separately, so they can
never reach a stage object or the target. Leaving the context closes the stream (also on error or cancellation).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError

from airflow_provider_dpone.adapters.clickhouse.snapshot_metadata import on_session, source_failure
from airflow_provider_dpone.adapters.clickhouse.snapshot_sql import render_select
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.native_query import PROVENANCE_COLUMNS, PROVENANCE_TYPES, SnapshotQuery
from airflow_provider_dpone.ports.transfer import SourceBlock
from airflow_provider_dpone.protocol.native_transfer.schema_admission import UTC_ZONES

_DATETIME_ZONE: Final[re.Pattern[str]] = re.compile(r"DateTime\('([^']*)'\)")


def _normalize(type_text: str) -> str:
    """Drop a UTC zone from ``DateTime('UTC')``: some engines omit it from the Native result header."""
    return _DATETIME_ZONE.sub(lambda m: "DateTime" if m.group(1) in UTC_ZONES else m.group(0), type_text)


def _check_header(query: SnapshotQuery, names: tuple[str, ...], types: list[str]) -> None:
    expected_names = [column.name for column in query.projection]
    expected_types = [column.source_type for column in query.projection]
    if query.provenance:
        expected_names += list(PROVENANCE_COLUMNS)
        expected_types += list(PROVENANCE_TYPES)
    if list(names) != expected_names or [_normalize(t) for t in types] != [_normalize(t) for t in expected_types]:
        raise DponeError("mssql_native.source_snapshot_drift", "result header differs from the admitted projection")


@contextmanager
def stream_blocks(client: Client, query: SnapshotQuery) -> Iterator[Iterator[SourceBlock]]:
    text, parameters = render_select(query)
    settings: dict[str, str | int] = {**query.settings_dict(), "max_block_size": query.block_rows}
    settings["query_id"] = query.vendor_query_id
    width = len(query.projection)
    try:
        context = on_session(
            lambda: client.query_column_block_stream(
                text, parameters=parameters, settings=settings, query_formats={"String": "bytes"}
            )
        )
    except ClickHouseError as exc:
        raise source_failure(exc, "mssql_native.source_query_failed", "select") from None
    with context:
        result: Any = context.source
        names = tuple(result.column_names)
        if names:
            _check_header(query, names, [column_type.name for column_type in result.column_types])

        def blocks() -> Iterator[SourceBlock]:
            try:
                for block in context:
                    if not names:
                        raise DponeError("mssql_native.source_snapshot_drift", "rows without a result header")
                    rows = len(block[0]) if block else 0
                    if not query.provenance:
                        yield SourceBlock(columns=block, rows=rows)
                        continue
                    raw_parts = block[width]
                    decoded = {raw: raw.decode("ascii") if isinstance(raw, bytes) else raw for raw in set(raw_parts)}
                    parts = [decoded[raw] for raw in raw_parts]
                    yield SourceBlock(columns=block[:width], rows=rows, parts=parts, offsets=block[width + 1])
            except ClickHouseError as exc:
                raise source_failure(exc, "mssql_native.source_query_failed", "select") from None

        yield blocks()
