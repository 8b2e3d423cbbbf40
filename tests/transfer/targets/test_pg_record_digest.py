"""``pg-record-sha256.v1`` is exact: ClickHouse and PostgreSQL render every admitted value alike, one-to-one.

Property tests against both real engines (chdb for ClickHouse, a throwaway PostgreSQL server): for each admitted type,
Hypothesis draws values (with NULL where the type is nullable, and the edges: empty, trailing spaces, characters
``record_out`` quotes, pre-1970 instants, every timestamp precision, the decimal scale's last digit), ClickHouse
renders each row with the product's SELECT expression (``transfer/source/pg_record.py``) from the values it stores,
and PostgreSQL renders the same values, stored in the target's column type, with the product's digest expression
(``transfer/targets/postgres/digest.py``) under the target's pinned session. Asserted per row: the same text and the
same SHA-256 on both engines; and per engine: distinct values give distinct texts (the rendering is one-to-one).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

import chdb.session
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.core.manifest.transfer import StringMapping
from airflow_provider_dpone.transfer.route.schema_admission import map_type
from airflow_provider_dpone.transfer.source.pg_record import pg_record_hash, pg_record_text
from airflow_provider_dpone.transfer.targets.postgres.digest import record_hash, record_text
from airflow_provider_dpone.transfer.targets.postgres.session import PIN
from airflow_provider_dpone.transfer.values.target import TargetColumn
from airflow_provider_dpone.transfer.values.target_types import parse_column_type
from tests.support.fixtures.postgres import PostgresServer, require_postgres_bin, throwaway_cluster

pytestmark = pytest.mark.contract

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
# record_out quotes a value holding any of these; ClickHouse must never leave one bare
SPECIAL = "\"\\(), \t\n\r\x0b\x0c'é日😀x0"


@pytest.fixture(scope="module")
def pg() -> Iterator[psycopg.Connection[Any]]:
    require_postgres_bin()
    server: PostgresServer
    # no prepared statements: every call creates its own table under a new name
    with throwaway_cluster() as server, psycopg.connect(server.dsn, autocommit=True, prepare_threshold=None) as conn:
        yield conn


@pytest.fixture(scope="module")
def ch() -> Iterator[chdb.session.Session]:
    session = chdb.session.Session()
    yield session
    session.close()


def _decimals(precision: int, scale: int) -> st.SearchStrategy[Decimal]:
    bound = 10**precision - 1
    edges = st.sampled_from([e for e in (0, 1, -1, bound, -bound, 10**scale, -(10**scale)) if abs(e) <= bound])
    return st.one_of(edges, st.integers(-bound, bound)).map(lambda unscaled: Decimal(f"{unscaled}E-{scale}"))


def _instants(scale: int, low: dt.datetime, high: dt.datetime) -> st.SearchStrategy[dt.datetime]:
    step = 10 ** (6 - scale)
    lo, hi = (int((t - EPOCH) / dt.timedelta(microseconds=1)) // step for t in (low, high))
    edges = st.sampled_from([e for e in (0, -1, 1, lo, hi) if lo <= e <= hi])
    return st.one_of(edges, st.integers(lo, hi)).map(lambda ticks: EPOCH + dt.timedelta(microseconds=ticks * step))


def _text() -> st.SearchStrategy[str]:
    alphabet = st.one_of(st.sampled_from(SPECIAL), st.characters(exclude_categories=("Cs",), exclude_characters="\0"))
    edges = st.sampled_from(["", " ", "a ", " a", '""', "\\", "NULL", "()", ","])
    return st.one_of(edges, st.text(alphabet, max_size=12))


DATETIME64_LOW, DATETIME64_HIGH = dt.datetime(1900, 1, 1, tzinfo=UTC), dt.datetime(2262, 4, 11, tzinfo=UTC)
# (ClickHouse type, string mapping, strategy of present values)
CASES: list[tuple[str, StringMapping, st.SearchStrategy[Any]]] = [
    ("Int8", StringMapping.BINARY, st.integers(-(2**7), 2**7 - 1)),
    ("UInt8", StringMapping.BINARY, st.integers(0, 2**8 - 1)),
    ("Int16", StringMapping.BINARY, st.integers(-(2**15), 2**15 - 1)),
    ("UInt16", StringMapping.BINARY, st.integers(0, 2**16 - 1)),
    ("Int32", StringMapping.BINARY, st.integers(-(2**31), 2**31 - 1)),
    ("UInt32", StringMapping.BINARY, st.integers(0, 2**32 - 1)),
    ("Int64", StringMapping.BINARY, st.integers(-(2**63), 2**63 - 1)),
    ("UInt64", StringMapping.BINARY, st.integers(0, 2**64 - 1)),
    ("Decimal(9, 0)", StringMapping.BINARY, _decimals(9, 0)),
    ("Decimal(18, 4)", StringMapping.BINARY, _decimals(18, 4)),
    ("Decimal(38, 10)", StringMapping.BINARY, _decimals(38, 10)),
    ("Decimal(38, 38)", StringMapping.BINARY, _decimals(38, 38)),
    ("String", StringMapping.BINARY, st.binary(max_size=12)),
    ("FixedString(3)", StringMapping.BINARY, st.binary(min_size=3, max_size=3)),
    ("String", StringMapping.TEXT, _text()),
    ("LowCardinality(String)", StringMapping.TEXT, _text()),
    ("Bool", StringMapping.BINARY, st.booleans()),
    ("Date", StringMapping.BINARY, st.dates(dt.date(1970, 1, 1), dt.date(2149, 6, 6))),
    ("Date32", StringMapping.BINARY, st.dates(dt.date(1900, 1, 1), dt.date(2299, 12, 31))),
    ("DateTime('UTC')", StringMapping.BINARY, _instants(0, EPOCH, dt.datetime(2106, 2, 7, 6, 28, 15, tzinfo=UTC))),
    *(
        (f"DateTime64({p}, 'UTC')", StringMapping.BINARY, _instants(p, DATETIME64_LOW, DATETIME64_HIGH))
        for p in range(7)
    ),
    ("UUID", StringMapping.BINARY, st.uuids()),
]


def _literal(value: Any, source_type: str) -> str:
    """A ClickHouse literal of ``value`` as ``source_type`` (bytes through ``unhex``: no escaping to get wrong)."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"unhex('{value.hex()}')"
    if isinstance(value, str):
        return f"unhex('{value.encode().hex()}')"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        micros = (value - EPOCH) // dt.timedelta(microseconds=1)
        if "DateTime64" not in source_type:
            return f"toDateTime(toInt64({micros // 10**6}), 'UTC')"
        return f"fromUnixTimestamp64Micro(toInt64({micros}), 'UTC')"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return f"'{value:f}'"
    return f"'{value}'"  # Decimal, date, UUID: their text, cast by the insert


