"""SQL Server's exact read-back verification: what it reads, and that a difference a lossy path would hide is seen.

The read-back may answer "equal" only when the stored rows are the sealed rows loaded; a false "equal" is the one
failure it must never have. Each tampering below changes a stored value only in the part that the lossy way of reading
it would drop (pymssql's ``datetime`` keeps microseconds, its UUID is built from ``bytes_le``, FreeTDS substitutes
``?`` for what the client charset cannot hold, the server cuts ``(MAX)`` values at TEXTSIZE, a float would round the
38th digit), and the chunk must then not be verified by read-back: the typed digest decides.

The rows the read-back SELECT returns are written by hand from SQL Server's documented rules for each expression
(``DATEDIFF_BIG`` counts second boundaries, ``DATEPART(NANOSECOND)`` is the fraction in nanoseconds, ``CONVERT`` of a
DECIMAL prints every digit of its scale, ``CONVERT(CHAR(36))`` of a uniqueidentifier is its hyphenated hex), never
from the adapter's own decoding.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pyarrow as pa
import pytest

from airflow_provider_dpone.core.manifest.transfer import StringMapping
from airflow_provider_dpone.core.manifest.transfer_options import ImportBackend
from airflow_provider_dpone.transfer.ports import ChunkEvidence
from airflow_provider_dpone.transfer.targets.mssql import readback, tsql
from airflow_provider_dpone.transfer.targets.mssql.target import FETCH_ROWS, MsSqlTransferTarget
from airflow_provider_dpone.transfer.targets.readback_equality import stored_equals_sent
from airflow_provider_dpone.transfer.values.target import PublicationMode, TargetColumn, TargetPlan
from tests.fakes.mssql_server import EmulatedServer
from tests.fixtures.target_harness import bind, chunk, evidence, sealed_chunk

UTC = dt.UTC
TEXT = StringMapping.TEXT
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


def _plan(*columns: TargetColumn) -> TargetPlan:
    return TargetPlan(
        invocation_id="readback-invocation-0001",
        target_schema="dbo",
        target_table="t",
        columns=(TargetColumn(name="k", source_type="Int32"), *columns),
        mode=PublicationMode.FULL_REFRESH,
    )


ALL_TYPES = _plan(
    TargetColumn(name="u64", source_type="UInt64"),
    TargetColumn(name="i8", source_type="Int8"),
    TargetColumn(name="i64", source_type="Nullable(Int64)"),
    TargetColumn(name="d38", source_type="Nullable(Decimal(38, 10))"),
    TargetColumn(name="d44", source_type="Decimal(4, 4)"),
    TargetColumn(name="bin", source_type="Nullable(String)"),
    TargetColumn(name="fixed", source_type="FixedString(3)"),
    TargetColumn(name="flag", source_type="Nullable(Bool)"),
    TargetColumn(name="day", source_type="Nullable(Date32)"),
    TargetColumn(name="ts0", source_type="DateTime('UTC')"),
    TargetColumn(name="ts3", source_type="DateTime64(3, 'UTC')"),
    TargetColumn(name="ts6", source_type="Nullable(DateTime64(6, 'UTC'))"),
    TargetColumn(name="u", source_type="Nullable(UUID)"),
)
ALL_ROWS: list[tuple[object, ...]] = [
    (0, 2**64 - 1, -128, -(2**63), Decimal("-" + "9" * 28 + "." + "9" * 10), Decimal("0.9999"), b"", b"\x00\x01\x02",
     True, dt.date(1, 1, 1), dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
     dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")),
    (1, 0, 127, None, None, Decimal("-0.0001"), None, b"abc", None, None, EPOCH, EPOCH, None, None),
    (2, 10**19, 0, 2**63 - 1, Decimal("0.0000000001"), Decimal(0), b"\xff" * 9000, b"   ", False,
     dt.date(9999, 12, 31), dt.datetime(2026, 3, 1, 12, 0, 1, tzinfo=UTC), dt.datetime(2026, 3, 1, 0, 0, 0, 1000, tzinfo=UTC),
     dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC), uuid.UUID(int=2**128 - 1)),
]  # fmt: skip
TEXT_PLAN = _plan(
    TargetColumn(name="t", source_type="String", string_mapping=TEXT),
    TargetColumn(name="nt", source_type="Nullable(String)", string_mapping=TEXT),
)
TEXT_ROWS: list[tuple[object, ...]] = [(0, "", None), (1, "a?b", ""), (2, "é日本😀", "x" * 5000), (3, "\t'\"", "N'")]


def _loaded(
    plan: TargetPlan, rows: list[tuple[object, ...]], backend: ImportBackend = ImportBackend.BCP
) -> tuple[EmulatedServer, MsSqlTransferTarget, pa.Table]:
    server = EmulatedServer()
    table, invocation = bind(plan)
    target = MsSqlTransferTarget(server.connect, table, import_backend=backend)
    target.prepare(invocation)
    sent = sealed_chunk(invocation, 0, rows)
    target.load_chunk(invocation, 0, sent)
    return server, target, sent


def _verify(
    server: EmulatedServer, target: MsSqlTransferTarget, plan: TargetPlan, rows: list[tuple[object, ...]]
) -> tuple[ChunkEvidence, list[str | None]]:
    """Verify chunk 0 against the rows' evidence; the observed evidence and the kinds of statements it ran."""
    _, invocation = bind(plan)
    before = len(server.calls)
    observed = target.verify_chunk(invocation, evidence(plan, 0, rows))
    kinds = [c.statement for c in server.calls[before:] if c.kind == "execute"]
    return observed, kinds


