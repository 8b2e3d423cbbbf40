"""Exact read-back equality: a staged chunk's committed rows, read back, against the sealed rows that were loaded.

SQL Server and PostgreSQL verify a chunk alike: the rows loaded for an ordinal are kept in memory (only when they are
a sealed stage chunk, whose object SHA-256 and header were checked against the journal receipt before the load) until
that ordinal is verified; the stored rows are then read back, each with its position in the chunk (``ROW_COLUMN``),
and compared value for value (:func:`stored_equals_sent`). Equality has no collision to bound, and it binds the
receipt's typed sum because the rows compared with are the rows that sum was computed over. Each dialect reads back
only in forms that are provably exact for its driver (``postgres/digest.py``, ``mssql/readback.py``); a difference
never fails by itself: the typed digest computed in the target then decides (docs/transfer-verification.md).
"""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa

from airflow_provider_dpone.transfer.values.arrow_chunk import sealed_facts


def _same_values(sent: pa.ChunkedArray, stored: pa.ChunkedArray) -> bool:
    """Equal values and NULL positions; a stored value is first brought into the sent type by a safe cast only."""
    if stored.type != sent.type:
        if isinstance(stored.type, pa.ExtensionType) and not isinstance(sent.type, pa.ExtensionType):
            stored = pa.chunked_array([chunk.storage for chunk in stored.chunks], stored.type.storage_type)
        try:
            stored = stored.cast(sent.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return False
    return bool(sent.equals(stored))


def stored_equals_sent(sent: pa.Table, stored: pa.Table) -> bool:
    """Whether ``stored`` (the positions, then the planned columns, in any row order) is exactly the rows of ``sent``.

    The positions must be a permutation of ``0..rows-1``: a missing or duplicated row leaves a hole. Each stored
    column is then put in sent order and compared with Arrow's vectorised equality.
    """
    rows = sent.num_rows
    if stored.num_rows != rows or stored.num_columns != sent.num_columns + 1:
        return False
    if rows == 0:
        return True
    positions = stored.column(0)
    if positions.null_count:
        return False
    index = positions.to_numpy().astype(np.int64, copy=False)
    if int(index.min()) < 0 or int(index.max()) >= rows:
        return False
    identity = np.arange(rows, dtype=np.int64)
    if np.array_equal(index, identity):  # read back in load order (the usual case): already aligned
        return all(_same_values(column, stored.column(i + 1)) for i, column in enumerate(sent.columns))
    order = np.full(rows, -1, dtype=np.int64)
    order[index] = identity
    if int(order.min()) < 0:
        return False
    take = pa.array(order)  # aligned one column at a time: at most one extra column in memory
    return all(
        _same_values(column, stored.column(position + 1).take(take)) for position, column in enumerate(sent.columns)
    )


class LoadedChunks:
    """The sealed rows loaded per (staging table, ordinal), waiting for that ordinal's verification.

    Only a table decoded from a sealed stage object of the same ordinal is kept, with the typed sum its receipt
    records; anything else (plain rows, another ordinal) is not kept, so verification falls back to the digest.
    """

    def __init__(self) -> None:
        self._rows: dict[tuple[str, int], tuple[pa.Table, str]] = {}
        self._lock = threading.Lock()

    def keep(self, staging: str, ordinal: int, source: pa.Table, loaded: pa.Table) -> None:
        """Keep ``loaded`` (the rows as the dialect compares them) when ``source`` is the sealed chunk ``ordinal``."""
        sealed = sealed_facts(source)
        if sealed is not None and sealed[0] == ordinal:
            with self._lock:
                self._rows[(staging, ordinal)] = (loaded, sealed[2])

    def take(self, staging: str, ordinal: int) -> tuple[pa.Table, str] | None:
        """Remove and return the kept rows of one ordinal and their typed sum."""
        with self._lock:
            return self._rows.pop((staging, ordinal), None)

    def forget(self, staging: str) -> None:
        """Drop every kept chunk of one staging table (prepare starts it over; cleanup drops it)."""
        with self._lock:
            for key in [key for key in self._rows if key[0] == staging]:
                del self._rows[key]