def _both(
    ch: chdb.session.Session, pg: psycopg.Connection[Any], source_type: str, mapping: StringMapping, rows: list[Any]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Per row ``(text, sha256 hex)``, rendered by ClickHouse and by PostgreSQL from the values each stores."""
    column_type = parse_column_type(source_type, mapping)
    native = map_type("v", source_type, implicit_utc=False)
    table = f"t_{uuid.uuid4().hex}"
    ch.query(f"CREATE TABLE {table} (k UInt32, v {source_type}) ENGINE = Memory")
    values = ", ".join(f"({k}, {_literal(value, source_type)})" for k, value in enumerate(rows))
    ch.query(f"INSERT INTO {table} VALUES {values}")
    found = ch.query(
        f"SELECT {pg_record_text([native])}, lower(hex({pg_record_hash([native])})) FROM {table} ORDER BY k", "TSVRaw"
    ).bytes()
    ch.query(f"DROP TABLE {table}")
    ch_rows = [tuple(line.split(b"\t")) for line in found.split(b"\n") if line]
    pg_type = column_type.postgres
    target = [TargetColumn(name="v", source_type=source_type, string_mapping=mapping)]
    with pg.transaction():
        pg.execute(PIN)
        pg.execute(f"CREATE TEMP TABLE {table} (k integer, v {pg_type}) ON COMMIT DROP")
        with pg.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {table} VALUES (%s, %s)", list(enumerate(rows)))
        pg_rows = pg.execute(
            f"SELECT {record_text(target)}, encode({record_hash(target)}, 'hex') FROM {table} ORDER BY k"
        )
        rendered = [(str(text), str(digest)) for text, digest in pg_rows.fetchall()]
    # ClickHouse's TSVRaw gives the bytes as they are (a text value never holds a tab or newline unquoted: bytea hex)
    return [(text.decode(), digest.decode()) for text, digest in ch_rows], rendered


def _present_or_null(strategy: st.SearchStrategy[Any], nullable: bool) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy) if nullable else strategy


def _check(
    ch: chdb.session.Session, pg: psycopg.Connection[Any], source_type: str, mapping: StringMapping, rows: list[Any]
) -> None:
    from_ch, from_pg = _both(ch, pg, source_type, mapping, rows)
    assert len(from_ch) == len(rows) == len(from_pg)
    for value, ch_row, pg_row in zip(rows, from_ch, from_pg, strict=True):
        assert ch_row == pg_row, (source_type, value)
        assert hashlib.sha256(pg_row[0].encode()).hexdigest() == pg_row[1]
    texts: dict[str, Any] = {}
    for value, (text, _) in zip(rows, from_pg, strict=True):
        assert texts.setdefault(text, value) == value, f"{source_type}: {value!r} and {texts[text]!r} render as {text}"


@pytest.mark.parametrize(("source_type", "mapping", "values"), CASES, ids=[f"{c[0]}-{c[1].value}" for c in CASES])
def test_pg_record_rendering_is_exact_and_one_to_one(
    ch: chdb.session.Session,
    pg: psycopg.Connection[Any],
    source_type: str,
    mapping: StringMapping,
    values: st.SearchStrategy[Any],
) -> None:
    nullable = (
        "LowCardinality(Nullable(String))" if source_type.startswith("LowCardinality") else f"Nullable({source_type})"
    )

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(
        plain=st.lists(values, min_size=1, max_size=12),
        with_null=st.lists(_present_or_null(values, True), min_size=1, max_size=12),
    )
    def check(plain: list[Any], with_null: list[Any]) -> None:
        _check(ch, pg, source_type, mapping, plain)
        _check(ch, pg, nullable, mapping, with_null)

    check()


ROW_TYPES: Sequence[tuple[str, StringMapping]] = (
    ("Nullable(String)", StringMapping.TEXT),
    ("Nullable(String)", StringMapping.BINARY),
    ("Nullable(Decimal(18, 4))", StringMapping.BINARY),
    ("Nullable(DateTime64(3, 'UTC'))", StringMapping.BINARY),
)


def test_pg_record_rows_of_several_columns_are_exact(ch: chdb.session.Session, pg: psycopg.Connection[Any]) -> None:
    """Fields shift between columns (a NULL beside an empty value, a quote beside a comma): the texts still differ."""
    columns = [TargetColumn(name=f"c{i}", source_type=t, string_mapping=m) for i, (t, m) in enumerate(ROW_TYPES)]
    natives = [map_type(c.name, c.source_type, implicit_utc=False) for c in columns]
    rows = [
        ("", None, Decimal("0.0000"), None),
        (None, b"", Decimal("0.0000"), None),
        (",", b",", None, dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)),
        ('",', None, Decimal("-0.0001"), EPOCH),
        (None, None, None, None),
        ("a,b", b"", None, None),
        ("a", b"b", None, None),
    ]
    ch.query("DROP TABLE IF EXISTS r")
    ch.query(
        f"CREATE TABLE r (k UInt32, {', '.join(f'c{i} {t}' for i, (t, _) in enumerate(ROW_TYPES))}) ENGINE = Memory"
    )
    literals = ", ".join(
        "(" + ", ".join([str(k), *(_literal(v, t) for v, (t, _) in zip(row, ROW_TYPES, strict=True))]) + ")"
        for k, row in enumerate(rows)
    )
    ch.query(f"INSERT INTO r VALUES {literals}")
    found = ch.query(f"SELECT {pg_record_text(natives)} FROM r ORDER BY k", "TSVRaw").bytes().decode().splitlines()
    with pg.transaction():
        pg.execute(PIN)
        definitions = ", ".join(f"c{i} {c.column_type.postgres}" for i, c in enumerate(columns))
        pg.execute(f"CREATE TEMP TABLE r (k integer, {definitions}) ON COMMIT DROP")
        with pg.cursor() as cursor:
            cursor.executemany("INSERT INTO r VALUES (%s, %s, %s, %s, %s)", [(k, *row) for k, row in enumerate(rows)])
        rendered = [str(r[0]) for r in pg.execute(f"SELECT {record_text(columns)} FROM r ORDER BY k").fetchall()]
    assert found == rendered
    assert len(set(rendered)) == len(rows)


def test_a_uuid_renders_in_its_standard_field_order(ch: chdb.session.Session, pg: psycopg.Connection[Any]) -> None:
    value = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    from_ch, from_pg = _both(ch, pg, "UUID", StringMapping.BINARY, [value])
    assert from_ch == from_pg == [("(00112233-4455-6677-8899-aabbccddeeff)", from_pg[0][1])]