@pytest.mark.parametrize("backend", list(ImportBackend))
@pytest.mark.parametrize(("plan", "rows"), [(ALL_TYPES, ALL_ROWS), (TEXT_PLAN, TEXT_ROWS)], ids=["types", "text"])
def test_a_sealed_chunk_of_every_type_is_verified_by_read_back_alone(
    backend: ImportBackend, plan: TargetPlan, rows: list[tuple[object, ...]]
) -> None:
    server, target, _ = _loaded(plan, rows, backend)
    observed, kinds = _verify(server, target, plan, rows)
    assert observed == evidence(plan, 0, rows)
    assert "readback_chunk" in kinds and "chunk_digest" not in kinds


def test_a_chunk_not_from_a_sealed_stage_object_is_verified_by_the_digest() -> None:
    server = EmulatedServer()
    table, invocation = bind(ALL_TYPES)
    target = MsSqlTransferTarget(server.connect, table)
    target.prepare(invocation)
    target.load_chunk(invocation, 0, chunk(invocation, ALL_ROWS))
    observed, kinds = _verify(server, target, ALL_TYPES, ALL_ROWS)
    assert observed == evidence(ALL_TYPES, 0, ALL_ROWS)
    assert "readback_chunk" not in kinds and "chunk_digest" in kinds


def test_verification_server_never_reads_back() -> None:
    server = EmulatedServer()
    table, invocation = bind(ALL_TYPES)
    target = MsSqlTransferTarget(server.connect, table, verification="server")
    target.prepare(invocation)
    target.load_chunk(invocation, 0, sealed_chunk(invocation, 0, ALL_ROWS))
    observed, kinds = _verify(server, target, ALL_TYPES, ALL_ROWS)
    assert observed == evidence(ALL_TYPES, 0, ALL_ROWS) and "readback_chunk" not in kinds


def _tamper(server: EmulatedServer, plan: TargetPlan, position: int, column: str, value: object) -> None:
    table = server.tables[tsql.staging(plan)]
    row = next(r for r in table.rows if r[0] == 0 and r[1] == position)
    row[table.position(column)] = value


