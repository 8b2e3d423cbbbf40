"""The exactness corpus of the native route: source tables every target must publish exactly (as a raw multiset).

One corpus, every target: ``native_route_scenarios.RouteCorpus`` runs it on PostgreSQL (here) and on SQL Server
(``make test-real``, BCP and parameterized batches). Each table is a ReplacingMergeTree whose raw rows differ from its
``FINAL`` view, created through any ClickHouse client (the in-process engine or a server over HTTP):

* ``events``: narrow; duplicate keys, identical duplicates, versions, a delete marker, NULL and '' (7 rows);
* ``bounds``: every admitted type at its minimum and its maximum, zeros and empties, NULL in every nullable type;
* ``large``: ``String`` values over 8,000 bytes (every byte value; 100,000 bytes), '' and NULL, stored as binary;
* ``large_text``: the same under ``string_mapping: text`` (multi-byte and astral characters, over 4,000 UTF-16 units);
* ``wide``: 100 columns cycling through the admitted types, NULLs and an identical duplicate row.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Final

from airflow_provider_dpone.core.manifest.transfer import StringMapping
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from tests.support.transfer.native_route_pg import EVENT_BATCHES, EVENTS


@dataclass(frozen=True)
class CorpusTable:
    """One source table: its columns, its ReplacingMergeTree keys and the statements that fill it (one part each)."""

    name: str
    columns: str
    engine: str
    inserts: tuple[str, ...]
    rows: int
    string_mapping: StringMapping = StringMapping.BINARY

    def create(self, admin: Any, database: str) -> RelationRef:
        admin.command(f"CREATE TABLE {database}.{self.name} {self.columns} ENGINE = {self.engine}")
        for statement in self.inserts:
            admin.command(f"INSERT INTO {database}.{self.name} {statement}")
        return RelationRef(database=database, table=self.name)


EVENTS_TABLE: Final = CorpusTable(
    "events",
    EVENTS,
    "ReplacingMergeTree(ver, is_deleted) PARTITION BY toYYYYMM(ts) ORDER BY id",
    tuple(f"VALUES {batch}" for batch in EVENT_BATCHES),
    rows=7,
)

_BOUNDS_COLUMNS: Final = (
    "(k UInt32, i8 Int8, u8 UInt8, i16 Int16, u16 UInt16, i32 Int32, u32 UInt32, i64 Int64, u64 UInt64, "
    "d9 Decimal(9, 2), d18 Decimal(18, 6), d38 Decimal(38, 10), d38i Decimal(38, 0), s String, fs FixedString(4), "
    "lc LowCardinality(String), b Bool, day Date, day32 Date32, t DateTime('UTC'), t3 DateTime64(3, 'UTC'), "
    "t6 DateTime64(6, 'UTC'), id UUID, ni Nullable(Int64), nd Nullable(Decimal(38, 10)), ns Nullable(String), "
    "nt Nullable(DateTime64(6, 'UTC')), nday Nullable(Date32), nid Nullable(UUID), nb Nullable(Bool), v UInt64)"
)
_D38: Final = "9999999999999999999999999999.9999999999"
_D38I: Final = "9" * 38
_BOUNDS_MIN: Final = (
    "(1, -128, 0, -32768, 0, -2147483648, 0, -9223372036854775808, 0, -9999999.99, -999999999999.999999, "
    f"-{_D38}, -{_D38I}, unhex('ff00fe'), unhex('00000000'), '', false, '1970-01-01', '1900-01-01', "
    "'1970-01-01 00:00:00', '1900-01-01 00:00:00.000', '1900-01-01 00:00:00.000000', "
    "'00000000-0000-0000-0000-000000000000', NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1)"
)
_BOUNDS_MAX: Final = (
    "(2, 127, 255, 32767, 65535, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615, 9999999.99, "
    f"999999999999.999999, {_D38}, {_D38I}, 'ab', 'abcd', 'max', true, '2149-06-06', '2299-12-31', "
    "'2106-02-07 06:28:15', '2299-12-31 23:59:59.999', '2299-12-31 23:59:59.999999', "
    "'ffffffff-ffff-ffff-ffff-ffffffffffff', 9223372036854775807, "
    f"{_D38}, unhex('00'), '2299-12-31 23:59:59.999999', '2299-12-31', 'ffffffff-ffff-ffff-ffff-ffffffffffff', "
    "true, 1)"
)
_BOUNDS_SMALL: Final = (
    "(3, 0, 1, 0, 1, 0, 1, 0, 1, 0.01, -0.000001, 0.0000000001, 0, '', 'a', 'lc', false, '2026-03-01', "
    "'2026-03-01', '2026-03-01 12:00:00', '2026-03-01 12:00:00.001', '2026-03-01 12:00:00.000001', "
    "'01234567-89ab-cdef-0123-456789abcdef', 0, -0.0000000001, '', '1970-01-01 00:00:00.000000', '1970-01-01', "
    "'01234567-89ab-cdef-0123-456789abcdef', false, 1)"
)
BOUNDS_TABLE: Final = CorpusTable(
    "bounds",
    _BOUNDS_COLUMNS,
    "ReplacingMergeTree(v) ORDER BY k",
    (f"VALUES {_BOUNDS_MIN}", f"VALUES {_BOUNDS_MAX}", f"VALUES {_BOUNDS_SMALL}", f"VALUES {_BOUNDS_SMALL}"),
    rows=4,
)
"""Minimum, maximum, and the small-and-empty row twice (an identical duplicate in another part)."""

_EVERY_BYTE: Final = "".join(f"{byte:02x}" for byte in range(256))
LARGE_TABLE: Final = CorpusTable(
    "large",
    "(id UInt32, v UInt64, b String, nb Nullable(String))",
    "ReplacingMergeTree(v) ORDER BY id",
    (
        f"SELECT 1, 1, repeat(unhex('{_EVERY_BYTE}'), 40), NULL",  # 10,240 bytes: every byte value, NULs too
        "SELECT 2, 1, repeat(unhex('00ff'), 50000), ''",  # 100,000 bytes
        f"SELECT 3, 1, '', repeat(unhex('{_EVERY_BYTE}'), 32)",  # 8,192 bytes: just over 8,000
        "SELECT 3, 2, unhex('00'), NULL",
    ),
    rows=4,
)
LARGE_TEXT_TABLE: Final = CorpusTable(
    "large_text",
    "(id UInt32, v UInt64, t String, nt Nullable(String))",
    "ReplacingMergeTree(v) ORDER BY id",
    (
        "SELECT 1, 1, repeat('é€😀', 3000), NULL",  # 27,000 bytes, 12,000 UTF-16 units, surrogate pairs
        "SELECT 2, 1, '', 'ascii'",
        "SELECT 3, 1, repeat('x', 9000), ''",
        "SELECT 3, 2, 'ẞ', repeat('ü', 4001)",
    ),
    rows=4,
    string_mapping=StringMapping.TEXT,
)

_WIDE_TYPES: Final = (
    "Int32",
    "Nullable(String)",
    "Decimal(18, 4)",
    "DateTime64(3, 'UTC')",
    "UInt64",
    "Bool",
    "Date32",
    "UUID",
    "FixedString(3)",
    "Nullable(Int64)",
)
WIDE_COLUMNS: Final = 100


def _wide_literal(type_text: str, row: int, column: int) -> str:
    """A deterministic value of ``type_text`` for one cell (NULL in a nullable column every third cell)."""
    seed = row * WIDE_COLUMNS + column
    if type_text.startswith("Nullable") and seed % 3 == 0:
        return "NULL"
    literals = {
        "Int32": str(seed if row % 2 else -seed),
        "Nullable(String)": "''" if seed % 3 == 1 else f"'v{seed}'",
        "Decimal(18, 4)": f"{'-' if row % 2 else ''}{seed}.{column:04d}",
        "DateTime64(3, 'UTC')": f"'2026-01-{row + 1:02d} 00:{column % 60:02d}:00.{seed % 1000:03d}'",
        "UInt64": str(2**63 + seed),
        "Bool": "true" if seed % 2 else "false",
        "Date32": f"'2026-02-{row + 1:02d}'",
        "UUID": f"'{uuid.UUID(int=seed * 7919)}'",
        "FixedString(3)": f"'{chr(97 + seed % 26)}'",
        "Nullable(Int64)": str(-(2**62) - seed),
    }
    return literals[type_text]


def _wide_row(row: int) -> str:
    types = [_WIDE_TYPES[column % len(_WIDE_TYPES)] for column in range(WIDE_COLUMNS)]
    return "(" + ", ".join(_wide_literal(t, row, c) for c, t in enumerate(types)) + ")"


WIDE_TABLE: Final = CorpusTable(
    "wide",
    "(" + ", ".join(f"c{c:03d} {_WIDE_TYPES[c % len(_WIDE_TYPES)]}" for c in range(WIDE_COLUMNS)) + ")",
    "ReplacingMergeTree ORDER BY c000",
    tuple(f"VALUES {_wide_row(row)}" for row in (0, 1, 2, 1)),
    rows=4,
)
"""Rows 0, 1, 2 and row 1 again (an identical duplicate in another part): FINAL would keep three."""

CORPUS: Final = (EVENTS_TABLE, BOUNDS_TABLE, LARGE_TABLE, LARGE_TEXT_TABLE, WIDE_TABLE)
