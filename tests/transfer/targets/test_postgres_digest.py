"""PostgreSQL's server-side chunk digest equals the Python typed digest, value for value, on every admitted type.

The server-side digest re-implements the canonical encoding in SQL; this differential test is what keeps the two
from drifting: boundary values of every type (extremes, zero, negative, pre-1970 instants, empty and non-UTF-8 bytes,
NULL) are staged, and the server digest, the read-back digest and the source's digest of the original rows must all be
equal; a single changed value must change the server digest. The same values loaded from a sealed stage chunk must read
back exactly equal, and any changed, NULLed, missing, duplicated or re-positioned row must fail the exact comparison.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any, ClassVar

import psycopg
import pyarrow as pa
import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer import StringMapping
from airflow_provider_dpone.transfer.ports import TargetInvocation
from airflow_provider_dpone.transfer.targets.postgres.digest import chunk_digest
from airflow_provider_dpone.transfer.targets.postgres.statements import lock_staging, qualified
from airflow_provider_dpone.transfer.targets.postgres.target import PostgresTransferTarget
from airflow_provider_dpone.transfer.values.target import PublicationMode, TargetColumn, TargetPlan
from airflow_provider_dpone.transfer.values.target_receipts import ChunkEvidence
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow
from tests.support.fixtures.postgres import PostgresServer, throwaway_cluster
from tests.support.fixtures.target_harness import PostgresHarness, bind, chunk, evidence, sealed_chunk

pytestmark = pytest.mark.contract

UTC = dt.UTC
TYPES = [
    ("i8", "Int8", [-128, 127, 0]),
    ("u8", "UInt8", [0, 255, 1]),
    ("i16", "Int16", [-(2**15), 2**15 - 1, -1]),
    ("u16", "UInt16", [0, 2**16 - 1, 7]),
    ("i32", "Int32", [-(2**31), 2**31 - 1, 0]),
    ("u32", "UInt32", [0, 2**32 - 1, 5]),
    ("i64", "Int64", [-(2**63), 2**63 - 1, -7]),
    ("u64", "UInt64", [0, 2**64 - 1, 2**63]),
    ("d0", "Decimal(9, 0)", [Decimal(-999999999), Decimal(999999999), Decimal(0)]),
    ("d4", "Nullable(Decimal(18, 4))", [Decimal("-0.0001"), None, Decimal("12345678901234.5")]),
    (
        "d38",
        "Decimal(38, 10)",
        [Decimal("-9999999999999999999999999999.9999999999"), Decimal("0.0000000001"), Decimal("1E+5")],
    ),
    ("b", "String", [b"", b"\x00\xff\xfe", "é".encode()]),
    ("fx", "FixedString(3)", [b"\x00\x00\x00", b"abc", b"\xff\x01\x02"]),
    ("t", "Nullable(String)", ["", None, "日本語 😀"]),
    ("flag", "Bool", [True, False, True]),
    ("nflag", "Nullable(Bool)", [None, False, True]),
    ("day", "Date32", [dt.date(1, 1, 1), dt.date(1969, 12, 31), dt.date(2299, 12, 31)]),
    (
        "ts0",
        "DateTime('UTC')",
        [
            dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
            dt.datetime(1970, 1, 1, tzinfo=UTC),
            dt.datetime(2106, 2, 7, 6, 28, 15, tzinfo=UTC),
        ],
    ),
    (
        "ts3",
        "DateTime64(3, 'UTC')",
        [
            dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
            dt.datetime(1900, 1, 1, 0, 0, 0, 1000, tzinfo=UTC),
            dt.datetime(2262, 4, 11, 23, 47, 16, 854000, tzinfo=UTC),
        ],
    ),
    (
        "ts6",
        "Nullable(DateTime64(6, 'UTC'))",
        [
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            None,
            dt.datetime(2026, 3, 1, 0, 0, 0, 1, tzinfo=UTC),
        ],
    ),
    ("u", "UUID", [uuid.UUID(int=0), uuid.UUID(int=2**128 - 1), uuid.UUID("123e4567-e89b-12d3-a456-426614174000")]),
]


BINARY_ONLY = {"b", "fx"}  # bytes that are no text: a table mapping strings to text leaves them out


def _types(mapping: StringMapping) -> list[tuple[str, str, list[object]]]:
    return [t for t in TYPES if mapping is StringMapping.BINARY or t[0] not in BINARY_ONLY]


def _plan(schema: str, mapping: StringMapping) -> TargetPlan:
    columns = tuple(
        TargetColumn(name=name, source_type=source_type, string_mapping=mapping)
        for name, source_type, _ in _types(mapping)
    )
    return TargetPlan(
        invocation_id="digest-differential-1",
        target_schema=schema,
        target_table="boundaries",
        columns=columns,
        mode=PublicationMode.FULL_REFRESH,
    )


def _rows(mapping: StringMapping) -> list[tuple[object, ...]]:
    return [tuple(values[i] for _, _, values in _types(mapping)) for i in range(3)]


@pytest.fixture
def pg(postgres_server: PostgresServer) -> PostgresHarness:
    return PostgresHarness(postgres_server.dsn)


@pytest.mark.parametrize("mapping", list(StringMapping))
def test_server_digest_equals_the_python_digest_on_boundary_values(pg: PostgresHarness, mapping: StringMapping) -> None:
    plan = _plan(pg.schema, mapping)
    rows = _rows(mapping)
    expected = evidence(plan, 0, rows)
    table, invocation = bind(plan)
    server = PostgresTransferTarget(pg._connect, pg.copy_connect, table, verification="server")
    readback = PostgresTransferTarget(pg._connect, pg.copy_connect, table, verification="readback")
    try:
        server.prepare(invocation)
        server.load_chunk(invocation, 0, chunk(invocation, rows))
        assert server.verify_chunk(invocation, expected) == readback.verify_chunk(invocation, expected) == expected
    finally:
        pg.close()


@pytest.mark.parametrize("column", [name for name, _, _ in TYPES])
def test_one_changed_value_changes_the_server_digest(postgres_server: PostgresServer, column: str) -> None:
    pg = PostgresHarness(postgres_server.dsn)
    plan = _plan(pg.schema, StringMapping.BINARY)
    rows = _rows(StringMapping.BINARY)
    position = [name for name, _, _ in TYPES].index(column)
    changed = list(rows[0])
    changed[position] = rows[2][position] if rows[2][position] != rows[0][position] else rows[1][position]
    table, invocation = bind(plan)
    target = PostgresTransferTarget(pg._connect, pg.copy_connect, table, verification="server")
    try:
        target.prepare(invocation)
        target.load_chunk(invocation, 0, chunk(invocation, [tuple(changed), *rows[1:]]))
        assert target.verify_chunk(invocation, evidence(plan, 0, rows)) != evidence(plan, 0, rows)
    finally:
        pg.close()


def _sealed(
    invocation: TargetInvocation, plan: TargetPlan, rows: list[tuple[object, ...]]
) -> tuple[pa.Table, ChunkEvidence]:
    """The rows as the route hands them over: a table decoded from a sealed v2 stage object (ordinal 0)."""
    return sealed_chunk(invocation, 0, rows), evidence(plan, 0, rows)


TAMPER = {
    "value": "UPDATE {t} SET i64 = i64 + 1 WHERE __dpone_row = 2",
    "null": "UPDATE {t} SET d4 = NULL WHERE __dpone_row = 0",
    "scale": "UPDATE {t} SET d0 = d0 + 0 WHERE __dpone_row = 2",  # no change: must still verify (control)
    "duplicate": "INSERT INTO {t} SELECT * FROM {t} WHERE __dpone_row = 2",
    "missing": "DELETE FROM {t} WHERE __dpone_row = 1",
    "swapped": "UPDATE {t} SET __dpone_row = 1 - __dpone_row WHERE __dpone_row IN (0, 1)",  # same multiset (control)
}
UNCHANGED = {"scale", "swapped"}


@pytest.mark.parametrize("action", sorted(TAMPER))
def test_the_target_digest_sees_every_changed_missing_or_duplicated_row(pg: PostgresHarness, action: str) -> None:
    plan = _plan(pg.schema, StringMapping.BINARY)
    table, invocation = bind(plan)
    sent, expected = _sealed(invocation, plan, _rows(StringMapping.BINARY))
    target = PostgresTransferTarget(pg._connect, pg.copy_connect, table)
    try:
        target.prepare(invocation)
        target.load_chunk(invocation, 0, sent)
        with psycopg.connect(pg.dsn, autocommit=True) as admin:
            admin.execute(TAMPER[action].format(t=qualified(plan.target_schema, plan.staging_table)))
        assert (target.verify_chunk(invocation, expected) == expected) is (action in UNCHANGED)
    finally:
        pg.close()


@pytest.mark.parametrize("action", sorted(set(TAMPER) - UNCHANGED))
def test_staging_changed_after_verification_is_refused_by_the_publishing_transaction(
    pg: PostgresHarness, action: str
) -> None:
    """A write into staging between the chunk's verification and the publish: the publishing transaction recomputes
    every chunk under its table lock, refuses, and the old target stays exactly as it was."""
    plan = _plan(pg.schema, StringMapping.BINARY)
    table, invocation = bind(plan)
    rows = _rows(StringMapping.BINARY)
    sent, expected = _sealed(invocation, plan, rows)
    old = PostgresTransferTarget(pg._connect, pg.copy_connect, table)
    target_name = qualified(plan.target_schema, plan.target_table)
    try:
        with psycopg.connect(pg.dsn, autocommit=True) as admin:
            admin.execute(f"CREATE TABLE {target_name} (old integer)")
            admin.execute(f"INSERT INTO {target_name} VALUES (7)")
        old.prepare(invocation)
        old.load_chunk(invocation, 0, sent)
        assert old.verify_chunk(invocation, expected) == expected
        with psycopg.connect(pg.dsn, autocommit=True) as admin:
            admin.execute(TAMPER[action].format(t=qualified(plan.target_schema, plan.staging_table)))
        with pytest.raises(DponeError) as refused:
            old.publish(invocation, [expected])
        counted = action in {"duplicate", "missing"}  # the row count per chunk already differs
        assert refused.value.code == (
            "native_transfer.target_staging_incomplete" if counted else "native_transfer.target_verification_failed"
        )
        assert old.reconcile(invocation) is None
        with psycopg.connect(pg.dsn, autocommit=True) as admin:
            assert admin.execute(f"SELECT old FROM {target_name}").fetchall() == [(7,)]
    finally:
        pg.close()


def _verified(
    pg: PostgresHarness,
    kind: type[PostgresTransferTarget] = PostgresTransferTarget,
    mapping: StringMapping = StringMapping.BINARY,
) -> tuple[TargetPlan, TargetInvocation, ChunkEvidence, PostgresTransferTarget]:
    """A target of ``kind`` with chunk 0 of the boundary rows loaded and verified."""
    plan = _plan(pg.schema, mapping)
    table, invocation = bind(plan)
    sent, expected = _sealed(invocation, plan, _rows(mapping))
    target = kind(pg._connect, pg.copy_connect, table)
    target.prepare(invocation)
    target.load_chunk(invocation, 0, sent)
    assert target.verify_chunk(invocation, expected) == expected
    return plan, invocation, expected, target


NO_ROW_WRITTEN = {
    # content changed by DDL alone: no row version is written, so the rows' writer is still the load's
    "renamed": "ALTER TABLE {t} RENAME COLUMN b TO b_x; ALTER TABLE {t} RENAME COLUMN fx TO b; "
    "ALTER TABLE {t} RENAME COLUMN b_x TO fx",
    "re-added": "ALTER TABLE {t} DROP COLUMN t; ALTER TABLE {t} ADD COLUMN t bytea",
}


@pytest.mark.parametrize("action", sorted(NO_ROW_WRITTEN))
def test_a_column_changed_after_verification_breaks_the_chunk_seal(pg: PostgresHarness, action: str) -> None:
    """Columns swapped by renames, or one dropped and added again, change what the published rows hold without
    writing a row: the publishing transaction refuses on the staging schema (the seal's identity breaks too)."""
    plan, invocation, expected, target = _verified(pg)
    try:
        with psycopg.connect(pg.dsn, autocommit=True) as admin:
            admin.execute(NO_ROW_WRITTEN[action].format(t=qualified(plan.target_schema, plan.staging_table)))
        with pytest.raises(DponeError) as refused:
            target.publish(invocation, [expected])
        assert refused.value.code == "native_transfer.target_staging_schema_changed"
        assert target.reconcile(invocation) is None
    finally:
        pg.close()


SCHEMA_CHANGED = {
    # the stored values, and so a recomputed digest, stay the source's; the column the swap would publish does not
    "retyped": (StringMapping.BINARY, "ALTER TABLE {t} ALTER COLUMN i64 TYPE numeric"),
    "widened": (StringMapping.BINARY, "ALTER TABLE {t} ALTER COLUMN i32 TYPE bigint"),
    "nullable": (StringMapping.BINARY, "ALTER TABLE {t} ALTER COLUMN i64 DROP NOT NULL"),
    "collated": (StringMapping.TEXT, 'ALTER TABLE {t} ALTER COLUMN t TYPE text COLLATE "C"'),
}


@pytest.mark.parametrize("action", sorted(SCHEMA_CHANGED))
def test_a_staged_column_altered_after_verification_is_refused_at_publication(pg: PostgresHarness, action: str) -> None:
    """A column retyped, widened, made nullable or given another collation after the chunks were verified: the
    values hash alike, so the publishing transaction refuses on the staging schema itself (a broken seal re-hashes
    values; a collation change does not even break it), and the old target stays exactly as it was."""
    mapping, statement = SCHEMA_CHANGED[action]
    plan, invocation, expected, target = _verified(pg, mapping=mapping)
    target_name = qualified(plan.target_schema, plan.target_table)
    try:
        with psycopg.connect(pg.dsn, autocommit=True) as admin:
            admin.execute(f"CREATE TABLE {target_name} (old integer)")
            admin.execute(f"INSERT INTO {target_name} VALUES (7)")
            admin.execute(statement.format(t=qualified(plan.target_schema, plan.staging_table)))
        with pytest.raises(DponeError) as refused:
            target.publish(invocation, [expected])
        assert refused.value.code == "native_transfer.target_staging_schema_changed"
        assert target.reconcile(invocation) is None
        with psycopg.connect(pg.dsn, autocommit=True) as admin:
            assert admin.execute(f"SELECT old FROM {target_name}").fetchall() == [(7,)]
    finally:
        pg.close()


def test_the_chunk_digest_names_the_one_writer_as_xmin_spells_it_and_none_for_two(pg: PostgresHarness) -> None:
    """The writer a chunk's digest returns (derived from the rows' ``age(xmin)``) is the load's transaction id as
    ``xmin`` spells it, read from a transaction that has an id of its own; a row rewritten since (a second writer)
    leaves the chunk with none."""
    plan, _, _, _ = _verified(pg)
    staging = qualified(plan.target_schema, plan.staging_table)
    try:
        with psycopg.connect(pg.dsn) as conn:
            conn.execute("SELECT pg_current_xact_id()")  # the reading transaction's own id is newer than the load's
            writers = conn.execute(f"SELECT DISTINCT xmin::text::bigint FROM {staging}").fetchall()
            assert len(writers) == 1
            row = conn.execute(chunk_digest(plan, 0)).fetchone()
            assert row is not None and row[-1] == writers[0][0] and row[0] > 1
            conn.execute(f"UPDATE {staging} SET i64 = i64 WHERE ctid = (SELECT ctid FROM {staging} LIMIT 1)")
            again = conn.execute(chunk_digest(plan, 0)).fetchone()
            assert again is not None and again[:-1] == row[:-1] and again[-1] is None
            conn.rollback()
    finally:
        pg.close()


class _CountingTarget(PostgresTransferTarget):
    """Counts the chunk digests the publishing transaction computes (the seal's whole point is to need none)."""

    recomputed = 0

    def _staged_digest(self, session: Any, plan: TargetPlan, ordinal: int) -> tuple[int, int]:
        type(self).recomputed += 1
        return super()._staged_digest(session, plan, ordinal)


@pytest.mark.parametrize("rewritten", [False, True])
def test_a_sealed_chunk_is_published_without_hashing_it_again(pg: PostgresHarness, rewritten: bool) -> None:
    """Verified and untouched, a chunk is published on its seal alone; rewritten with the same values after its
    verification, its seal no longer holds, and the publishing transaction recomputes its digest (equal: it
    publishes)."""
    plan, invocation, expected, target = _verified(pg, _CountingTarget)
    try:
        if rewritten:
            with psycopg.connect(pg.dsn, autocommit=True) as admin:
                admin.execute(f"UPDATE {qualified(plan.target_schema, plan.staging_table)} SET i64 = i64")
        _CountingTarget.recomputed = 0
        receipt = target.publish(invocation, [expected])
        assert receipt.rows == len(_rows(StringMapping.BINARY))
        assert _CountingTarget.recomputed == (1 if rewritten else 0)
    finally:
        pg.close()


def test_without_data_checksums_every_chunk_is_hashed_again_at_publication() -> None:
    """A seal proves no SQL writer touched a chunk, not that its pages still hold the bytes that were hashed: on a
    cluster without page checksums, where a page changed below PostgreSQL would be served as it is, the publishing
    transaction recomputes even an untouched sealed chunk."""
    with throwaway_cluster(data_checksums=False) as server:
        unchecked = PostgresHarness(server.dsn)
        _, invocation, expected, target = _verified(unchecked, _CountingTarget)
        try:
            _CountingTarget.recomputed = 0
            assert target.publish(invocation, [expected]).rows == len(_rows(StringMapping.BINARY))
            assert _CountingTarget.recomputed == 1
        finally:
            target.close()
            unchecked.close()


def test_the_publishing_transaction_holds_writers_off_staging(pg: PostgresHarness) -> None:
    """The lock the publishing transaction takes on staging conflicts with every writer: a write attempted while it
    is held waits (here: gives up at its lock timeout) instead of landing between verification and the swap."""
    plan = _plan(pg.schema, StringMapping.BINARY)
    table, invocation = bind(plan)
    sent, _ = _sealed(invocation, plan, _rows(StringMapping.BINARY))
    target = PostgresTransferTarget(pg._connect, pg.copy_connect, table)
    staging = qualified(plan.target_schema, plan.staging_table)
    try:
        target.prepare(invocation)
        target.load_chunk(invocation, 0, sent)
        with psycopg.connect(pg.dsn) as holder, psycopg.connect(pg.dsn, autocommit=True) as writer:
            holder.execute(lock_staging(plan))
            writer.execute("SET lock_timeout = '200ms'")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                writer.execute(f"UPDATE {staging} SET i64 = i64 + 1")
            holder.rollback()
            writer.execute(f"UPDATE {staging} SET i64 = i64 + 1 WHERE false")  # free again once it ends
    finally:
        pg.close()


def test_a_parked_bulk_connection_holds_no_lock_or_transaction(pg: PostgresHarness) -> None:
    """Bulk connections are reused between calls: after a load and a verification, the publication lock is free and
    no session of the adapter is left inside a transaction."""
    plan, _, _, target = _verified(pg)
    try:
        with psycopg.connect(pg.dsn, autocommit=True) as admin:
            admin.execute("SET lock_timeout = '200ms'")
            assert admin.execute("SELECT pg_try_advisory_lock(%s)", (plan.lock_key,)).fetchone() == (True,)
            states = admin.execute(
                "SELECT state FROM pg_stat_activity WHERE application_name = 'dpone-target-copy'"
            ).fetchall()
        assert states and all(state == ("idle",) for state in states)
    finally:
        target.close()
        pg.close()


WINDOW_START = dt.datetime(2026, 1, 1, tzinfo=UTC)
WINDOW_PLAN_COLUMNS = (
    TargetColumn(name="id", source_type="UInt64"),
    TargetColumn(name="ts", source_type="DateTime64(3, 'UTC')"),
    TargetColumn(name="note", source_type="Nullable(String)"),
)


class _WriterDuringPublish(PostgresTransferTarget):
    """Right before the window digest (the window deleted and re-inserted), another session inserts a row into the
    window, giving up at its lock timeout: ``attempts`` records whether it was blocked."""

    attempts: ClassVar[list[str]] = []

    def _window_digest(self, session: Any, plan: TargetPlan, bounds: tuple[object, object]) -> tuple[int, int]:
        with psycopg.connect(self._dsn, autocommit=True) as writer:  # type: ignore[attr-defined]
            writer.execute("SET lock_timeout = '200ms'")
            try:
                writer.execute(
                    f"INSERT INTO {qualified(plan.target_schema, plan.target_table)} VALUES (%s, %s, %s)",
                    (99, WINDOW_START + dt.timedelta(days=3), b"intruder"),
                )
                type(self).attempts.append("landed")
            except psycopg.errors.LockNotAvailable:
                type(self).attempts.append("blocked")
        return super()._window_digest(session, plan, bounds)


@pytest.mark.parametrize("verification", ["server", "readback"])
def test_a_window_replace_holds_writers_off_the_target_while_it_verifies_the_window(
    pg: PostgresHarness, verification: str
) -> None:
    """The publishing transaction locks the target before it deletes the window: a row another session inserts into
    the window while the target's digest of the window is taken waits (here: gives up at its lock timeout) instead of
    landing in the published window; the window then holds exactly the verified rows, the rows outside it are kept.
    The digest is computed in SQL or read back, as chunks are."""
    plan = TargetPlan(
        invocation_id="window-writer-1",
        target_schema=pg.schema,
        target_table="windowed",
        columns=WINDOW_PLAN_COLUMNS,
        mode=PublicationMode.WINDOW_REPLACE,
        window=UtcWindow(column="ts", start=WINDOW_START, end=WINDOW_START + dt.timedelta(days=31)),
    )
    old = [(1, WINDOW_START + dt.timedelta(days=1), b"old"), (2, WINDOW_START + dt.timedelta(days=40), b"kept")]
    new = [(1, WINDOW_START + dt.timedelta(days=2), b"new"), (3, WINDOW_START, None)]
    pg.seed_target(plan, old)
    table, invocation = bind(plan)
    target = _WriterDuringPublish(pg._connect, pg.copy_connect, table, verification=verification)  # type: ignore[arg-type]
    target._dsn = pg.dsn  # type: ignore[attr-defined]
    _WriterDuringPublish.attempts = []
    try:
        target.prepare(invocation)
        target.load_chunk(invocation, 0, sealed_chunk(invocation, 0, new))
        expected = evidence(plan, 0, new)
        assert target.verify_chunk(invocation, expected) == expected
        receipt = target.publish(invocation, [expected])
        assert _WriterDuringPublish.attempts == ["blocked"]
        assert receipt.rows == 2
        assert sorted(pg.read_target(plan) or []) == sorted([*new, old[1]])
    finally:
        target.close()
        pg.close()


UNWRITABLE = {
    "generated": "k bigint NOT NULL, ts timestamp(3) with time zone NOT NULL, note bytea GENERATED ALWAYS AS (NULL) STORED",
    "identity_always": "k bigint GENERATED ALWAYS AS IDENTITY, ts timestamp(3) with time zone NOT NULL, note bytea",
    "identity_by_default": "k bigint GENERATED BY DEFAULT AS IDENTITY, ts timestamp(3) with time zone NOT NULL, "
    "note bytea",  # control: an explicit value is written as given
}


@pytest.mark.parametrize("definition", sorted(UNWRITABLE))
def test_a_window_target_whose_loaded_column_an_insert_cannot_write_is_refused_at_prepare(
    pg: PostgresHarness, definition: str
) -> None:
    """A generated column, or an identity ``GENERATED ALWAYS``, among the loaded columns makes the window's INSERT
    fail at publication, after the whole load: prepare refuses the target before anything is staged. An identity
    ``BY DEFAULT`` takes the value given, and the window is published and verified."""
    plan = TargetPlan(
        invocation_id="window-unwritable-1",
        target_schema=pg.schema,
        target_table="windowed",
        columns=(
            TargetColumn(name="k", source_type="Int64"),
            TargetColumn(name="ts", source_type="DateTime64(3, 'UTC')"),
            TargetColumn(name="note", source_type="Nullable(String)"),
        ),
        mode=PublicationMode.WINDOW_REPLACE,
        window=UtcWindow(column="ts", start=WINDOW_START, end=WINDOW_START + dt.timedelta(days=31)),
    )
    with psycopg.connect(pg.dsn, autocommit=True) as admin:
        admin.execute(f"CREATE TABLE {qualified(pg.schema, 'windowed')} ({UNWRITABLE[definition]})")
    table, invocation = bind(plan)
    target = PostgresTransferTarget(pg._connect, pg.copy_connect, table)
    rows = [(7, WINDOW_START, None)]
    try:
        if definition != "identity_by_default":
            with pytest.raises(DponeError) as refused:
                target.prepare(invocation)
            assert refused.value.code == "native_transfer.target_schema_mismatch"
            assert "cannot write" in str(refused.value)
            return
        target.prepare(invocation)
        target.load_chunk(invocation, 0, sealed_chunk(invocation, 0, rows))
        expected = evidence(plan, 0, rows)
        assert target.verify_chunk(invocation, expected) == expected
        assert target.publish(invocation, [expected]).rows == 1
        assert pg.read_target(plan) == rows
    finally:
        target.close()
        pg.close()
