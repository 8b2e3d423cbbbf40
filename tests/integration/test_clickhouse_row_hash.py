"""Golden test: the row SHA-256 ClickHouse computes in the data SELECT equals the Python typed digest, per row.

Every admitted type at its minimum and maximum, zeros, empties and NULLs (``bounds``), strings of every byte value
and over 8,000 bytes (``large``), multi-byte text, and 100 columns cycling through the types (``wide``): each row's
hash from the engine (``adapters/clickhouse/sql_row_hash.py``) must be byte-identical to
``contracts.typed_digest.row_hash`` of the same row's values as they are staged (Arrow, in the stage schema).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_provider_dpone.adapters.clickhouse.sql_row_hash import ROW_HASH_COLUMN, row_hash_sql
from airflow_provider_dpone.contracts.identifiers import quote_clickhouse
from airflow_provider_dpone.contracts.native_arrow_chunk import conform, table_rows
from airflow_provider_dpone.contracts.typed_digest import row_hash
from airflow_provider_dpone.protocol.native_transfer.schema_admission import map_type
from tests.integration.native_chdb import admin, db
from tests.integration.native_route_corpus import CORPUS, CorpusTable

__all__ = ["admin", "db"]

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.mark.parametrize("table", CORPUS, ids=[table.name for table in CORPUS])
def test_engine_row_hash_equals_the_typed_digest(admin, db: str, table: CorpusTable) -> None:
    relation = table.create(admin, db)
    described = admin.query(
        "SELECT name, type FROM system.columns WHERE database = {d:String} AND table = {t:String} ORDER BY position",
        parameters={"d": db, "t": relation.table},
    ).result_rows
    columns = tuple(map_type(name, type_text, implicit_utc=True) for name, type_text in described)
    projection = ", ".join(quote_clickhouse(column.name) for column in columns)
    query = f"SELECT {projection}, {row_hash_sql(columns)} FROM {quote_clickhouse(db)}.{quote_clickhouse(table.name)}"
    checked = 0
    with admin.query_arrow_stream(query, use_strings=False) as stream:
        for batch in stream:
            assert batch.schema.names[-1] == ROW_HASH_COLUMN
            staged = conform(pa.Table.from_batches([batch]).drop_columns([ROW_HASH_COLUMN]), columns)
            rows = table_rows(staged, [column.logical for column in columns])
            typed = [column.typed for column in columns]
            for index, (row, engine_hash) in enumerate(
                zip(rows, batch.column(ROW_HASH_COLUMN).to_pylist(), strict=True)
            ):
                assert engine_hash == row_hash(typed, row).to_bytes(32, "big"), (table.name, index)
                checked += 1
    assert checked == table.rows
