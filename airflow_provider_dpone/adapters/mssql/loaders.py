"""The two import backends of a chunk: BCP (pymssql ``bulk_copy``) and parameterized batches ("SqlClient").

Both write into the invocation's staging table inside the chunk's one transaction (pymssql keeps a transaction open
while autocommit is off), so a chunk is either fully staged at COMMIT or not at all. BCP sends the whole chunk as one
batch: a smaller ``batch_size`` would only add round trips, since nothing is durable before the chunk commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Final

from airflow_provider_dpone.adapters.mssql import tsql
from airflow_provider_dpone.adapters.mssql.driver import DbConnection, DbCursor
from airflow_provider_dpone.adapters.mssql.values import bcp_row_encoder, sqlclient_row_encoder
from airflow_provider_dpone.contracts.native_transfer_options import ImportBackend
from airflow_provider_dpone.contracts.transfer_target import TargetPlan
from airflow_provider_dpone.contracts.transfer_target_values import RowConverter

MAX_VALUES_ROWS: Final[int] = 1000  # SQL Server's limit for one VALUES list
MAX_VALUES_PER_STATEMENT: Final[int] = 4000
BCP_SINGLE_BATCH: Final[int] = 2**31 - 1


def sqlclient_rows_per_statement(plan: TargetPlan) -> int:
    """Rows per INSERT: bounded by VALUES' row limit and by a statement size that stays cheap to compile."""
    return max(1, min(MAX_VALUES_ROWS, MAX_VALUES_PER_STATEMENT // (len(plan.columns) + 1)))


class _Counted:
    """Rows of one chunk, checked and encoded lazily, counted as they are sent."""

    def __init__(self, plan: TargetPlan, ordinal: int, rows: Iterable[Sequence[object]], backend: ImportBackend):
        columns = [c.column_type for c in plan.columns]
        # A NUL inside a text literal would cut pymssql's C-string statement: only BCP binds text with a length.
        nul_ok = backend is ImportBackend.BCP
        self._convert = RowConverter(plan.column_names, columns, text_allows_nul=nul_ok)
        self._encode = bcp_row_encoder(columns) if backend is ImportBackend.BCP else sqlclient_row_encoder(columns)
        self._ordinal = ordinal
        self._rows = rows
        self.sent = 0

    def __iter__(self) -> Iterator[tuple[object, ...]]:
        for index, row in enumerate(self._rows):
            encoded = (self._ordinal, *self._encode(self._convert(row, index)))
            self.sent += 1
            yield encoded


def load_bcp(conn: DbConnection, plan: TargetPlan, ordinal: int, rows: Iterable[Sequence[object]]) -> int:
    counted = _Counted(plan, ordinal, rows, ImportBackend.BCP)
    conn.bulk_copy(tsql.staging(plan), counted, batch_size=BCP_SINGLE_BATCH, tablock=False)
    return counted.sent


def load_sqlclient(cursor: DbCursor, plan: TargetPlan, ordinal: int, rows: Iterable[Sequence[object]]) -> int:
    counted = _Counted(plan, ordinal, rows, ImportBackend.SQLCLIENT)
    per_statement = sqlclient_rows_per_statement(plan)
    full_statement = tsql.insert_values(plan, per_statement)
    batch: list[object] = []
    in_batch = 0
    for encoded in counted:
        batch.extend(encoded)
        in_batch += 1
        if in_batch == per_statement:
            cursor.execute(full_statement, tuple(batch))
            batch, in_batch = [], 0
    if in_batch:
        cursor.execute(tsql.insert_values(plan, in_batch), tuple(batch))
    return counted.sent
