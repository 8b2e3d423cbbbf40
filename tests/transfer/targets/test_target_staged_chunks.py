"""The staged chunks a publication finds are refused with details that say what happened to which ordinal."""

from __future__ import annotations

import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.targets.sql_target import check_staged_chunks
from airflow_provider_dpone.transfer.values.target_receipts import ChunkEvidence, TargetPublication

pytestmark = pytest.mark.unit

REQUEST = TargetPublication(
    chunks=tuple(ChunkEvidence(ordinal=o, rows=rows, typed_sum="0" * 64) for o, rows in enumerate((4, 4, 4, 0)))
)
"""Chunks 0-2 verified with 4 rows each; chunk 3 with none (a chunk without rows stores nothing)."""


def _refused(counts: dict[int, int]) -> str:
    with pytest.raises(DponeError) as refused:
        check_staged_chunks(counts, REQUEST)
    assert refused.value.code == "native_transfer.target_staging_incomplete"
    return str(refused.value.detail)


def test_the_requested_chunks_exactly_are_accepted() -> None:
    check_staged_chunks({0: 4, 1: 4, 2: 4}, REQUEST)


def test_a_chunk_with_one_row_too_many_is_named_as_such_never_as_missing_or_short() -> None:
    detail = _refused({0: 4, 1: 5, 2: 4})
    assert detail == "3 staged chunks, 3 requested; more rows than verified: [1: 5 of 4]"


def test_a_chunk_with_rows_lost_is_named_apart_from_one_not_staged() -> None:
    detail = _refused({0: 3, 1: 4})
    assert detail == "2 staged chunks, 3 requested; requested, not staged: [2]; fewer rows than verified: [0: 3 of 4]"


def test_an_ordinal_nobody_requested_is_named() -> None:
    detail = _refused({-1: 1, 0: 4, 1: 4, 2: 6})
    assert detail == "4 staged chunks, 3 requested; ordinals not requested: [-1]; more rows than verified: [2: 6 of 4]"
