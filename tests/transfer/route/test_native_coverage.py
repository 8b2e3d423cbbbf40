"""The touched-part coverage of the one SELECT, summed over whole offset arrays, equals the per-row definition.

The reference below is the definition written out row by row (count, the sum of each offset's hash modulo 2**64,
min/max per part; the hash is ClickHouse's ``intHash64``, checked against the engine in
``tests/transfer/source/test_native_source_chdb.py``). The tracker must give the same entries for one-part and mixed blocks, for offsets given as a
list or as the unsigned array the reader hands over, and near 2**64 where the sums wrap; and it must refuse a part
outside the profile, an offset outside its part, and missing or non-integer provenance.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.route.physical import CoverageTracker
from airflow_provider_dpone.transfer.values.raw_snapshot_physical import (
    PartCoverage,
    PhysicalPart,
    PhysicalProfile,
    offset_hash,
)

pytestmark = pytest.mark.unit

MASK = (1 << 64) - 1
BIG = 1 << 62  # offsets this large exercise the hash's full 64-bit input


def _profile(limits: dict[str, int]) -> PhysicalProfile:
    parts = tuple(
        PhysicalPart(
            name=name,
            partition_id="all",
            kind="base",
            rows=rows,
            level=0,
            data_version=index,
            min_block=index,
            max_block=index,
            checksum=f"{index:032x}",
            has_lightweight_delete=False,
        )
        for index, (name, rows) in enumerate(sorted(limits.items()))
    )
    return PhysicalProfile(relation_uuid="0" * 32, partition_ids=None, parts=parts)


def _reference(blocks: list[tuple[list[str], list[int]]]) -> list[PartCoverage]:
    acc: dict[str, list[int]] = {}
    for parts, offsets in blocks:
        for part, offset in zip(parts, offsets, strict=True):
            entry = acc.setdefault(part, [0, 0, offset, offset])
            entry[0] += 1
            entry[1] = (entry[1] + offset_hash(offset)) & MASK
            entry[2] = min(entry[2], offset)
            entry[3] = max(entry[3], offset)
    return [
        PartCoverage(part=p, rows=e[0], min_offset=e[2], max_offset=e[3], offsets_hash_sum=e[1])
        for p, e in sorted(acc.items())
    ]


@pytest.mark.parametrize("as_array", [False, True])
def test_coverage_equals_the_per_row_definition(as_array: bool) -> None:
    limits = {"all_1_1_0": 5000, "all_2_2_0": 3000, "all_3_3_0": BIG + 10_000}
    rng = random.Random(7)
    blocks: list[tuple[list[str], list[int]]] = [
        (["all_1_1_0"] * 1000, list(range(1000))),  # one part, in order
        (["all_3_3_0"] * 50, [BIG + rng.randrange(10_000) for _ in range(50)]),  # sums wrap
    ]
    mixed = [rng.choice(sorted(limits)) for _ in range(2000)]
    blocks.append((mixed, [rng.randrange(3000) if p != "all_3_3_0" else BIG + rng.randrange(10_000) for p in mixed]))
    tracker = CoverageTracker(_profile(limits))
    for parts, offsets in blocks:
        tracker.observe(parts, np.array(offsets, dtype=np.uint64) if as_array else offsets, len(parts))
    tracker.observe([], [], 0)
    assert tracker.rows == sum(len(parts) for parts, _ in blocks)
    assert tracker.entries() == _reference(blocks)


@pytest.mark.parametrize(
    ("parts", "offsets", "why"),
    [
        (["all_1_1_0", "gone_9_9_0"], [0, 1], "a part outside the pre-query profile"),
        (["all_1_1_0", "all_1_1_0"], [0, 10], "an offset outside its part"),
        (["all_1_1_0", "gone_9_9_0"], [0, 10], "a part outside the pre-query profile"),
        (["all_1_1_0"], [-1], "an offset outside its part"),
        (["all_1_1_0"], [0.5], "part offsets are not integers"),
        (["all_1_1_0"], [0, 1], "a block lacks part provenance"),
    ],
)
def test_coverage_refuses_incomplete_provenance(parts: list[str], offsets: list[object], why: str) -> None:
    tracker = CoverageTracker(_profile({"all_1_1_0": 10}))
    with pytest.raises(DponeError, match=f"source_provenance_incomplete.*{why}"):
        tracker.observe(parts, offsets, len(parts))  # type: ignore[arg-type]


def test_offset_sets_with_equal_count_bounds_and_moments_differ() -> None:
    """{0,1,5,6,8} and {0,2,3,7,8}: same count, bounds, sum (20) and sum of squares (126); a lost row replaced by
    another of the same part at a different offset must still change the part's coverage."""
    first, second = (CoverageTracker(_profile({"all_1_1_0": 10})) for _ in range(2))
    first.observe(["all_1_1_0"] * 5, [0, 1, 5, 6, 8], 5)
    second.observe(["all_1_1_0"] * 5, [0, 2, 3, 7, 8], 5)
    assert first.entries() != second.entries()
