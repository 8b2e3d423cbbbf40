"""Exact bytes and parameters the SQL Server target sends, pinned against the TDS/FreeTDS/pymssql rules.

No SQL Server runs here, so these tests pin what leaves the client. Every expected value below is written by hand from
the rule it cites, never computed by the adapter's encoders:

* pymssql 2.4.6 ``convert_python_value``: text is bound as ``SQLVARCHAR`` with ``length[0] = len(value)``
  (``value.encode('utf-16le')`` first for an nvarchar column), binary as ``SQLVARBINARY``;
  ``_quote_simple_value``: ``str`` -> ``"N'" + value.replace("'", "''") + "'"``, ``bytearray`` ->
  ``b'0x' + binascii.hexlify(bytes(value))``, ``int`` -> ``str(value)``.
* FreeTDS db-lib ``_bcp_get_col_data``: ``if (bindcol->column_bindlen == 0) data_is_null = 1;`` -- a zero-length
  BCP value is NULL, so empty values must not travel by BCP.
* FreeTDS ``tds_numeric_put`` / ``tds_swap_numeric``: length ``tds_numeric_bytes_per_prec[p]`` (17 for p 29..38, 13
  for p 20..28), sign byte 1 = positive / 0 = negative, magnitude little-endian.
* FreeTDS ``tds_msdatetime_put`` ("TODO precision": always scale 7): length, 5 bytes of 100 ns ticks since midnight,
  3 bytes of days since 0001-01-01 (``dta->date + 693595``, 693595 = days from 0001-01-01 to 1900-01-01), LE.
* TDS GUID: Data1 (4), Data2 (2), Data3 (2) little-endian, Data4 (8) as is.
* FreeTDS ``tds_generic_put`` for (MAX) in BCP: ``tds_put_int8(tds, bcp7 ? -2 : colsize); tds_put_int(tds,
  colsize);`` data, then a zero chunk terminator ``tds_put_int(tds, 0)``.

The stand-in (``tests/support/fakes/mssql_bcp.py``) models those rules; the first test shows it refuses what FreeTDS refuses.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pyarrow as pa
import pytest
from pymssql import _mssql

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer import StringMapping
from airflow_provider_dpone.core.manifest.transfer_options import ImportBackend
from airflow_provider_dpone.transfer.targets.mssql import tsql
from airflow_provider_dpone.transfer.targets.mssql.arrow_bcp import SLICE_ROWS
from airflow_provider_dpone.transfer.targets.mssql.loaders import sqlclient_rows_per_statement
from airflow_provider_dpone.transfer.targets.mssql.target import MsSqlTransferTarget
from airflow_provider_dpone.transfer.targets.mssql.values import sqlclient_row_encoder
from airflow_provider_dpone.transfer.values.arrow_chunk import table_rows
from airflow_provider_dpone.transfer.values.target import PublicationMode, TargetColumn, TargetPlan
from airflow_provider_dpone.transfer.values.target_values import RowConverter
from tests.support.fakes.mssql_bcp import HostBind
from tests.support.fakes.mssql_server import BcpColumn, EmulatedServer
from tests.support.fixtures.target_harness import bind, chunk, evidence

pytestmark = pytest.mark.unit

UTC = dt.UTC
TEXT = StringMapping.TEXT


def _plan(*columns: TargetColumn) -> TargetPlan:
    return TargetPlan(
        invocation_id="bytes-invocation-0001",
        target_schema="dbo",
        target_table="t",
        columns=(TargetColumn(name="k", source_type="Int32"), *columns),
        mode=PublicationMode.FULL_REFRESH,
    )


def _load(plan: TargetPlan, rows: list[tuple[object, ...]], backend: ImportBackend) -> EmulatedServer:
    server = EmulatedServer()
    table, invocation = bind(plan)
    target = MsSqlTransferTarget(server.connect, table, import_backend=backend)
    target.prepare(invocation)
    target.load_chunk(invocation, 0, chunk(invocation, rows))
    assert target.verify_chunk(invocation, evidence(plan, 0, rows)) == evidence(plan, 0, rows)
    return server


def _staged(server: EmulatedServer, plan: TargetPlan) -> list[list[object]]:
    return [row[2:] for row in server.tables[tsql.staging(plan)].rows]  # without the ordinal and the position


PROBE = HostBind("SQLINT4", b"\xff\xff\xff\xff", -1)  # ordinal -1: prepare's bulk-transaction probe row


def _chunk_rows(server: EmulatedServer) -> list[list[BcpColumn]]:
    """BCP rows of chunks, without the probe row prepare sends (and rolls back) to test INSERT BULK's transaction."""
    return [row for row in server.bcp_rows if row[0].bind != PROBE]


