"""The two import backends of a chunk: BCP (pymssql ``bulk_copy``) and parameterized batches ("SqlClient").

Both take the chunk's Arrow table as the route hands it over and work column by column: BCP checks and encodes it
vectorised (:mod:`arrow_bcp`); the parameterized backend converts each column to Python values once
(``to_pylist``), checks and encodes it with the per-type converters of :mod:`values`, and zips the columns into
parameter rows. Every staged row carries its position in the chunk (``tsql.ROW``), which read-back verification
aligns by.

Both write into the invocation's staging table inside the chunk's one transaction (pymssql keeps a transaction open
while autocommit is off; :mod:`checks` refuses a server where BCP would not join it), so a chunk is either fully
staged at COMMIT or not at all. BCP sends each run as one batch: a smaller ``batch_size`` would only add round trips,
since nothing is durable before the chunk commits.

Values BCP would alter never go through BCP (decided per value, vectorised: ``arrow_bcp.bcp_altered``):

* empty values: pymssql binds a text or binary value with ``length[0] = len(value)`` and FreeTDS's
  ``_bcp_get_col_data`` reads a zero bind length as NULL (``if (bindcol->column_bindlen == 0) data_is_null = 1;``,
  and a zero prefix or terminator length is NULL as well), so db-lib has no spelling for a zero-length non-NULL value;
* text FreeTDS trims: right after converting a value, ``_bcp_get_col_data`` calls ``rtrim_bcpcol``, which drops the
  trailing spaces of a character value (never its first character) and turns a lone NUL into an empty value
  (FreeTDS 1.5, linked by pymssql 2.4.6; quoted in ``tests/support/fakes/mssql_bcp.py``). Embedded NULs and binary values,
  trailing zero bytes included, are not touched.

Such a row is sent as a parameterized INSERT (``N''`` / ``0x`` literals; text holding NUL as UTF-16LE bytes, which a
C-string statement can carry), in the same transaction: the BCP run stops when ``rows_per_statement`` such rows are
waiting, they are inserted, and a new BCP run continues with the rest. Staging is a multiset, so the interleaving
changes nothing that verification compares.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final

import pyarrow as pa

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer_options import ImportBackend
from airflow_provider_dpone.core.typed_digest import LogicalType
from airflow_provider_dpone.transfer.targets.mssql import tsql
from airflow_provider_dpone.transfer.targets.mssql.arrow_bcp import (
    SLICE_ROWS,
    bcp_rows,
    canonical_row,
    parameter_columns,
)
from airflow_provider_dpone.transfer.targets.mssql.driver import DbConnection, DbCursor
from airflow_provider_dpone.transfer.targets.mssql.values import sqlclient_columns, sqlclient_row_encoder
from airflow_provider_dpone.transfer.values.arrow_chunk import table_columns
from airflow_provider_dpone.transfer.values.target import TargetPlan
from airflow_provider_dpone.transfer.values.target_values import RowConverter

MAX_VALUES_ROWS: Final[int] = 1000  # SQL Server's limit for one VALUES list
MAX_VALUES_PER_STATEMENT: Final[int] = 4000
BCP_SINGLE_BATCH: Final[int] = 2**31 - 1


def _logical(plan: TargetPlan) -> list[LogicalType]:
    return [c.column_type.logical for c in plan.columns]


def sqlclient_rows_per_statement(plan: TargetPlan) -> int:
    """Rows per INSERT: bounded by VALUES' row limit and by a statement size that stays cheap to compile."""
    return max(1, min(MAX_VALUES_ROWS, MAX_VALUES_PER_STATEMENT // (len(plan.columns) + 2)))


def sqlclient_rows(plan: TargetPlan, table: pa.Table) -> Iterator[tuple[int, Sequence[object]]]:
    """Each row's position and parameters for the parameterized backend, one slice of columns at a time (Python values
    exist for one slice only): checked and encoded vectorised (``arrow_bcp.parameter_columns``); a slice that fails a
    check goes through the per-value converters column by column, which raise the row-naming error."""
    if table.num_columns != len(plan.columns):
        raise DponeError("native_transfer.target_value_invalid", f"{table.num_columns} columns for {len(plan.columns)}")
    types, logicals = [c.column_type for c in plan.columns], _logical(plan)
    convert = RowConverter(plan.column_names, types, text_allows_nul=True)
    first = 0
    for batch in table.to_batches(max_chunksize=SLICE_ROWS):
        try:
            encoded = parameter_columns(batch, plan)
        except DponeError:  # the row-by-row converters name the row and column that failed, as they always did
            encoded = sqlclient_columns(types, convert.columns(table_columns(batch, logicals), first))
        yield from enumerate(zip(*encoded, strict=True), start=first)
        first += batch.num_rows


class _Router:
    """Rows of one chunk, checked and encoded lazily, each routed to BCP or to a parameterized INSERT.

    ``bcp_run`` yields BCP rows until ``rows_per_statement`` parameter rows are waiting in ``pending`` or the input
    ends (``done``). A NUL inside a text literal would cut pymssql's C-string statement, so a parameter row's text
    that holds NUL travels as UTF-16LE bytes (``values.text_or_utf16``).
    """

    def __init__(self, plan: TargetPlan, ordinal: int, rows: pa.Table, backend: ImportBackend):
        columns = [c.column_type for c in plan.columns]
        self._param_encode = sqlclient_row_encoder(columns)
        self._plan = plan
        self._ordinal = ordinal
        bcp = backend is ImportBackend.BCP
        self._rows = self._from_arrow(rows) if bcp else self._from_columns(rows)
        self.per_statement = sqlclient_rows_per_statement(plan)
        self._full_statement: str | None = None
        self.pending: list[object] = []
        self.pending_rows = 0
        self.sent = 0
        self.done = False

    def _from_arrow(self, table: pa.Table) -> Iterator[tuple[bool, int, Sequence[object]]]:
        for index, (values, empty) in enumerate(bcp_rows(table, self._plan)):
            if empty:
                yield False, index, self._param_encode(canonical_row(table, self._plan, index))
            else:
                yield True, index, values

    def _from_columns(self, table: pa.Table) -> Iterator[tuple[bool, int, Sequence[object]]]:
        for position, values in sqlclient_rows(self._plan, table):
            yield False, position, values

    def _next_bcp_row(self) -> tuple[object, ...] | None:
        for is_bcp, position, values in self._rows:
            if is_bcp:
                self.sent += 1
                return (self._ordinal, position, *values)
            self.pending.extend((self._ordinal, position, *values))
            self.pending_rows += 1
            if self.pending_rows == self.per_statement:
                return None
        self.done = True
        return None

    def bcp_run(self) -> Iterator[tuple[object, ...]] | None:
        """The next run of BCP rows, or None when there is none before the pending INSERT is due."""
        first = self._next_bcp_row()
        if first is None:
            return None

        def run() -> Iterator[tuple[object, ...]]:
            yield first
            while (row := self._next_bcp_row()) is not None:
                yield row

        return run()

    def flush(self, cursor: DbCursor) -> None:
        """INSERT the waiting parameter rows (one statement: at most ``per_statement`` rows wait)."""
        if not self.pending_rows:
            return
        if self.pending_rows == self.per_statement:
            self._full_statement = self._full_statement or tsql.insert_values(self._plan, self.per_statement)
            statement = self._full_statement
        else:
            statement = tsql.insert_values(self._plan, self.pending_rows)
        cursor.execute(statement, tuple(self.pending))
        self.sent += self.pending_rows
        self.pending, self.pending_rows = [], 0


def load_chunk(
    conn: DbConnection,
    cursor: DbCursor,
    plan: TargetPlan,
    backend: ImportBackend,
    ordinal: int,
    rows: pa.Table,
) -> int:
    """Stage one chunk with ``backend`` (empty values always as parameters); returns the rows sent."""
    router = _Router(plan, ordinal, rows, backend)
    while not router.done:
        run = router.bcp_run()
        if run is not None:
            conn.bulk_copy(tsql.staging(plan), run, batch_size=BCP_SINGLE_BATCH, tablock=False)
        router.flush(cursor)
    return router.sent
