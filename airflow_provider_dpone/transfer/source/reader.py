"""The one data SELECT, streamed in bounded column blocks with hidden provenance split off.

Rows arrive as Arrow (``ArrowStream``), strings as bytes (``use_strings=False``): decoding to text on the way in would
replace invalid UTF-8 and change the typed multiset. The SELECT carries each row's typed SHA-256
(``sql_row_hash.py``), so no value is encoded in Python. The result schema is checked against the admitted
projection before the first row is used, and each block is cast into the stage schema, refusing any lossy cast (an
empty result may come without a schema); ``_part``/``_part_offset`` are removed from the block and handed over
separately, so they can never reach a stage object or the target. Leaving the context closes the stream (also on
error or cancellation); leaving it before the stream reached its end also cancels the query on the server
(``cancel.py``): its connection is closed without reading the rest, under ``cancel_on_close`` settings, and a
``KILL QUERY`` names its query id.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError
from urllib3.exceptions import HTTPError

from airflow_provider_dpone.core.clickhouse.row_hash import ROW_HASH_COLUMN
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.ports import SourceBlock
from airflow_provider_dpone.transfer.source.cancel import kill_query
from airflow_provider_dpone.transfer.source.metadata import on_session, source_failure
from airflow_provider_dpone.transfer.source.sql import render_select
from airflow_provider_dpone.transfer.values.arrow_chunk import conform
from airflow_provider_dpone.transfer.values.query import PROVENANCE_COLUMNS, SnapshotQuery

BROKEN_STREAM: tuple[type[Exception], ...] = (HTTPError, OSError)
"""How a body that stops before its end reaches the reader: a server that fails after its headers left ends the
body with its ``__exception__`` block and closes the connection without the last chunk
(``WriteBufferFromHTTP1ServerResponse::cancelWithException``, ClickHouse 25.11+), which urllib3 reports as a
``ProtocolError`` (an ``IncompleteRead``); clickhouse-connect's Arrow stream does not turn it into a server error. A
body cut inside an Arrow message is ``ArrowInvalid`` once a schema was read."""


def broken_stream(exc: Exception) -> DponeError:
    """The coded failure of a SELECT whose stream broke after it started: never the end of the result."""
    return DponeError("native_transfer.source_query_failed", f"select: the stream broke ({type(exc).__name__})")


@contextmanager
def stream_blocks(
    client: Client, query: SnapshotQuery, cancel_on_close: Mapping[str, str]
) -> Iterator[Iterator[SourceBlock]]:
    """The SELECT's blocks; ``cancel_on_close``: the transport's settings that cancel it when the client hangs up.

    Any exit before the stream reached its end (an error here or in the caller, the caller leaving early, the
    generator closed) sends one ``KILL QUERY`` for the query id after the connection is closed.
    """
    text, parameters = render_select(query)
    settings: dict[str, str | int] = {**query.settings_dict(), **cancel_on_close, "max_block_size": query.block_rows}
    settings["query_id"] = query.vendor_query_id
    expected = [column.name for column in query.projection] + [ROW_HASH_COLUMN]
    if query.provenance:
        expected += list(PROVENANCE_COLUMNS)
    end = _End()
    try:
        try:
            context = on_session(
                lambda: client.query_arrow_stream(text, parameters=parameters, settings=settings, use_strings=False)
            )
        except ClickHouseError as exc:
            raise source_failure(exc, "native_transfer.source_query_failed", "select") from None
        except BROKEN_STREAM as exc:
            raise broken_stream(exc) from None
        except pa.ArrowInvalid:
            context = None  # an empty result may come without a schema message
        if context is None:
            end.reached = True
            yield iter(())
            return
        with context:
            reader: Any = context.gen
            if list(reader.schema.names) != expected:
                raise DponeError(
                    "native_transfer.source_snapshot_drift", "result header differs from the admitted projection"
                )
            yield _blocks(context, query, end)
    finally:
        if not end.reached:
            kill_query(client, query.vendor_query_id)


class _End:
    """Whether the stream was read to its end."""

    reached = False


def _blocks(context: Any, query: SnapshotQuery, end: _End) -> Iterator[SourceBlock]:
    width = len(query.projection)
    for batch in _read(context):
        rows = batch.num_rows
        if not rows:
            continue
        columns = conform(pa.Table.from_batches([batch.select(range(width))]), query.projection)
        hashes = batch.column(width)
        if not query.provenance:
            yield SourceBlock(columns=columns, row_hashes=hashes, rows=rows)
            continue
        yield SourceBlock(
            columns=columns,
            row_hashes=hashes,
            rows=rows,
            parts=_part_names(batch.column(width + 1)),
            offsets=batch.column(width + 2).to_numpy(zero_copy_only=False),
        )
    end.reached = True


def _read(context: Any) -> Iterator[pa.RecordBatch]:
    """The stream's record batches; a server error or a body cut short is a coded failure, never the end."""
    try:
        yield from context
    except ClickHouseError as exc:
        raise source_failure(exc, "native_transfer.source_query_failed", "select") from None
    except (*BROKEN_STREAM, pa.ArrowInvalid) as exc:
        raise broken_stream(exc) from None


def _part_names(column: pa.Array) -> list[str]:
    """Each row's ``_part`` as text, decoded once per distinct part (a block usually comes from one part)."""
    encoded = column.dictionary_encode()
    names = [raw.decode("ascii") if isinstance(raw, bytes) else raw for raw in encoded.dictionary.to_pylist()]
    if len(names) == 1:
        return names * len(column)
    labels: list[str] = np.array(names, dtype=object)[encoded.indices.to_numpy()].tolist()
    return labels
