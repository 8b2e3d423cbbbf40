"""Chunk boundaries of the producer: ``chunk_rows`` and ``max_chunk_bytes`` bound every sealed chunk, whether a
source block is taken whole (it fits the chunk's byte room) or slice by slice, and the typed sum of each chunk is
the sum over its own rows (the target's verification and the publication prove it: the route succeeds and the
target holds exactly the source multiset)."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from pathlib import Path

import pytest

from airflow_provider_dpone.core.manifest.transfer_options import NativeTransferOptions
from airflow_provider_dpone.transfer.route.admission import SourceRequest
from airflow_provider_dpone.transfer.route.extraction import SLICE_ROWS
from airflow_provider_dpone.transfer.route.journal import RouteJournal
from airflow_provider_dpone.transfer.route.states import fold
from airflow_provider_dpone.transfer.storage import ObjectJournalStore
from tests.support.fakes.transfer_source import FakeSnapshotSource, FakeTable
from tests.support.transfer.native_route_harness import COLUMNS, OPERATION, Harness, multiset, t

pytestmark = pytest.mark.protocol

ROWS = 2500
CHUNK_ROWS = 2000


@dataclasses.dataclass
class _BlockHarness(Harness):
    block_rows: int = 500

    def request(self) -> SourceRequest:
        return dataclasses.replace(super().request(), block_rows=self.block_rows)


def _sealed_rows(tmp_path: Path, *, max_chunk_bytes: int, block_rows: int) -> list[int]:
    table = FakeTable(columns=list(COLUMNS), engine_args="ver, is_deleted", sorting_key="id")
    table.insert([(i, 1, 0, b"x" * 200, t(1), Decimal(i) / 4) for i in range(ROWS)])
    options = NativeTransferOptions.model_validate(
        {
            "source_snapshot": {"mode": "exact_raw_rows"},
            "execution": {"chunk_rows": CHUNK_ROWS, "max_chunk_bytes": max_chunk_bytes},
        }
    )
    harness = _BlockHarness(
        root=tmp_path, source=FakeSnapshotSource({("db", "events"): table}), options=options, block_rows=block_rows
    )
    assert harness.run().rows == ROWS
    assert multiset(harness.target.rows()) == harness.source_rows()
    view = fold(RouteJournal(ObjectJournalStore(f"file://{tmp_path}", OPERATION)).load())[-1]
    return [receipt.rows for receipt in view.receipts]


@pytest.mark.parametrize("block_rows", [700, ROWS])
def test_blocks_that_fit_are_taken_whole_up_to_chunk_rows(tmp_path: Path, block_rows: int) -> None:
    assert _sealed_rows(tmp_path, max_chunk_bytes=64 * 1024 * 1024, block_rows=block_rows) == [CHUNK_ROWS, 500]


def test_blocks_beyond_the_byte_room_are_sealed_by_bytes(tmp_path: Path) -> None:
    # about 250 bytes a row: the block does not fit 64 KiB, so it is taken slice by slice (SLICE_ROWS) and each
    # slice already reaches the byte bound
    assert _sealed_rows(tmp_path, max_chunk_bytes=64 * 1024, block_rows=ROWS) == [SLICE_ROWS, SLICE_ROWS, 452]
