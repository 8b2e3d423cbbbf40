"""The T-SQL chunk digest (``transfer/targets/mssql/digest.py``) against preimages written by hand.

No SQL Server runs here. The stand-in evaluates the golden T-SQL with a model of the T-SQL functions it uses
(``tests/support/fakes/mssql_digest.py``); these tests compare that with digests whose canonical bytes are spelled out below
by hand from the documented encoding (``core/typed_digest.py``: per row SHA-256 over ``b"dpone.typed-row.v1\\0"``
and, per column, a 4-byte big-endian length of ``0x01`` + canonical bytes, or ``00000001 00`` for NULL; the chunk total
is the sum of row hashes modulo 2**256). The real-server suite runs the same statement on SQL Server.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from decimal import Decimal
from typing import Any

import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer import StringMapping
from airflow_provider_dpone.core.manifest.transfer_options import ImportBackend
from airflow_provider_dpone.transfer.targets.mssql import tsql
from airflow_provider_dpone.transfer.targets.mssql.target import MsSqlTransferTarget
from airflow_provider_dpone.transfer.values.target import PublicationMode, TargetColumn, TargetPlan
from airflow_provider_dpone.transfer.values.target_receipts import ChunkEvidence
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow
from tests.support.fakes.mssql_server import EmulatedServer
from tests.support.fixtures.target_harness import MsSqlHarness, bind, chunk, evidence

pytestmark = pytest.mark.unit

UTC = dt.UTC
U = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
PLAN = TargetPlan(
    invocation_id="digest-invocation-0001",
    target_schema="dbo",
    target_table="t",
    columns=(
        TargetColumn(name="k", source_type="Int64"),
        TargetColumn(name="d", source_type="Decimal(38, 10)"),
        TargetColumn(name="big", source_type="Nullable(UInt64)"),
        TargetColumn(name="ts", source_type="DateTime64(3, 'UTC')"),
        TargetColumn(name="day", source_type="Date32"),
        TargetColumn(name="u", source_type="UUID"),
        TargetColumn(name="flag", source_type="Bool"),
        TargetColumn(name="b", source_type="String"),
        TargetColumn(name="t", source_type="String", string_mapping=StringMapping.TEXT),
        TargetColumn(name="nflag", source_type="Nullable(Bool)"),
    ),
    mode=PublicationMode.FULL_REFRESH,
)
TAG = b"dpone.typed-row.v1\x00"


def _field(canonical: bytes | None) -> bytes:
    if canonical is None:
        return bytes.fromhex("0000000100")
    return (len(canonical) + 1).to_bytes(4, "big") + b"\x01" + canonical


# (row, its canonical bytes per column written by hand)
CASES: list[tuple[tuple[object, ...], list[bytes | None]]] = [
    (
        (-(2**63), Decimal("-0.0000000001"), None, dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
         dt.date(1, 1, 1), U, True, b"", "é😀", None),
        [b"-9223372036854775808", b"-1", None, b"-1",  # -1 ms before the epoch at precision 3
         b"0001-01-01", b"00112233-4455-6677-8899-aabbccddeeff", b"1", b"", bytes.fromhex("c3a9f09f9880"), None],
    ),
    (
        (0, Decimal("9999999999999999999999999999.9999999999"), 2**64 - 1,
         dt.datetime(2026, 3, 1, 12, 0, 0, 123000, tzinfo=UTC), dt.date(2299, 12, 31), uuid.UUID(int=0), False,
         b"\x00\xff", "", False),
        [b"0", b"9" * 38, b"18446744073709551615", b"1772366400123",  # 2026-03-01T12:00:00Z = 1772366400 s
         b"2299-12-31", b"00000000-0000-0000-0000-000000000000", b"0", b"\x00\xff", b"", b"0"],
    ),
    (
        (7, Decimal("0.5"), 0, dt.datetime(1970, 1, 1, tzinfo=UTC), dt.date(1970, 1, 1), U, True, b"x", "x'y", True),
        [b"7", b"5000000000", b"0", b"0", b"1970-01-01", b"00112233-4455-6677-8899-aabbccddeeff", b"1", b"x",
         b"x'y", b"1"],
    ),
]  # fmt: skip


def _expectation(canonical_rows: list[list[bytes | None]]) -> ChunkEvidence:
    total = 0
    for canonical in canonical_rows:
        preimage = TAG + b"".join(_field(c) for c in canonical)
        total += int.from_bytes(hashlib.sha256(preimage).digest(), "big")
    return ChunkEvidence(ordinal=0, rows=len(canonical_rows), typed_sum=f"{total % 2**256:064x}")


def _hand_expectation(cases: list[tuple[tuple[object, ...], list[bytes | None]]]) -> ChunkEvidence:
    return _expectation([canonical for _, canonical in cases])


def _without(name: str) -> tuple[TargetPlan, list[tuple[tuple[object, ...], list[bytes | None]]]]:
    """The reference plan and cases without one column: a target table maps all its strings one way."""
    index = PLAN.column_names.index(name)
    plan = PLAN.model_copy(update={"columns": tuple(c for c in PLAN.columns if c.name != name)})
    cases = [(row[:index] + row[index + 1 :], canonical[:index] + canonical[index + 1 :]) for row, canonical in CASES]
    return plan, cases


BINARY, TEXT = _without("t"), _without("b")


def _loaded(
    backend: ImportBackend = ImportBackend.BCP, reference: tuple[TargetPlan, list[Any]] = TEXT
) -> tuple[EmulatedServer, MsSqlTransferTarget]:
    plan, cases = reference
    server = EmulatedServer()
    table, invocation = bind(plan)
    target = MsSqlTransferTarget(server.connect, table, import_backend=backend)
    target.prepare(invocation)
    target.load_chunk(invocation, 0, chunk(invocation, [row for row, _ in cases]))
    return server, target


def _verified(target: MsSqlTransferTarget, plan: TargetPlan, expected: ChunkEvidence) -> bool:
    return target.verify_chunk(bind(plan)[1], expected) == expected


def test_the_hand_derived_digest_is_the_typed_digest() -> None:
    """The hand-written canonical bytes agree with ``core/typed_digest.py`` (the source side's digest)."""
    assert evidence(PLAN, 0, [row for row, _ in CASES]) == _hand_expectation(CASES)


@pytest.mark.parametrize("reference", [BINARY, TEXT], ids=["binary", "text"])
@pytest.mark.parametrize("backend", list(ImportBackend))
def test_the_server_side_digest_matches_the_hand_derived_digest(backend: ImportBackend, reference: Any) -> None:
    server, target = _loaded(backend, reference)
    assert _verified(target, reference[0], _hand_expectation(reference[1]))
    verifier = max(c.connection for c in server.calls)
    assert "chunk_digest" in server.statements(verifier)
    assert "chunk_fields" not in server.statements(verifier)  # no row travels back


def test_a_consistent_guid_byte_order_error_is_caught_by_the_server_rendering() -> None:
    """A client stack that swapped GUID bytes both ways would read back equal; the server renders what it stores."""
    server, target = _loaded()
    staged = server.tables[tsql.staging(TEXT[0])]
    position = staged.position("u")
    for row in staged.rows:
        stored = row[position]
        assert isinstance(stored, uuid.UUID)
        row[position] = uuid.UUID(bytes=stored.bytes_le)  # what a byte-order error would have stored
    assert not _verified(target, TEXT[0], _hand_expectation(TEXT[1]))


def test_text_columns_on_a_server_without_utf8_collations_are_read_back_exactly() -> None:
    server, target = _loaded()
    server.major_version = 14  # SQL Server 2017
    assert _verified(target, TEXT[0], _hand_expectation(TEXT[1]))
    verifier = max(c.connection for c in server.calls)
    assert server.statements(verifier)[-3:] == ["server_version", "chunk_fields", "rollback"]


def test_the_exact_read_back_catches_a_consistent_guid_byte_order_error_too() -> None:
    server, target = _loaded()
    server.major_version = 14
    staged = server.tables[tsql.staging(TEXT[0])]
    position = staged.position("u")
    for row in staged.rows:
        row[position] = uuid.UUID(bytes=row[position].bytes_le)
    assert not _verified(target, TEXT[0], _hand_expectation(TEXT[1]))


def test_binary_only_plans_use_the_server_digest_on_any_version() -> None:
    plan = TargetPlan(
        invocation_id="digest-invocation-0002",
        target_schema="dbo",
        target_table="t",
        columns=(TargetColumn(name="b", source_type="String"),),
        mode=PublicationMode.FULL_REFRESH,
    )
    server = EmulatedServer()
    server.major_version = 13
    table, invocation = bind(plan)
    target = MsSqlTransferTarget(server.connect, table)
    target.prepare(invocation)
    target.load_chunk(invocation, 0, chunk(invocation, [(b"",), (b"a",)]))
    assert _verified(target, plan, _expectation([[b""], [b"a"]]))
    assert "server_version" not in server.statements() and "chunk_digest" in server.statements()


TEXT_ONLY = TargetPlan(
    invocation_id="digest-invocation-0003",
    target_schema="dbo",
    target_table="t",
    columns=(
        TargetColumn(name="k", source_type="Int64"),
        TargetColumn(name="t", source_type="Nullable(String)", string_mapping=StringMapping.TEXT),
    ),
    mode=PublicationMode.FULL_REFRESH,
)


def test_a_stored_text_difference_the_driver_would_hide_fails_without_utf8_collations() -> None:
    """SQL Server 2017, a text column: the stored value holds an unpaired surrogate where the source sent ``?``.

    FreeTDS converts NVARCHAR to the client charset and substitutes ``?`` for what it cannot convert, so a digest
    over the driver's read-back would equal the source's; the stored code units differ, and verification fails."""
    server = EmulatedServer()
    server.major_version = 14
    table, invocation = bind(TEXT_ONLY)
    target = MsSqlTransferTarget(server.connect, table)
    target.prepare(invocation)
    rows = [(1, "a?"), (2, None), (3, "é😀")]
    target.load_chunk(invocation, 0, chunk(invocation, rows))
    expected = evidence(TEXT_ONLY, 0, rows)
    assert target.verify_chunk(invocation, expected) == expected
    staged = server.tables[tsql.staging(TEXT_ONLY)]
    position = staged.position("t")
    row = next(r for r in staged.rows if r[position] == "a?")
    row[position] = "a\ud800"  # stored UTF-16LE 61 00 00 d8: not text anything could have sent
    with pytest.raises(DponeError, match="target_verification_failed"):
        target.verify_chunk(invocation, expected)


WINDOW_START = dt.datetime(2026, 1, 1, tzinfo=UTC)
TEXT_WINDOW = TargetPlan(
    invocation_id="digest-invocation-0004",
    target_schema="dbo",
    target_table="w",
    columns=(
        TargetColumn(name="k", source_type="Int64"),
        TargetColumn(name="ts", source_type="DateTime64(3, 'UTC')"),
        TargetColumn(name="t", source_type="Nullable(String)", string_mapping=StringMapping.TEXT),
    ),
    mode=PublicationMode.WINDOW_REPLACE,
    window=UtcWindow(column="ts", start=WINDOW_START, end=WINDOW_START + dt.timedelta(days=31)),
)


@pytest.mark.parametrize("version", [16, 14], ids=["utf8_collations", "read_back"])
@pytest.mark.parametrize("rewritten", [False, True], ids=["clean", "rewritten_on_insert"])
def test_the_window_a_replace_published_is_digested_by_the_target_before_it_commits(
    version: int, rewritten: bool
) -> None:
    """After the delete and the insert, the target's digest of its window (computed by the server, or read back
    exactly on a server without UTF-8 collations) must equal the verified chunks' total: a row the target changed
    as it was inserted (``insert_rewrites``: a trigger created after the prepare-time check) is refused, the
    transaction rolled back and the old window kept; unchanged, the window is published."""
    harness = MsSqlHarness(ImportBackend.SQLCLIENT)
    server = harness.server
    server.major_version = version
    old = [(1, WINDOW_START + dt.timedelta(days=1), "old"), (2, WINDOW_START + dt.timedelta(days=40), "kept")]
    harness.seed_target(TEXT_WINDOW, old)
    before = [list(row) for row in server.tables[tsql.target(TEXT_WINDOW)].rows]
    table, invocation = bind(TEXT_WINDOW)
    target = MsSqlTransferTarget(server.connect, table, import_backend=ImportBackend.SQLCLIENT)
    rows = [(1, WINDOW_START + dt.timedelta(days=2), "é😀"), (3, WINDOW_START, None)]
    target.prepare(invocation)
    target.load_chunk(invocation, 0, chunk(invocation, rows))
    expected = evidence(TEXT_WINDOW, 0, rows)
    assert target.verify_chunk(invocation, expected) == expected
    if rewritten:
        server.insert_rewrites[tsql.target(TEXT_WINDOW)] = lambda row: [row[0] + 1000, *row[1:]]
        with pytest.raises(DponeError) as refused:
            target.publish(invocation, [expected])
        assert refused.value.code == "native_transfer.target_published_window_differs"
        assert target.reconcile(invocation) is None
        assert server.tables[tsql.target(TEXT_WINDOW)].rows == before, "the old target is intact"
    else:
        assert target.publish(invocation, [expected]).rows == 2
        assert sorted(row[0] for row in server.tables[tsql.target(TEXT_WINDOW)].rows) == [1, 2, 3]
    statements = server.statements()
    assert "lock_target" in statements
    assert ("window_digest" in statements) is (version == 16)
