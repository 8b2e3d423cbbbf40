"""Pre/post-query physical profiles and the touched-part coverage of the one SELECT.

The pre-query profile must contain every base part the query reads: a part that appears in ``_part`` but not in the
profile (for example a merge or insert between preflight and the SELECT) means provenance is incomplete and the
invocation fails. Offsets must lie inside the part's physical row count. Coverage is accumulated per part as a
count, the offset bounds and the multiset hash of the selected offsets (``raw_snapshot_physical.offset_hash``, summed);
row values are never kept. The hash is computed over whole unsigned 64-bit arrays, whose wrap-around is exactly the
hash's and the sum's arithmetic modulo 2**64.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.values.raw_snapshot_physical import (
    MAX_PARTS,
    OFFSET_HASH_MULTIPLIERS,
    OFFSET_HASH_SEED,
    PartCoverage,
    PhysicalPart,
    PhysicalProfile,
)
from airflow_provider_dpone.transfer.values.source_observation import PhysicalObservation, SelectedRows

_MASK: Final = (1 << 64) - 1
_SEED: Final = np.uint64(OFFSET_HASH_SEED)
_MULTIPLIERS: Final = tuple(np.uint64(m) for m in OFFSET_HASH_MULTIPLIERS)
_SHIFT: Final = np.uint64(33)


def offset_hashes(offsets: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """``raw_snapshot_physical.offset_hash`` of every offset, over the whole array."""
    x = offsets ^ _SEED
    for multiplier in _MULTIPLIERS:
        x ^= x >> _SHIFT
        x *= multiplier
    x ^= x >> _SHIFT
    return x


def physical_profile(
    relation_uuid: str, partition_ids: tuple[str, ...] | None, observed: PhysicalObservation
) -> PhysicalProfile:
    if observed.truncated or len(observed.parts) > MAX_PARTS:
        raise DponeError("native_transfer.source_part_cap_exceeded", f"more than {MAX_PARTS} active parts")
    parts = tuple(
        sorted(
            (
                PhysicalPart(
                    name=part.name,
                    partition_id=part.partition_id,
                    kind="patch" if part.name.startswith("patch-") else "base",
                    rows=part.rows,
                    level=part.level,
                    data_version=part.data_version,
                    min_block=part.min_block,
                    max_block=part.max_block,
                    checksum=part.checksum,
                    has_lightweight_delete=part.has_lightweight_delete,
                )
                for part in observed.parts
            ),
            key=lambda part: part.name,
        )
    )
    return PhysicalProfile(relation_uuid=relation_uuid, partition_ids=partition_ids, parts=parts)


class _Acc:
    __slots__ = ("hash_sum", "max_offset", "min_offset", "rows")

    def __init__(self) -> None:
        self.rows = 0
        self.hash_sum = 0
        self.min_offset = -1
        self.max_offset = -1


class CoverageTracker:
    """Checks every selected ``(_part, _part_offset)`` against the pre-query profile and accumulates coverage."""

    def __init__(self, before: PhysicalProfile) -> None:
        self._limits = {name: part.rows for name, part in before.base_parts().items()}
        self._parts: dict[str, _Acc] = {}
        self.rows = 0

    def observe(
        self,
        parts: Sequence[str] | None,
        offsets: Sequence[int] | npt.NDArray[np.integer[Any]] | None,
        rows: int,
    ) -> None:
        if parts is None or offsets is None or len(parts) != rows or len(offsets) != rows:
            raise DponeError("native_transfer.source_provenance_incomplete", "a block lacks part provenance")
        if not rows:
            return
        values = np.asarray(offsets)
        if values.dtype.kind not in "iu":
            raise DponeError("native_transfer.source_provenance_incomplete", "part offsets are not integers")
        first = parts[0]
        if parts.count(first) == rows:
            self._observe_run(first, values)
        else:
            labels = np.array(parts, dtype=object)
            for part in dict.fromkeys(parts):  # first-seen order
                self._observe_run(part, values[labels == part])
        self.rows += rows

    def _observe_run(self, part: str, offsets: npt.NDArray[np.integer[Any]]) -> None:
        """The rows of one part within a block: bounds checked and the offsets' hashes summed over whole arrays."""
        if part not in self._limits:
            raise DponeError("native_transfer.source_provenance_incomplete", "a part outside the pre-query profile")
        low, high = int(offsets.min()), int(offsets.max())
        if low < 0 or high >= self._limits[part]:
            raise DponeError("native_transfer.source_provenance_incomplete", "an offset outside its part")
        wrapped = offsets.astype(np.uint64, copy=False)
        acc = self._parts.get(part)
        if acc is None:
            acc = self._parts[part] = _Acc()
            acc.min_offset = low
        acc.rows += len(offsets)
        acc.hash_sum = (acc.hash_sum + int(offset_hashes(wrapped).sum(dtype=np.uint64))) & _MASK
        acc.min_offset = min(acc.min_offset, low)
        acc.max_offset = max(acc.max_offset, high)

    def require_selected(self, selected: SelectedRows) -> None:
        """The coverage received must be exactly what the server counts for the same SELECT, part by part: a row
        lost, repeated or moved between the server and the stage changes a part's rows or offset hash."""
        if selected.parts is None:
            raise DponeError("native_transfer.source_provenance_incomplete", "the server's count has no parts")
        received, counted = self.entries(), list(selected.parts)
        if received != counted:
            differing = {entry.part for entry in set(received) ^ set(counted)}
            raise DponeError(
                "native_transfer.source_rows_differ",
                f"{len(differing)} of {len(counted)} parts differ from the server's count of the SELECT",
            )

    def entries(self) -> list[PartCoverage]:
        return [
            PartCoverage(
                part=name,
                rows=acc.rows,
                min_offset=acc.min_offset,
                max_offset=acc.max_offset,
                offsets_hash_sum=acc.hash_sum,
            )
            for name, acc in sorted(self._parts.items())
        ]
