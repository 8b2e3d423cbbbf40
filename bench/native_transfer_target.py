"""Benchmark: the PostgreSQL transfer target vs a plain psycopg binary COPY of the same rows, in the same run.

For a narrow (5 columns) and a wide (100 columns) table it measures, on one throwaway cluster (or ``--dsn``):

* baseline: CREATE TABLE + one binary ``COPY ... FROM STDIN`` of all rows + COMMIT (no checks, no receipt);
* target: ``prepare`` + ``load_chunk`` per chunk (value checks, binary COPY, one transaction each) + ``verify_chunk``
  per chunk (the typed digest PostgreSQL computes) + ``publish`` (staging locked, every chunk's digest recomputed,
  full-refresh swap with its receipt).

It prints rows/s for each and the ratio target/baseline (total, and load alone). The source-side expected digests are
computed before timing starts: they are the source's cost, recorded in its chunk receipts.

    .venv/bin/python bench/native_transfer_target.py [--rows 1000000] [--chunk-rows 100000]
        [--verification server|readback] [--shapes narrow,wide] [--dsn DSN]

``--verification server`` (the default) hashes each staged chunk inside PostgreSQL; ``readback`` streams it to the
worker and hashes it there.

``--mssql-python`` measures, without a server (none can run here), the Python side of the SQL Server target on one
chunk of ``--rows`` rows per shape, best of ``--repeat`` runs:

* the parameterized ("SqlClient") backend's parameters: row by row (each row through ``RowConverter`` and
  ``sqlclient_row_encoder``, as before) against column by column (``loaders.sqlclient_rows``);
* the typed digest of the same rows in Python (what the read-back fallback of a server without UTF-8 collations
  costs the worker). The server's part is not measured. Its last line is one JSON object with the ratios.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package, not another install

import psycopg
import pyarrow as pa

from airflow_provider_dpone.core.identifiers import quote_postgres
from airflow_provider_dpone.core.typed_digest import MultisetDigest
from airflow_provider_dpone.transfer.ports import TargetInvocation
from airflow_provider_dpone.transfer.route.schema_admission import map_type
from airflow_provider_dpone.transfer.targets.mssql.loaders import sqlclient_rows
from airflow_provider_dpone.transfer.targets.mssql.values import sqlclient_row_encoder
from airflow_provider_dpone.transfer.targets.postgres.statements import copy_type, qualified
from airflow_provider_dpone.transfer.targets.postgres.target import (
    PostgresTransferTarget,
    postgres_connection_factory,
    postgres_copy_factory,
)
from airflow_provider_dpone.transfer.values.arrow_chunk import decode_chunk, encode_chunk, rows_table, table_rows
from airflow_provider_dpone.transfer.values.target import PublicationMode, TargetColumn, TargetPlan, TargetTable
from airflow_provider_dpone.transfer.values.target_receipts import ChunkEvidence
from airflow_provider_dpone.transfer.values.target_values import RowConverter

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
TEMPLATES = 997  # rows are built from a cycle of prepared templates: generation stays cheap next to the load


def narrow_columns() -> tuple[TargetColumn, ...]:
    return (
        TargetColumn(name="id", source_type="UInt64"),
        TargetColumn(name="k", source_type="Int32"),
        TargetColumn(name="amount", source_type="Nullable(Decimal(18, 4))"),
        TargetColumn(name="s", source_type="String"),
        TargetColumn(name="ts", source_type="DateTime64(3, 'UTC')"),
    )


def wide_columns() -> tuple[TargetColumn, ...]:
    kinds = (
        ["Int64"] * 39 + ["Nullable(Decimal(18, 4))"] * 20 + ["String"] * 20 + ["DateTime64(3, 'UTC')"] * 10
        + ["Nullable(Int32)"] * 10
    )  # fmt: skip
    others = (TargetColumn(name=f"c{i:03d}", source_type=kind) for i, kind in enumerate(kinds))
    return (TargetColumn(name="id", source_type="UInt64"), *others)


def _value(source_type: str, j: int) -> object:
    if source_type.startswith("Nullable") and j % 10 == 0:
        return None
    if "Decimal" in source_type:
        return Decimal(j * 7919 % 10**8).scaleb(-4)
    if "String" in source_type:
        return (f"value-{j:08d}" * (1 + j % 3)).encode()
    if "DateTime64" in source_type:
        return T0 + dt.timedelta(milliseconds=j * 1013)
    return (j * 2654435761) % 2**31 * (1 if j % 2 else -1)


def rows(columns: tuple[TargetColumn, ...], start: int, count: int) -> Iterator[tuple[object, ...]]:
    templates = [tuple(_value(c.source_type, t * 31 + k) for k, c in enumerate(columns[1:])) for t in range(TEMPLATES)]
    for i in range(start, start + count):
        yield (i, *templates[i % TEMPLATES])


def expectations(plan: TargetPlan, total: int, chunk_rows: int) -> list[ChunkEvidence]:
    out = []
    for ordinal, start in enumerate(range(0, total, chunk_rows)):
        acc = MultisetDigest(plan.typed_columns)
        acc.add_rows(rows(plan.columns, start, min(chunk_rows, total - start)))
        out.append(ChunkEvidence(ordinal=ordinal, rows=acc.rows, typed_sum=f"{acc.total:064x}"))
    return out


def settle(dsn: str) -> None:
    """Flush dirty buffers before a timed phase, so one phase does not pay for the previous one's checkpoint."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        pass