# (plan, rows, position, column, stored value differing only where the lossy read would not look)
LOSSY = {
    "decimal_38th_digit": (ALL_TYPES, ALL_ROWS, 0, "d38", Decimal("-" + "9" * 28 + "." + "9" * 9 + "8")),
    "uint64_last_digit": (ALL_TYPES, ALL_ROWS, 0, "u64", Decimal(2**64 - 2)),
    "datetime_one_microsecond": (ALL_TYPES, ALL_ROWS, 2, "ts6", dt.datetime(1969, 12, 31, 23, 59, 59, 500001)),
    "uuid_byte_order": (ALL_TYPES, ALL_ROWS, 0, "u", uuid.UUID(bytes_le=uuid.UUID("00112233-4455-6677-8899-aabbccddeeff").bytes)),
    "empty_for_null": (ALL_TYPES, ALL_ROWS, 1, "bin", b""),
    "null_for_empty": (ALL_TYPES, ALL_ROWS, 0, "bin", None),
    "binary_past_textsize": (ALL_TYPES, ALL_ROWS, 2, "bin", b"\xff" * 9000 + b"\x00"),
    "text_unpaired_surrogate": (TEXT_PLAN, TEXT_ROWS, 1, "t", "a\ud800b"),
    "text_past_textsize": (TEXT_PLAN, TEXT_ROWS, 2, "nt", "x" * 5000 + "y"),
    "text_empty_for_null": (TEXT_PLAN, TEXT_ROWS, 0, "nt", ""),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(LOSSY))
def test_a_difference_a_lossy_read_would_drop_is_never_verified_by_read_back(case: str) -> None:
    plan, rows, position, column, stored = LOSSY[case]
    server, target, sent = _loaded(plan, rows)
    server.default_textsize = 8192  # conn_properties without pymssql's TEXTSIZE: the server would cut (MAX) values
    _tamper(server, plan, position, column, stored)
    if case != "text_unpaired_surrogate":  # the digest's UTF-8 text encoding has no form for a lone surrogate
        observed, kinds = _verify(server, target, plan, rows)
        assert kinds.index("readback_chunk") < kinds.index("chunk_digest")  # read back, refused, digest decided
        assert observed != evidence(plan, 0, rows)
    assert target._readback_equal(plan, 0, sent) is None


def test_without_textsize_the_stand_in_would_cut_the_difference_off() -> None:
    """The control for the TEXTSIZE cases: the stand-in cuts (MAX) values at the session's TEXTSIZE, so the same
    tampering reads as equal when the statement does not raise TEXTSIZE first."""
    plan, rows, position, column, stored = LOSSY["binary_past_textsize"]
    server, target, sent = _loaded(plan, rows)
    server.default_textsize = 9000
    _tamper(server, plan, position, column, stored)
    statement = readback.readback_chunk(plan).removeprefix(readback.TEXTSIZE + "\n")
    conn = server.connect()
    cursor = conn.cursor()
    cursor.execute(f"SET TEXTSIZE 9000;\n{statement}", (0,))
    cut = readback.stored_table(plan, cursor.fetchall())
    assert stored_equals_sent(readback.comparable(plan, sent), cut)
    assert target._readback_equal(plan, 0, sent) is None


# -- the decoding of what the read-back SELECT returns, from SQL Server's documented rules ----------------------------
TICKS = 10**7
TS_PLAN = _plan(TargetColumn(name="ts", source_type="Nullable(DateTime64(6, 'UTC'))"))


def _ts_sent(value: dt.datetime | None) -> pa.Table:
    _, invocation = bind(TS_PLAN)
    return sealed_chunk(invocation, 0, [(7, value)])


@pytest.mark.parametrize(
    ("value", "ticks"),
    [
        (dt.datetime(2026, 3, 1, 0, 0, 0, 123456, tzinfo=UTC), 1772323200 * TICKS + 1234560),
        (dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC), -1 * TICKS + 5000000),  # floor second, + fraction
        (dt.datetime(1, 1, 1, tzinfo=UTC), -62135596800 * TICKS),
        (dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), 253402300799 * TICKS + 9999990),
    ],
)
def test_datetime_ticks_are_compared_to_the_100_ns(value: dt.datetime, ticks: int) -> None:
    expected = readback.comparable(TS_PLAN, _ts_sent(value))
    assert stored_equals_sent(expected, readback.stored_table(TS_PLAN, [(0, 7, ticks)]))
    for off_by_one_tick in (ticks + 1, ticks - 1):  # what pymssql's nanosecond // 1000 would drop
        assert not stored_equals_sent(expected, readback.stored_table(TS_PLAN, [(0, 7, off_by_one_tick)]))
    assert not stored_equals_sent(expected, readback.stored_table(TS_PLAN, [(0, 7, None)]))


DEC_PLAN = _plan(TargetColumn(name="d", source_type="Nullable(Decimal(4, 4))"))