def _rendered(server: EmulatedServer) -> list[bytes]:
    """Each parameterized INSERT as pymssql itself renders it (its own ``substitute_params``)."""
    return [
        _mssql.substitute_params(c.sql, c.params)
        for c in server.calls
        if c.statement == "insert_values" and c.sql is not None
    ]


# -- R1: empty values are values, never NULL ------------------------------------------------------------------------
def test_the_stand_in_turns_a_zero_length_bcp_value_into_null_as_freetds_does() -> None:
    """The model the fix is tested against: bulk_copy of ``b''`` stores NULL, and fails into a NOT NULL column."""
    server = EmulatedServer()
    plan = _plan(TargetColumn(name="b", source_type="Nullable(String)"), TargetColumn(name="s", source_type="String"))
    table, invocation = bind(plan)
    MsSqlTransferTarget(server.connect, table).prepare(invocation)
    conn = server.connect()
    conn.bulk_copy(tsql.staging(plan), [(0, 0, 1, b"", b"x")])  # ordinal, position, k, b, s
    assert server.bcp_rows[-1][3].bind == HostBind("SQLVARBINARY", b"", 0)
    assert conn.work is not None and conn.work[tsql.staging(plan)].rows == [[0, 0, 1, None, b"x"]]
    with pytest.raises(Exception, match="20204"):
        conn.bulk_copy(tsql.staging(plan), [(0, 1, 1, b"x", b"")])


def _strings(mapping: StringMapping) -> TargetPlan:
    names = (("b", "String"), ("t", "String"), ("nb", "Nullable(String)"), ("nt", "Nullable(String)"))
    return _plan(*(TargetColumn(name=n, source_type=t, string_mapping=mapping) for n, t in names))


EMPTY_PLAN = _strings(StringMapping.BINARY)
EMPTY_TEXT_PLAN = _strings(TEXT)


EMPTIES = {  # rows with empty values, and how an empty value of that mapping is spelled in a parameter row
    "binary": (EMPTY_PLAN, [(1, b"", b"", b"", b""), (2, b"a", b"a", None, None), (3, b"", b"b", b"", None)], b"0x"),
    "text": (EMPTY_TEXT_PLAN, [(1, "", "", "", ""), (2, "a", "a", None, None), (3, "", "b", "", None)], b"N''"),
}
CAST = {b"0x": b"CAST(0x AS VARBINARY(MAX))", b"N''": b"CAST(N'' AS NVARCHAR(MAX))"}


@pytest.mark.parametrize("mapping", sorted(EMPTIES))
@pytest.mark.parametrize("backend", list(ImportBackend))
def test_empty_strings_and_binaries_load_as_empty_values(backend: ImportBackend, mapping: str) -> None:
    plan, rows, empty = EMPTIES[mapping]
    server = _load(plan, rows, backend)
    assert sorted(_staged(server, plan), key=lambda r: r[0]) == [list(r) for r in rows]
    # No BCP row ever carries a zero-length value: those rows went as parameters.
    assert [r[2].bind.data for r in _chunk_rows(server)] == (  # k of the rows BCP sent
        [b"\x02\x00\x00\x00"] if backend is ImportBackend.BCP else []
    )
    rendered = b"".join(_rendered(server))
    assert b"(CAST(0 AS INT), CAST(0 AS INT), CAST(1 AS INT), " + CAST[empty] + b", " + CAST[empty] + b", " in rendered
    assert CAST[empty] + b", " + CAST[empty] + b")" in rendered


