"""The publication's content digest over the whole column profile, on the real engines of the embedded cluster.

The reference digest is computed from the artifact's bytes on the coordinator (``reference_digest``); every member
loads the same bytes and digests its candidate (``observe_table``). For every admitted type at its boundaries (and
NULL, ``-0.0``, NaN, infinities, empty and NUL-padded strings, the widest integers and decimals, time zones), the
two must be equal, and a one-value difference must change the digest.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from airflow_provider_dpone.cluster.ports import ColumnSpec, TableRead, TableSpec
from airflow_provider_dpone.cluster.values.receipts import CONTENT_DIGEST_V2, ArtifactReceipt
from airflow_provider_dpone.core.column_profile import unsupported_type
from tests.support.cluster.port_backends import EmbeddedBackend, open_backend

pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2)]

CORPUS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Int8", ("-128", "127", "0")),
    ("UInt64", ("0", "18446744073709551615", "1")),
    ("Int128", ("-170141183460469231731687303715884105728", "170141183460469231731687303715884105727", "0")),
    ("UInt256", ("0", "115792089237316195423570985008687907853269984665640564039457584007913129639935", "7")),
    ("Float32", ("-0.0", "inf", "nan")),
    ("Float64", ("0.0", "-inf", "1e-320")),
    ("Bool", ("true", "false", "true")),
    ("String", ("''", "'a\\0b'", "'\u00e9\u6f22\U0001f600'")),
    ("FixedString(3)", ("''", "'ab'", "'abc'")),
    (
        "UUID",
        (
            "'00000000-0000-0000-0000-000000000000'",
            "'ffffffff-ffff-ffff-ffff-ffffffffffff'",
            "'61f0c404-5cb3-11e7-907b-a6006ad3dba0'",
        ),
    ),
    ("IPv4", ("'0.0.0.0'", "'255.255.255.255'", "'10.1.2.3'")),
    ("IPv6", ("'::'", "'::ffff:1.2.3.4'", "'ffff::1'")),
    ("Date", ("'1970-01-01'", "'2149-06-06'", "'2026-12-03'")),
    ("Date32", ("'1900-01-01'", "'2299-12-31'", "'1969-12-31'")),
    ("DateTime('UTC')", ("0", "4294967295", "1")),
    ("DateTime('Europe/Berlin')", ("'2026-03-29 02:30:00'", "0", "'2026-10-25 02:30:00'")),
    ("DateTime64(3, 'UTC')", ("'1900-01-01 00:00:00.000'", "'2299-12-31 23:59:59.999'", "0")),
    ("DateTime64(9, 'Asia/Tokyo')", ("'2262-04-11 08:47:16.854775807'", "'1970-01-01 09:00:00.000000001'", "0")),
    ("Decimal(9, 2)", ("-9999999.99", "9999999.99", "0")),
    ("Decimal(18, 4)", ("-99999999999999.9999", "0.0001", "0")),
    ("Decimal(38, 10)", ("'-9999999999999999999999999999.9999999999'", "1", "0")),
    ("Decimal(76, 20)", ("'99999999999999999999999999999999999999999999999999999999.99999999999999999999'", "-1", "0")),
)


def _columns() -> tuple[tuple[str, str], ...]:
    """Each corpus type as a column, and again as a ``Nullable`` column."""
    plain = tuple((f"c{index}", type_) for index, (type_, _) in enumerate(CORPUS))
    return plain + tuple((f"n{index}", f"Nullable({type_})") for index, (type_, _) in enumerate(CORPUS))


def _query(columns: Sequence[tuple[str, str]], change: tuple[int, str] | None = None) -> str:
    """One row per corpus value position; the nullable copies are NULL in the last row; ``change`` replaces one
    value of the first row."""
    selects = []
    for row in range(3):
        values = []
        for index, (name, type_) in enumerate(columns):
            literal = CORPUS[index % len(CORPUS)][1][row]
            if change is not None and row == 0 and change[0] == index:
                literal = change[1]
            null = name.startswith("n") and row == 2
            values.append(f"{'NULL' if null else f'CAST({literal} AS {type_})'}::{type_} AS `{name}`")
        selects.append("SELECT " + ", ".join(values))
    return " UNION ALL ".join(selects)


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddedBackend]:
    instance = open_backend("embedded", request, tmp_path)
    assert isinstance(instance, EmbeddedBackend)
    try:
        yield instance
    finally:
        instance.close()


def _seal(backend: EmbeddedBackend, columns: Sequence[tuple[str, str]], query: str) -> ArtifactReceipt:
    return backend.adapters.query_source(query=query, columns=columns, max_source_bytes=1 << 24).seal()


def _load_everywhere(backend: EmbeddedBackend, receipt: ArtifactReceipt) -> list[str]:
    """The artifact loaded into a fresh candidate on every member; returns the candidate names."""
    spec = TableSpec(columns=tuple(ColumnSpec(name=n, type=t) for n, t in receipt.schema_pairs))
    names = []
    for member_id in backend.inventory.member_ids:
        session = backend.ports.sessions.session(backend.inventory.member(member_id))
        name, value = f"cand_{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
        session.create_table(backend.database, name, value, spec)
        session.load(
            backend.database,
            name,
            value,
            backend.ports.artifacts.open(receipt),
            query_id=f"dpone-load-{uuid.uuid4().hex}",
            dedup_token=uuid.uuid4().hex,
        )
        names.append(name)
    return names


def test_the_corpus_covers_the_column_profile() -> None:
    assert all(unsupported_type(type_) is None for _, type_ in _columns())
    families = {type_.split("(")[0] for type_, _ in CORPUS}
    assert families >= {"Int8", "UInt64", "Int128", "UInt256", "Float32", "Float64", "Bool", "String", "FixedString"}
    assert families >= {"UUID", "IPv4", "IPv6", "Date", "Date32", "DateTime", "DateTime64", "Decimal"}


def test_reference_digest_from_the_artifact_equals_every_member_digest(backend: EmbeddedBackend) -> None:
    columns = _columns()
    receipt = _seal(backend, columns, _query(columns))
    assert (receipt.row_count, receipt.content_digest_version) == (3, CONTENT_DIGEST_V2)
    for member_id, name in zip(backend.inventory.member_ids, _load_everywhere(backend, receipt), strict=True):
        session = backend.ports.sessions.session(backend.inventory.member(member_id))
        observed = session.observe_table(TableRead(backend.database, name, with_content=True))
        assert (observed.row_count, observed.content_digest) == (3, receipt.content_digest), name


@pytest.mark.parametrize(
    ("index", "literal"),
    [
        (4, "0.0"),  # Float32 -0.0 -> 0.0
        (5, "-0.0"),  # Float64 0.0 -> -0.0
        (7, "'\\0'"),  # String '' -> one NUL byte
        (8, "'\\0'"),  # FixedString(3) '' (three NULs) -> one NUL (padded: equal bytes, so equal digests)
        (15, "'2026-03-29 03:30:00'"),  # DateTime('Europe/Berlin'): the same wall clock text in summer time
        (21, "'1'"),  # Decimal(76, 20)
    ],
)
def test_one_changed_value_changes_the_digest(backend: EmbeddedBackend, index: int, literal: str) -> None:
    columns = _columns()
    base = _seal(backend, columns, _query(columns))
    changed = _seal(backend, columns, _query(columns, (index, literal)))
    padded_equal = CORPUS[index][0].startswith("FixedString")
    assert (changed.content_digest == base.content_digest) == padded_equal