def baseline(dsn: str, plan: TargetPlan, total: int) -> float:
    table = qualified(plan.target_schema, "baseline_" + plan.target_table)
    definitions = ", ".join(f"{quote_postgres(c.name)} {c.column_type.postgres}" for c in plan.columns)
    started = time.perf_counter()
    with psycopg.connect(dsn) as conn, conn.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {table} ({definitions})")
        with cursor.copy(f"COPY {table} FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([copy_type(c.column_type) for c in plan.columns])
            for row in rows(plan.columns, 0, total):
                copy.write_row(row)
        conn.commit()
    return time.perf_counter() - started


def target_run(
    dsn: str, plan: TargetPlan, total: int, chunk_rows: int, expected: list[ChunkEvidence], verification: str
) -> dict[str, float]:
    table = TargetTable(target_schema=plan.target_schema, table=plan.target_table)
    target = PostgresTransferTarget(
        postgres_connection_factory(dsn), postgres_copy_factory(dsn), table, verification=verification
    )  # type: ignore[arg-type]
    columns = tuple(map_type(c.name, c.source_type, implicit_utc=True) for c in plan.columns)
    invocation = TargetInvocation("0" * 32, plan.invocation_id, columns, None)
    phases = {"prepare": 0.0, "load": 0.0, "verify": 0.0, "publish": 0.0}
    started = time.perf_counter()
    target.prepare(invocation)
    phases["prepare"] = time.perf_counter() - started
    for chunk in expected:
        start = chunk.ordinal * chunk_rows
        t = time.perf_counter()
        batch = rows_table(rows(plan.columns, start, min(chunk_rows, total - start)), columns)
        target.load_chunk(invocation, chunk.ordinal, batch)
        phases["load"] += time.perf_counter() - t
        t = time.perf_counter()
        assert target.verify_chunk(invocation, chunk) == chunk
        phases["verify"] += time.perf_counter() - t
    t = time.perf_counter()
    receipt = target.publish(invocation, expected)
    phases["publish"] = time.perf_counter() - t
    assert receipt.rows == total
    phases["total"] = time.perf_counter() - started
    return phases


def shape_plans(shapes: list[str], tag: str) -> Iterator[tuple[str, TargetPlan]]:
    """The full-refresh plan of each requested shape (narrow, wide) into schema ``bench``."""
    for name, columns in (("narrow", narrow_columns()), ("wide", wide_columns())):
        if name in shapes:
            plan = TargetPlan(
                invocation_id=f"bench-{name}-{tag}",
                target_schema="bench",
                target_table=name,
                columns=columns,
                mode=PublicationMode.FULL_REFRESH,
            )
            yield name, plan


def run(dsn: str, total: int, chunk_rows: int, verification: str, shapes: list[str]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS bench CASCADE")
        conn.execute("CREATE SCHEMA bench")
    for name, plan in shape_plans(shapes, f"{total}-{verification}"):
        columns = plan.columns
        expected = expectations(plan, total, chunk_rows)
        settle(dsn)
        base = baseline(dsn, plan, total)
        settle(dsn)
        ours = target_run(dsn, plan, total, chunk_rows, expected, verification)
        print(
            f"{name:6} cols={len(columns):3} rows={total:,} verify={verification} | baseline COPY {base:7.2f}s {total / base:10,.0f} rows/s"
            f" | target {ours['total']:7.2f}s {total / ours['total']:10,.0f} rows/s"
            f" (load {ours['load']:.2f}s, verify {ours['verify']:.2f}s, publish {ours['publish']:.2f}s)"
            f" | ratio total {ours['total'] / base:.2f}x, load-only {ours['load'] / base:.2f}x",
            flush=True,
        )


def _best(repeat: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def _sealed(plan: TargetPlan, total: int) -> pa.Table:
    """One chunk of ``total`` rows as the route loads it: decoded from a sealed stage object."""
    native = [map_type(c.name, c.source_type, implicit_utc=True) for c in plan.columns]
    digest = MultisetDigest(plan.typed_columns)
    digest.add_rows(rows(plan.columns, 0, total))
    data = encode_chunk(rows_table(rows(plan.columns, 0, total), native), native, plan.invocation_id, 0, digest.total)
    return decode_chunk(data, native).table


def mssql_shape(plan: TargetPlan, sent: pa.Table, repeat: int) -> tuple[float, float, float]:
    """Seconds for: parameters row by row, parameters column by column, and the typed digest of the same rows in
    Python."""
    types = [c.column_type for c in plan.columns]
    logicals = [c.column_type.logical for c in plan.columns]

    def row_wise() -> object:
        convert = RowConverter(plan.column_names, types, text_allows_nul=False)
        encode = sqlclient_row_encoder(types)
        return [encode(convert(row, i)) for i, row in enumerate(table_rows(sent, logicals))]

    def column_wise() -> object:
        return list(sqlclient_rows(plan, sent))

    def python_digest() -> object:
        observed = MultisetDigest(plan.typed_columns)
        observed.add_rows(table_rows(sent, logicals))
        return observed.total

    return tuple(_best(repeat, work) for work in (row_wise, column_wise, python_digest))  # type: ignore[return-value]


def mssql_python(total: int, shapes: list[str], repeat: int) -> dict[str, float]:
    """The Python side of the SQL Server target on one chunk per shape (see the module docstring)."""
    ratios: dict[str, float] = {}
    for name, plan in shape_plans(shapes, f"{total}-mssql"):
        old, new, hashed = mssql_shape(plan, _sealed(plan, total), repeat)
        print(
            f"{name:6} cols={len(plan.columns):3} rows={total:,} | parameters row-wise {old:6.3f}s"
            f" column-wise {new:6.3f}s ({old / new:.2f}x faster) | typed digest in Python {hashed:6.3f}s",
            flush=True,
        )
        ratios[f"{name}_parameters_row_over_column"] = round(old / new, 3)
        ratios[f"{name}_python_digest_s_per_100k"] = round(hashed * 100_000 / total, 4)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-rows", type=int, default=100_000)
    parser.add_argument("--verification", choices=["server", "readback"], default="server")
    parser.add_argument("--shapes", default="narrow,wide", help="comma-separated: narrow, wide")
    parser.add_argument("--dsn", help="an existing PostgreSQL (default: a throwaway cluster started here)")
    parser.add_argument("--mssql-python", action="store_true", help="SQL Server's Python side only (no server)")
    parser.add_argument("--repeat", type=int, default=3, help="--mssql-python: runs per measure, best taken")
    args = parser.parse_args()
    if args.mssql_python:
        print(json.dumps(mssql_python(args.rows, args.shapes.split(","), args.repeat), sort_keys=True))
        return
    if args.dsn:
        run(args.dsn, args.rows, args.chunk_rows, args.verification, args.shapes.split(","))
        return
    from tests.support.fixtures.postgres import throwaway_cluster

    with throwaway_cluster() as server:
        run(server.dsn, args.rows, args.chunk_rows, args.verification, args.shapes.split(","))


if __name__ == "__main__":
    main()