def test_many_empty_rows_interleave_bcp_runs_and_full_inserts() -> None:
    """Empty-bearing rows wait up to one full INSERT, then BCP resumes: nothing buffers the whole chunk."""
    per_statement = sqlclient_rows_per_statement(EMPTY_PLAN)
    rows = [(i, b"" if i % 2 else b"x", b"y", None, None) for i in range(4 * per_statement + 10)]  # odd i: empty
    server = _load(EMPTY_PLAN, rows, ImportBackend.BCP)
    loader = max(c.connection for c in server.calls if c.statement == "insert_values")
    kinds = [k for k in server.statements(loader) if k in {"bulk_copy", "insert_values"}]
    assert kinds == ["bulk_copy", "insert_values", "bulk_copy", "insert_values", "bulk_copy", "insert_values"]
    inserts = [c for c in server.calls if c.statement == "insert_values"]
    assert [len(c.params or ()) // 7 for c in inserts] == [per_statement, per_statement, 5]
    assert len(_chunk_rows(server)) == 2 * per_statement + 5
    assert sorted(_staged(server, EMPTY_PLAN)) == sorted(list(r) for r in rows)


def test_an_empty_text_beside_a_nul_loads_exactly_with_the_nul_text_as_utf16_bytes() -> None:
    """A parameter row cannot carry NUL in an ``N'...'`` literal (pymssql's statement is a C string), so its text
    travels as UTF-16LE bytes that ``CAST(0x... AS NVARCHAR(MAX))`` reads back as the same code units."""
    rows: list[tuple[object, ...]] = [(1, "", "a\x00b", None, None)]
    server = _load(EMPTY_TEXT_PLAN, rows, ImportBackend.BCP)
    assert _staged(server, EMPTY_TEXT_PLAN) == [list(r) for r in rows]
    assert b"CAST(0x610000006200 AS NVARCHAR(MAX))" in b"".join(_rendered(server))


# -- R1b: text BCP would alter (FreeTDS rtrim_bcpcol) -----------------------------------------------------------------
def test_the_stand_in_trims_bcp_text_as_freetds_rtrim_bcpcol_does() -> None:
    """The model the fix is tested against: trailing spaces go (never the first character), a lone NUL is empty,
    an embedded NUL stays; binary values are never trimmed."""
    stored = {}
    for mapping, sent in ((TEXT, ["ab  ", "   ", "\x00", "a\x00", " "]), (StringMapping.BINARY, [b"x  ", b"\x00"])):
        server = EmulatedServer()
        plan = _plan(TargetColumn(name="t", source_type="String", string_mapping=mapping))
        table, invocation = bind(plan)
        MsSqlTransferTarget(server.connect, table).prepare(invocation)
        conn = server.connect()
        conn.bulk_copy(tsql.staging(plan), [(0, i, 1, value) for i, value in enumerate(sent)])
        assert conn.work is not None
        stored[mapping] = [row[3] for row in conn.work[tsql.staging(plan)].rows]
    assert stored == {TEXT: ["ab", " ", "", "a\x00", " "], StringMapping.BINARY: [b"x  ", b"\x00"]}


ALTERED = [(1, "ab  ", "x"), (2, "   ", "y"), (3, "\x00", "z"), (4, " ", "\x00a"), (5, "a\x00", "c"), (6, "k", "")]


@pytest.mark.parametrize("backend", list(ImportBackend))
def test_text_with_trailing_spaces_or_a_lone_nul_loads_exactly(backend: ImportBackend) -> None:
    """Each value BCP would trim goes as a parameter row instead (decided per value); the others stay on BCP."""
    plan = _plan(*(TargetColumn(name=n, source_type="String", string_mapping=TEXT) for n in ("t", "u")))
    server = _load(plan, ALTERED, backend)
    assert sorted(_staged(server, plan), key=lambda r: r[0]) == [list(r) for r in ALTERED]
    bcp_keys = sorted(int.from_bytes(r[2].bind.data or b"", "little") for r in _chunk_rows(server))
    assert bcp_keys == ([4, 5] if backend is ImportBackend.BCP else [])  # " " and an embedded NUL: BCP keeps them


# -- (MAX) values over 8000 bytes -------------------------------------------------------------------------------------
PLP_9000 = bytes.fromhex("feffffffffffffff28230000")  # bcp7 unknown length -2, then one chunk of 9000 = 0x2328
PLP_END = bytes(4)


def test_varbinary_max_over_8000_bytes_is_one_plp_chunk() -> None:
    plan = _plan(TargetColumn(name="v", source_type="String"))
    value = bytes(range(256)) * 35 + bytes(40)  # 9000 bytes
    server = _load(plan, [(1, value)], ImportBackend.BCP)
    sent = _chunk_rows(server)[0][3]
    assert sent.bind == HostBind("SQLVARBINARY", value, 9000)
    assert sent.wire == PLP_9000 + value + PLP_END
    assert _staged(server, plan) == [[1, value]]


def test_nvarchar_max_over_8000_bytes_is_bound_as_utf16le() -> None:
    plan = _plan(TargetColumn(name="v", source_type="String", string_mapping=TEXT))
    server = _load(plan, [(1, "é" * 4500)], ImportBackend.BCP)
    sent = _chunk_rows(server)[0][3]
    assert sent.bind == HostBind("SQLVARCHAR", b"\xe9\x00" * 4500, 9000)  # pymssql's utf-16le fix for nvarchar
    assert sent.wire == PLP_9000 + b"\xe9\x00" * 4500 + PLP_END


def test_sqlclient_sends_a_long_binary_as_one_hex_literal() -> None:
    plan = _plan(TargetColumn(name="v", source_type="String"))
    server = _load(plan, [(1, b"\xab" * 9000)], ImportBackend.SQLCLIENT)
    assert b"CAST(0x" + b"ab" * 9000 + b" AS VARBINARY(MAX))" in _rendered(server)[0]


# -- the Arrow batch is checked column by column, and encoded across slices ------------------------------------------
def test_a_chunk_longer_than_one_encoding_slice_keeps_every_row_and_its_routing() -> None:
    """Rows on both sides of the encoder's slice boundary, empty values among them, all staged exactly once."""
    rows = [(i, b"" if i % 1000 == 0 else i.to_bytes(3, "big")) for i in range(SLICE_ROWS + 300)]
    plan = _plan(TargetColumn(name="v", source_type="String"))
    server = _load(plan, rows, ImportBackend.BCP)
    assert sorted(_staged(server, plan)) == sorted(list(row) for row in rows)
    assert len(_chunk_rows(server)) == len(rows) - len(range(0, SLICE_ROWS + 300, 1000))


def test_a_time_finer_than_the_column_is_refused_naming_the_column() -> None:
    """DateTime64(1) is staged in milliseconds; a millisecond the column cannot hold is refused before BCP."""
    plan = _plan(TargetColumn(name="t", source_type="DateTime64(1, 'UTC')"))
    server = EmulatedServer()
    table, invocation = bind(plan)
    target = MsSqlTransferTarget(server.connect, table)
    target.prepare(invocation)
    staged = chunk(invocation, [(1, dt.datetime(2026, 1, 1, 0, 0, 0, 100_000, tzinfo=UTC))])
    finer = staged.set_column(1, "t", pa.array([dt.datetime(2026, 1, 1, 0, 0, 0, 1_000)], staged.schema.field(1).type))
    with pytest.raises(DponeError, match=r"target_value_invalid.*column t: finer than DateTime64\(1\)"):
        target.load_chunk(invocation, 0, finer)
    target.load_chunk(invocation, 0, staged)
    assert _staged(server, plan) == [[1, dt.datetime(2026, 1, 1, 0, 0, 0, 100_000)]]


# -- boundary values of the exact types ------------------------------------------------------------------------------
MAX38 = "4b3b4ca85a86c47a098a223fffffffff"  # 10**38 - 1 in hex (big-endian)
MAX38_LE = bytes.fromhex(MAX38)[::-1]
DAYS_9999_12_31 = bytes.fromhex("dab937")  # 3652058 = 0x37b9da days after 0001-01-01, little-endian
TICKS_LAST_MICRO = bytes.fromhex("f6bf692ac9")  # 86399.999999 s = 863999999990 x 100 ns = 0xc92a69bff6, LE
# (source type, value, bound text, wire bytes, the SqlClient literal pymssql renders)
BOUNDARIES = {
    "decimal38_max": (
        "Decimal(38, 0)", Decimal("9" * 38), b"9" * 38, b"\x11\x01" + MAX38_LE, b"CAST(N'" + b"9" * 38 + b"' AS DECIMAL(38,0))",
    ),
    "decimal38_10_min": (
        "Decimal(38, 10)", Decimal("-" + "9" * 28 + "." + "9" * 10), b"-" + b"9" * 28 + b"." + b"9" * 10,
        b"\x11\x00" + MAX38_LE, b"CAST(N'-" + b"9" * 28 + b"." + b"9" * 10 + b"' AS DECIMAL(38,10))",
    ),
    "decimal38_10_tiny": (
        "Decimal(38, 10)", Decimal("-0.0000000001"), b"-0.0000000001", b"\x11\x00\x01" + bytes(15),
        b"CAST(N'-0.0000000001' AS DECIMAL(38,10))",
    ),
    "uint64_max": (
        "UInt64", 2**64 - 1, b"18446744073709551615", b"\x0d\x01" + b"\xff" * 8 + bytes(4),
        b"CAST(18446744073709551615 AS DECIMAL(20,0))",
    ),
    "datetime2_min": (
        "DateTime64(6, 'UTC')", dt.datetime(1, 1, 1, tzinfo=UTC), b"0001-01-01 00:00:00.000000", b"\x08" + bytes(8),
        b"CAST(N'0001-01-01T00:00:00.000000' AS DATETIME2(6))",
    ),
    "datetime2_max": (
        "DateTime64(6, 'UTC')", dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        b"9999-12-31 23:59:59.999999", b"\x08" + TICKS_LAST_MICRO + DAYS_9999_12_31,
        b"CAST(N'9999-12-31T23:59:59.999999' AS DATETIME2(6))",
    ),
    "datetime_seconds_1900": (
        "DateTime('UTC')", dt.datetime(1900, 1, 1, tzinfo=UTC), b"1900-01-01 00:00:00.000000",
        b"\x08" + bytes(5) + bytes.fromhex("5b950a"),  # 693595 = 0x0a955b: FreeTDS's own 1900 offset
        b"CAST(N'1900-01-01T00:00:00.000000' AS DATETIME2(0))",
    ),
    "date_min": ("Date32", dt.date(1, 1, 1), b"0001-01-01", b"\x03" + bytes(3), b"CAST(N'0001-01-01' AS DATE)"),
    "date_max": ("Date32", dt.date(9999, 12, 31), b"9999-12-31", b"\x03" + DAYS_9999_12_31, b"CAST(N'9999-12-31' AS DATE)"),
    "date32_last": (
        "Date32", dt.date(2299, 12, 31), b"2299-12-31", b"\x03" + bytes.fromhex("0bd00c"),  # 839691 = 0x0cd00b
        b"CAST(N'2299-12-31' AS DATE)",
    ),
    "uuid_byte_order": (
        "UUID", uuid.UUID("00112233-4455-6677-8899-aabbccddeeff"), b"00112233-4455-6677-8899-aabbccddeeff",
        bytes.fromhex("10" "33221100" "5544" "7766" "8899aabbccddeeff"),
        b"CAST(N'00112233-4455-6677-8899-aabbccddeeff' AS UNIQUEIDENTIFIER)",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BOUNDARIES))
def test_boundary_value_bytes_over_bcp(case: str) -> None:
    source_type, value, text, wire, _ = BOUNDARIES[case]
    plan = _plan(TargetColumn(name="v", source_type=source_type))
    server = _load(plan, [(1, value)], ImportBackend.BCP)
    sent = _chunk_rows(server)[0][3]
    assert sent.bind == HostBind("SQLVARCHAR", text, len(text))  # exact text: FreeTDS converts it client-side
    assert sent.wire == wire


@pytest.mark.parametrize("case", sorted(BOUNDARIES))
def test_boundary_value_parameters_over_sqlclient(case: str) -> None:
    source_type, value, _, _, literal = BOUNDARIES[case]
    plan = _plan(TargetColumn(name="v", source_type=source_type))
    server = _load(plan, [(1, value)], ImportBackend.SQLCLIENT)
    assert _rendered(server) == [
        f"INSERT INTO {tsql.staging(plan)} ([__dpone_chunk], [__dpone_row], [k], [v]) VALUES\n".encode()
        + b"(CAST(0 AS INT), CAST(0 AS INT), CAST(1 AS INT), "
        + literal
        + b");"
    ]


# -- the parameterized backend encodes column by column, to the same parameters as row by row ------------------------
def _wide_plan(mapping: StringMapping) -> TargetPlan:
    return _plan(
        TargetColumn(name="u64", source_type="UInt64"),
        TargetColumn(name="d", source_type="Nullable(Decimal(38, 10))"),
        TargetColumn(name="b", source_type="Nullable(String)", string_mapping=mapping),
        TargetColumn(name="t", source_type="Nullable(String)", string_mapping=mapping),
        TargetColumn(name="f", source_type="Bool"),
        TargetColumn(name="day", source_type="Date32"),
        TargetColumn(name="ts", source_type="Nullable(DateTime64(6, 'UTC'))"),
        TargetColumn(name="u", source_type="Nullable(UUID)"),
    )


def _wide_row(i: int, mapping: StringMapping) -> tuple[object, ...]:
    nulls = i % 5 == 0
    text = f"é'{i}" * (i % 3)
    return (
        i, 2**64 - 1 - i, None if nulls else Decimal(i).scaleb(-10) - Decimal(10**27),
        None if nulls else (text if mapping is TEXT else bytes([i % 256]) * (i % 4)),
        None if nulls else (text if mapping is TEXT else text.encode()), i % 2 == 0,
        dt.date(1, 1, 1) + dt.timedelta(days=i * 97),
        None if nulls else dt.datetime(1, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=i * 86_413, microseconds=i),
        None if nulls else uuid.UUID(int=i * 2**100 + i),
    )  # fmt: skip


@pytest.mark.parametrize("mapping", list(StringMapping))
def test_sqlclient_parameters_are_byte_for_byte_the_row_by_row_encoding(mapping: StringMapping) -> None:
    """Column-wise conversion (``to_pylist`` per column, the per-type converters per column) sends exactly what the
    row-by-row path sent: each row through ``RowConverter`` and ``sqlclient_row_encoder``, rendered by pymssql's own
    ``substitute_params``; across an encoding slice boundary, with NULLs, empty values and every admitted kind."""
    plan = _wide_plan(mapping)
    rows = [_wide_row(i, mapping) for i in range(SLICE_ROWS + 37)]
    server = _load(plan, rows, ImportBackend.SQLCLIENT)
    _, invocation = bind(plan)
    types = [c.column_type for c in plan.columns]
    convert = RowConverter(plan.column_names, types, text_allows_nul=False)
    encode = sqlclient_row_encoder(types)
    logicals = [c.column_type.logical for c in plan.columns]
    reference = [
        (0, position, *encode(convert(row, position)))
        for position, row in enumerate(table_rows(chunk(invocation, rows), logicals))
    ]
    inserts = [c for c in server.calls if c.statement == "insert_values"]
    width = len(plan.columns) + 2
    sent = [tuple(c.params[i : i + width]) for c in inserts if c.params for i in range(0, len(c.params), width)]
    assert sent == reference
    assert [_mssql.substitute_params(c.sql, c.params) for c in inserts] == [
        _mssql.substitute_params(c.sql, tuple(v for row in reference[s : s + len(c.params) // width] for v in row))
        for c, s in zip(inserts, range(0, len(rows), sqlclient_rows_per_statement(plan)), strict=True)
        if c.sql and c.params
    ]
    first = next(p for p in inserts[0].params or () if isinstance(p, str) and "T" in p and ":" in p)
    # row 1: 0001-01-01 + 86,413 s + 1 us, in the ISO 8601 text DATETIME2 parses (pymssql renders a str as N'...')
    assert first == "0001-01-02T00:00:13.000001"


def test_a_column_not_in_its_staged_type_takes_the_per_value_path() -> None:
    """A UUID column as variable-length bytes: the per-value converters accept 16 bytes (parameters, as before);
    BCP's vectorised hex reads 16-byte slots, so it refuses the column instead of encoding the offsets."""
    plan = _plan(TargetColumn(name="u", source_type="UUID"))
    value = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    table = pa.table({"k": pa.array([1], pa.int32()), "u": pa.array([value.bytes], pa.binary())})
    for backend in ImportBackend:
        server = EmulatedServer()
        bound, invocation = bind(plan)
        target = MsSqlTransferTarget(server.connect, bound, import_backend=backend)
        target.prepare(invocation)
        if backend is ImportBackend.BCP:
            with pytest.raises(DponeError, match="column u: binary values are not 16-byte UUIDs"):
                target.load_chunk(invocation, 0, table)
            continue
        target.load_chunk(invocation, 0, table)
        assert b"CAST(N'00112233-4455-6677-8899-aabbccddeeff' AS UNIQUEIDENTIFIER)" in _rendered(server)[0]
