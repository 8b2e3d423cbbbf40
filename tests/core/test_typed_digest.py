"""The typed multiset digest: order- and chunk-independent, duplicate-sensitive, representation-independent."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.typed_digest import LogicalType, MultisetDigest, TypedColumn, row_hash

pytestmark = pytest.mark.unit

COLS = [
    TypedColumn(name="id", logical=LogicalType.INTEGER),
    TypedColumn(name="s", logical=LogicalType.STRING, nullable=True),
    TypedColumn(name="d", logical=LogicalType.DECIMAL, nullable=True, scale=4),
    TypedColumn(name="t", logical=LogicalType.DATETIME, scale=3),
]


def _digest(rows: list[tuple[object, ...]]) -> str:
    acc = MultisetDigest(COLS)
    acc.add_rows(rows)
    return acc.hexdigest


def test_null_empty_and_zero_are_distinct() -> None:
    t = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert len({row_hash(COLS, (1, v, None, t)) for v in (None, "", "0")}) == 3
    assert row_hash(COLS, (1, None, Decimal(0), t)) != row_hash(COLS, (1, None, None, t))


def test_representations_of_one_value_hash_equally() -> None:
    naive = dt.datetime(2026, 1, 1, 12, 0, 0, 123000)
    aware = naive.replace(tzinfo=dt.UTC)
    assert row_hash(COLS, (7, b"abc", Decimal("1.5"), naive)) == row_hash(COLS, (7, "abc", Decimal("1.5000"), aware))
    uid = uuid.uuid4()
    col = [TypedColumn(name="u", logical=LogicalType.UUID)]
    assert row_hash(col, (uid,)) == row_hash(col, (str(uid),)) == row_hash(col, (uid.bytes,))


def test_duplicates_are_counted_not_cancelled() -> None:
    t = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    row = (1, "a", None, t)
    assert _digest([row]) != _digest([row, row])
    assert _digest([row, row]) != _digest([])


@pytest.mark.parametrize(
    ("column", "value"),
    [
        (TypedColumn(name="x", logical=LogicalType.INTEGER), 1.0),
        (TypedColumn(name="x", logical=LogicalType.INTEGER), True),
        (TypedColumn(name="x", logical=LogicalType.INTEGER), None),
        (TypedColumn(name="x", logical=LogicalType.DECIMAL, scale=2), Decimal("1.001")),
        (TypedColumn(name="x", logical=LogicalType.DATETIME, scale=0), dt.datetime(2026, 1, 1, 0, 0, 0, 5)),
    ],
)
def test_values_outside_the_type_are_refused(column: TypedColumn, value: object) -> None:
    with pytest.raises(DponeError) as info:
        row_hash([column], (value,))
    assert info.value.code == "DPONE_TYPED_VALUE_INVALID"


@given(
    st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.one_of(st.none(), st.text(max_size=5))), max_size=30),
    st.randoms(use_true_random=False),
    st.integers(min_value=1, max_value=7),
)
def test_digest_ignores_order_and_chunking(rows: list[tuple[int, str | None]], rnd: object, chunk: int) -> None:
    cols = COLS[:2]
    whole = MultisetDigest(cols)
    whole.add_rows(rows)
    shuffled = list(rows)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    merged = MultisetDigest(cols)
    for start in range(0, len(shuffled), chunk):
        part = MultisetDigest(cols)
        part.add_rows(shuffled[start : start + chunk])
        merged.merge(part.rows, part.total)
    assert (merged.rows, merged.hexdigest) == (whole.rows, whole.hexdigest)