@pytest.mark.parametrize(
    ("text", "equal"),
    [(".1234", True), ("0.1234", True), (".1235", False), ("-.1234", False), (".12340", True), ("0.12345", False)],
)
def test_decimal_text_is_parsed_exactly_into_the_sent_scale(text: str, equal: bool) -> None:
    """With P = S there is no integer digit, so the server may print ``.1234``; a digit past the scale is refused,
    never rounded."""
    _, invocation = bind(DEC_PLAN)
    expected = readback.comparable(DEC_PLAN, sealed_chunk(invocation, 0, [(1, Decimal("0.1234"))]))
    assert stored_equals_sent(expected, readback.stored_table(DEC_PLAN, [(0, 1, text)])) is equal


UUID_PLAN = _plan(TargetColumn(name="u", source_type="UUID"))


def test_uuid_text_must_be_the_servers_lower_case_canonical_text() -> None:
    value = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    _, invocation = bind(UUID_PLAN)
    expected = readback.comparable(UUID_PLAN, sealed_chunk(invocation, 0, [(1, value)]))
    stored = readback.stored_table
    assert stored_equals_sent(expected, stored(UUID_PLAN, [(0, 1, "00112233-4455-6677-8899-aabbccddeeff")]))
    assert not stored_equals_sent(expected, stored(UUID_PLAN, [(0, 1, "33221100-5544-7766-8899-aabbccddeeff")]))
    assert not stored_equals_sent(expected, stored(UUID_PLAN, [(0, 1, "00112233-4455-6677-8899-AABBCCDDEEFF")]))


def test_nvarchar_bytes_decode_strictly_as_utf16le() -> None:
    plan = _plan(TargetColumn(name="t", source_type="String", string_mapping=TEXT))
    _, invocation = bind(plan)
    expected = readback.comparable(plan, sealed_chunk(invocation, 0, [(1, "a😀")]))
    assert stored_equals_sent(expected, readback.stored_table(plan, [(0, 1, "a😀".encode("utf-16-le"))]))
    with pytest.raises(readback.NotExactError):
        readback.stored_table(plan, [(0, 1, "a\ud800".encode("utf-16-le", "surrogatepass"))])
    with pytest.raises(readback.NotExactError):
        readback.stored_table(plan, [(0, 1, "a?")])  # text where the expression returns bytes


def test_positions_must_be_each_row_once() -> None:
    _, invocation = bind(UUID_PLAN)
    values = [uuid.UUID(int=1), uuid.UUID(int=2)]
    expected = readback.comparable(UUID_PLAN, sealed_chunk(invocation, 0, [(1, values[0]), (2, values[1])]))
    row = [(0, 1, str(values[0])), (1, 2, str(values[1]))]
    assert stored_equals_sent(expected, readback.stored_table(UUID_PLAN, row[::-1]))
    assert not stored_equals_sent(expected, readback.stored_table(UUID_PLAN, [row[0], (0, 2, str(values[1]))]))


def test_a_chunk_longer_than_one_fetch_is_decoded_batch_by_batch() -> None:
    """Rows on both sides of a fetch boundary: verified by read-back alone; a value that cannot be exact in the first
    batch stops the decoding, the rest is drained and the read transaction still ends cleanly."""
    rows: list[tuple[object, ...]] = [(i, f"v{i}", None if i % 3 else "") for i in range(FETCH_ROWS + 50)]
    server, target, sent = _loaded(TEXT_PLAN, rows)
    observed, kinds = _verify(server, target, TEXT_PLAN, rows)
    assert observed == evidence(TEXT_PLAN, 0, rows) and "chunk_digest" not in kinds
    _tamper(server, TEXT_PLAN, FETCH_ROWS + 7, "t", "v\ud800")
    assert target._readback_equal(TEXT_PLAN, 0, sent) is None
    _tamper(server, TEXT_PLAN, FETCH_ROWS + 7, "t", f"v{FETCH_ROWS + 7}")
    _tamper(server, TEXT_PLAN, 3, "t", "v\ud800")
    assert target._readback_equal(TEXT_PLAN, 0, sent) is None
    last = [c.statement or c.kind for c in server.calls if c.connection == server.calls[-1].connection]
    assert last[-3:] == ["readback_chunk", "rollback", "close"]  # drained, rolled back, closed
