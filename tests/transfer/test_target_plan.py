"""Target plan: deterministic, bounded, validated names; closed and consistent publication shape; receipts."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import validate_identifier
from airflow_provider_dpone.core.typed_digest import MultisetDigest
from airflow_provider_dpone.transfer.values.target import PublicationMode, TargetColumn, TargetPlan
from airflow_provider_dpone.transfer.values.target_receipts import (
    ChunkEvidence,
    TargetPublication,
    TargetPublicationReceipt,
)
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow

pytestmark = pytest.mark.unit

UTC = dt.UTC
COLS = (TargetColumn(name="id", source_type="UInt64"), TargetColumn(name="ts", source_type="DateTime64(3, 'UTC')"))
WINDOW = UtcWindow(column="ts", start=dt.datetime(2026, 1, 1, tzinfo=UTC), end=dt.datetime(2026, 1, 2, tzinfo=UTC))


def _plan(**changes: object) -> TargetPlan:
    fields: dict[str, object] = {
        "invocation_id": "inv-0001-abcdef",
        "target_schema": "dbo",
        "target_table": "events",
        "columns": COLS,
        "mode": PublicationMode.FULL_REFRESH,
    }
    fields.update(changes)
    return TargetPlan.model_validate(fields)


def test_names_are_deterministic_bounded_and_valid_identifiers() -> None:
    plan, again = _plan(), _plan()
    assert plan.staging_table == again.staging_table and plan.publication_id == again.publication_id
    for name in (plan.staging_table, plan.retired_table, plan.staging_index):
        assert validate_identifier(name) == name and len(name) <= 63
    assert plan.staging_table.startswith("__dpone_stg_")


def test_names_separate_invocations_and_targets() -> None:
    base = _plan()
    assert _plan(invocation_id="inv-0002-abcdef").staging_table != base.staging_table
    assert _plan(target_table="other").staging_table != base.staging_table
    assert _plan(invocation_id="inv-0002-abcdef").publication_id != base.publication_id
    window_plan = _plan(mode=PublicationMode.WINDOW_REPLACE, window=WINDOW)
    assert window_plan.publication_id != base.publication_id


def test_lock_key_is_a_signed_bigint() -> None:
    assert -(2**63) <= _plan().lock_key < 2**63
    assert len(_plan().lock_resource) <= 255


@pytest.mark.parametrize(
    "changes",
    [
        {"invocation_id": "short"},
        {"invocation_id": "has space in it"},
        {"target_table": "__dpone_stg_x"},
        {"target_table": "bad-name"},
        {"columns": (TargetColumn(name="a", source_type="Int32"), TargetColumn(name="A", source_type="Int32"))},
        {"mode": PublicationMode.WINDOW_REPLACE},
        {"window": WINDOW},
        {
            "mode": PublicationMode.WINDOW_REPLACE,
            "window": UtcWindow(column="id", start=WINDOW.start, end=WINDOW.end),
        },
    ],
)
def test_inconsistent_plans_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises((DponeError, ValidationError)):
        _plan(**changes)


def test_reserved_column_prefix_is_refused() -> None:
    with pytest.raises(DponeError, match="target_plan_invalid"):
        TargetColumn(name="__dpone_chunk", source_type="Int32")


def test_window_must_be_aware_utc_and_ordered() -> None:
    with pytest.raises(DponeError):
        UtcWindow(column="ts", start=dt.datetime(2026, 1, 1), end=dt.datetime(2026, 1, 2, tzinfo=UTC))
    with pytest.raises(DponeError):
        UtcWindow(column="ts", start=WINDOW.end, end=WINDOW.start)
    plus_one = dt.timezone(dt.timedelta(hours=1))
    with pytest.raises(DponeError):
        UtcWindow(column="ts", start=dt.datetime(2026, 1, 1, tzinfo=plus_one), end=WINDOW.end)


def test_date_window_needs_midnight_bounds() -> None:
    cols = (TargetColumn(name="d", source_type="Date"),)
    noon = dt.datetime(2026, 1, 1, 12, tzinfo=UTC)
    with pytest.raises(DponeError):
        _plan(
            columns=cols,
            mode=PublicationMode.WINDOW_REPLACE,
            window=UtcWindow(column="d", start=noon, end=WINDOW.end),
        )
    ok = UtcWindow(column="d", start=WINDOW.start, end=WINDOW.end)
    assert _plan(columns=cols, mode=PublicationMode.WINDOW_REPLACE, window=ok).window == ok


def _expectation(ordinal: int, rows: list[tuple[object, ...]]) -> ChunkEvidence:
    acc = MultisetDigest(_plan().typed_columns)
    acc.add_rows(rows)
    return ChunkEvidence.of(ordinal, acc)


def test_publication_digest_folds_chunks_independently_of_chunking() -> None:
    t = dt.datetime(2026, 1, 1, tzinfo=UTC)
    rows = [(i, t) for i in range(5)]
    split = TargetPublication(chunks=(_expectation(0, rows[:2]), _expectation(1, rows[2:])))
    whole = TargetPublication(chunks=(_expectation(0, rows),))
    assert (split.rows, split.digest) == (whole.rows, whole.digest)
    assert TargetPublication().rows == 0
    assert split.chunk_rows == {0: 2, 1: 3}


def test_publication_chunks_must_be_contiguous() -> None:
    t = dt.datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(DponeError, match="contiguous"):
        TargetPublication(chunks=(_expectation(1, [(1, t)]),))


def test_receipt_conflict() -> None:
    plan = _plan()
    request = TargetPublication(chunks=(_expectation(0, [(1, dt.datetime(2026, 1, 1, tzinfo=UTC))]),))
    receipt = TargetPublicationReceipt(
        publication_id=plan.publication_id,
        invocation_id=plan.invocation_id,
        target_schema="dbo",
        target_table="events",
        mode=plan.mode,
        rows=request.rows,
        digest=request.digest,
        committed_at=dt.datetime(2026, 1, 1, 0, 0, 1),
    )
    assert receipt.require_matches(request) is receipt
    assert receipt.committed_at.tzinfo is UTC
    with pytest.raises(DponeError, match="target_receipt_conflict"):
        receipt.require_matches(TargetPublication())
