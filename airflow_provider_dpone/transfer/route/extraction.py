"""The single producer: one SELECT, bounded typed chunks sealed into the durable stage, EOF sealed atomically.

Bounded memory: at most one source block, one chunk buffer (``chunk_rows`` rows or ``max_chunk_bytes`` bytes,
checked every slice; a block whose bytes fit the chunk's room is one slice) and ``STAGE_WRITES_IN_FLIGHT`` sealed
chunks being written are held. Blocks arrive as Arrow with each row's typed SHA-256 computed by the source; a chunk's
typed sum is the vectorised sum of those hashes (once per chunk, in the writer thread) and the chunk is staged as one
Arrow IPC object (``transfer/values/arrow_chunk.py``): no value is encoded in Python. Each chunk is written as one create-once stage
object before its receipt is journaled, so a receipt always names durable bytes. Stage writes (Arrow IPC encoding,
the object's SHA-256, the durable put) run in one writer thread while the SELECT is read on; receipts are journaled
by this thread in ordinal order, each after its object is durable, and on any failure the writer thread is joined
before the error propagates. The writer thread checks the lease itself right before and right after each put: an
object that landed when custody may already be lost is removed by its own writer, and a late put into a prefix a
recovery has retired fails instead of recreating it, so no stage object outlives the settlement of its invocation.
Duplicates and multiplicity are preserved: rows are never keyed, sorted or merged. Right before the SELECT the
server counts, in its own aggregate statement, the rows the SELECT selects (per part, with the offsets' fingerprint,
when the SELECT carries provenance) and sums their typed row hashes, recomputed over its own values; at EOF the rows
received must be exactly that count, and part by part that coverage, so a row lost, repeated or moved anywhere
between the server and the stage fails the invocation before anything is sealed complete
(``native_transfer.source_rows_differ``), never by counting the decoded batches against themselves; and the chunks'
typed sums must add up to the server's sum, so a row's values and hash changed or replaced by another row's fail
the same way (``native_transfer.source_content_differs``). At EOF the raw route also re-observes the authority (drift fails the invocation), captures the post-query
physical profile, seals the EOF descriptor and writes stage-complete with the extension in one record.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

import pyarrow as pa

from airflow_provider_dpone.core.alerts import PROVENANCE_DRIFT, SOURCE_DRIFT_OBSERVED, AlertSink, emit
from airflow_provider_dpone.core.canonical import canonical_json_bytes
from airflow_provider_dpone.core.canonical import sha256_hex as _sha
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.typed_digest import MODULUS
from airflow_provider_dpone.transfer.ports import SnapshotSourceSession, SourceBlock, StageStore
from airflow_provider_dpone.transfer.route.admission import AdmittedSnapshot, capture_physical, observe_authority
from airflow_provider_dpone.transfer.route.custody import LeaseKeeper
from airflow_provider_dpone.transfer.route.journal import RouteJournal
from airflow_provider_dpone.transfer.route.physical import CoverageTracker
from airflow_provider_dpone.transfer.values.arrow_chunk import encode_chunk, hash_sum
from airflow_provider_dpone.transfer.values.chunk import (
    STAGE_FORMAT,
    ChunkReceipt,
    CompletionMetadata,
    NativeStageComplete,
    typed_sum_hex,
    workload_totals,
)
from airflow_provider_dpone.transfer.values.progress import Checkpoint, OnCheckpoint
from airflow_provider_dpone.transfer.values.raw_snapshot_eof import (
    SourceEof,
    SourceSnapshotExtension,
    vendor_query_id_sha256,
)
from airflow_provider_dpone.transfer.values.raw_snapshot_physical import PhysicalProfile, coverage_sha256
from airflow_provider_dpone.transfer.values.source_observation import SelectedRows

SLICE_ROWS: Final = 1024
STAGE_WRITES_IN_FLIGHT: Final = 2


_STREAM_DRIFT: Final[dict[str, str]] = {
    "native_transfer.source_snapshot_drift": "result",
    "native_transfer.source_endpoint_drift": "endpoint",
}
"""A drift code raised while streaming -> the drifted field the alert names."""


@dataclass(frozen=True)
class _Written:
    """A chunk whose stage object is durable: what its receipt records."""

    ordinal: int
    rows: int
    total: int
    key: str
    sha256: str
    size: int


def stage_key(invocation_id: str, ordinal: int) -> str:
    return f"stage/{invocation_id}/{ordinal:08d}.chunk"


def stage_prefix(invocation_id: str) -> str:
    return f"stage/{invocation_id}/"


def evidence_prefix(invocation_id: str) -> str:
    return f"evidence/{invocation_id}/"


def evidence_key(invocation_id: str, name: str) -> str:
    return f"{evidence_prefix(invocation_id)}{name}.json"


def require_selected_content(selected: SelectedRows, receipts: list[ChunkReceipt]) -> None:
    """The typed sums of the chunks (summed from the row hashes as received) must add up to the server's own sum of
    its row hashes, recomputed in its aggregate statement over its own values: a row whose values and hash were
    changed or replaced by another row's on their way to the stage, with its count and position intact, fails here,
    before the stage is sealed complete."""
    received = workload_totals(receipts)[1]
    if received != selected.typed_sum:
        raise DponeError(
            "native_transfer.source_content_differs",
            f"the row hashes of {len(receipts)} chunks differ from the server's typed sum of the SELECT",
        )


class Producer:
    """Runs one invocation's extraction on an admitted snapshot."""

    def __init__(
        self,
        journal: RouteJournal,
        stage: StageStore,
        lease: LeaseKeeper,
        checkpoint: OnCheckpoint,
        alerts: AlertSink | None = None,
    ) -> None:
        self._alerts = alerts
        self._journal = journal
        self._stage = stage
        self._lease = lease
        self._checkpoint = checkpoint
        self.endpoint_authority_agreement: bool | None = None

    def extract(self, session: SnapshotSourceSession, admitted: AdmittedSnapshot) -> NativeStageComplete:
        plan = admitted.plan
        self._lease.ensure()
        self._journal.append("plan", plan)
        before = capture_physical(session, admitted) if admitted.requirement.raw else None
        tracker = CoverageTracker(before) if before is not None else None
        self._checkpoint(Checkpoint.ADMITTED)
        receipts: list[ChunkReceipt] = []
        streamed = 0
        self._stage.open_prefix(stage_prefix(plan.invocation_id))
        selected = session.selected_rows(admitted.query)
        writer = _StageWriter(self._stage, self._lease, admitted)
        try:
            buffer = _ChunkBuffer()
            try:
                with session.stream(admitted.query) as blocks:
                    for block in blocks:
                        if tracker is not None:
                            tracker.observe(block.parts, block.offsets, block.rows)
                        streamed += block.rows
                        buffer = self._add(block, buffer, writer, receipts, admitted)
                        self._checkpoint(Checkpoint.BLOCK)
            except DponeError as error:
                self._alert_stream_drift(admitted, error)
                raise
            if buffer.rows:
                self._seal(buffer, writer, receipts)
            while writer.pending:
                self._record(writer.oldest(), receipts, admitted)
        finally:
            writer.close()
        self._checkpoint(Checkpoint.EOF)
        if sum(receipt.rows for receipt in receipts) != streamed:
            raise DponeError("native_transfer.source_eof_mismatch", "sealed rows differ from streamed rows")
        if selected.rows != streamed:
            raise DponeError(
                "native_transfer.source_rows_differ", f"the server selects {selected.rows} rows, {streamed} arrived"
            )
        if tracker is not None:
            tracker.require_selected(selected)
        require_selected_content(selected, receipts)
        extension = None
        if tracker is not None and before is not None:
            extension = self._seal_snapshot(session, admitted, before, tracker, streamed)
        metadata = CompletionMetadata(
            stage_format=STAGE_FORMAT, columns_sha256=plan.columns_sha256, source_snapshot_v1=extension
        )
        complete = NativeStageComplete.seal(plan.invocation_id, receipts, metadata)
        self._lease.ensure()
        self._journal.append("stage_complete", complete)
        if extension is not None and extension.source_eof.rows != complete.rows:
            raise DponeError("native_transfer.source_eof_mismatch", "source EOF rows differ from stage-complete rows")
        self._checkpoint(Checkpoint.STAGE_COMPLETE)
        return complete

    def _alert_stream_drift(self, admitted: AdmittedSnapshot, error: DponeError) -> None:
        """A source that changed under the stream (its result's header, columns or types differ from admission, or
        the server reached no longer holds the run's session) raises the provenance-drift alert once."""
        drifted = _STREAM_DRIFT.get(error.code)
        if drifted is not None:
            emit(
                self._alerts,
                PROVENANCE_DRIFT,
                operation_id=admitted.plan.operation_id,
                invocation_id=admitted.plan.invocation_id,
                code=error.code,
                drifted=drifted,
            )

    def _add(
        self,
        block: SourceBlock,
        buffer: _ChunkBuffer,
        writer: _StageWriter,
        receipts: list[ChunkReceipt],
        admitted: AdmittedSnapshot,
    ) -> _ChunkBuffer:
        plan = admitted.plan
        if block.columns.num_columns != len(plan.columns):
            raise DponeError("native_transfer.source_snapshot_drift", "block width differs from the projection")
        if block.columns.num_rows != block.rows or len(block.row_hashes) != block.rows:
            raise DponeError("native_transfer.source_rows_differ", "a block's values, row hashes and rows disagree")
        start = 0
        # A block whose every byte still fits the chunk is taken up to the chunk's row room in one slice: no prefix
        # of it can reach max_chunk_bytes, so slicing it finer would seal at the same row.
        fits = buffer.body_bytes + block.columns.nbytes < plan.max_chunk_bytes
        while start < block.rows:
            room = plan.chunk_rows - buffer.rows
            take = min(block.rows - start, room) if fits else min(block.rows - start, room, SLICE_ROWS)
            buffer.add(block.columns.slice(start, take), block.row_hashes.slice(start, take))
            start += take
            if buffer.rows >= plan.chunk_rows or buffer.body_bytes >= plan.max_chunk_bytes:
                self._seal(buffer, writer, receipts)
                buffer = _ChunkBuffer()
        while writer.pending and writer.pending[0].done():
            self._record(writer.oldest(), receipts, admitted)
        return buffer

    def _seal(self, buffer: _ChunkBuffer, writer: _StageWriter, receipts: list[ChunkReceipt]) -> None:
        """Hand a full chunk to the writer (the lease is checked first); wait while too many are in flight."""
        self._lease.ensure()
        writer.submit(buffer, len(receipts) + len(writer.pending))
        while len(writer.pending) > STAGE_WRITES_IN_FLIGHT:
            self._record(writer.oldest(), receipts, writer.admitted)

    def _record(self, written: _Written, receipts: list[ChunkReceipt], admitted: AdmittedSnapshot) -> None:
        """Journal the receipt of a chunk whose stage object is durable (ordinal order, this thread only)."""
        if written.ordinal != len(receipts):
            raise DponeError("native_transfer.source_eof_mismatch", "chunk receipts out of order")
        receipt = ChunkReceipt(
            invocation_id=admitted.plan.invocation_id,
            ordinal=written.ordinal,
            rows=written.rows,
            typed_sum=typed_sum_hex(written.total),
            object_key=written.key,
            object_sha256=written.sha256,
            object_bytes=written.size,
        )
        self._lease.ensure()
        self._journal.append("chunk", receipt)
        receipts.append(receipt)
        self._checkpoint(Checkpoint.CHUNK_SEALED)

    def _seal_snapshot(
        self,
        session: SnapshotSourceSession,
        admitted: AdmittedSnapshot,
        before: PhysicalProfile,
        tracker: CoverageTracker,
        streamed: int,
    ) -> SourceSnapshotExtension:
        if admitted.profile is None or admitted.authority is None:
            raise DponeError("native_transfer.source_eof_mismatch", "raw invocation without a frozen profile")
        admitted.authority.require_unchanged(
            observe_authority(session, admitted.plan.relation, admitted.frozen),
            lambda code, drifted: emit(
                self._alerts,
                PROVENANCE_DRIFT,
                operation_id=admitted.plan.operation_id,
                invocation_id=admitted.plan.invocation_id,
                code=code,
                drifted=",".join(drifted),
            ),
        )
        after = capture_physical(session, admitted)
        if tracker.rows != streamed:
            raise DponeError(
                "native_transfer.source_provenance_incomplete", "provenance rows differ from streamed rows"
            )
        coverage = tracker.entries()
        self.endpoint_authority_agreement = after.sha256() == before.sha256()
        if not self.endpoint_authority_agreement:
            emit(
                self._alerts,
                SOURCE_DRIFT_OBSERVED,
                operation_id=admitted.plan.operation_id,
                invocation_id=admitted.plan.invocation_id,
            )
        eof = SourceEof(
            vendor_query_id_sha256=vendor_query_id_sha256(admitted.query.vendor_query_id),
            rows=streamed,
            touched_part_coverage_sha256=coverage_sha256(coverage),
            before_physical_profile_sha256=before.sha256(),
            after_physical_profile_sha256=after.sha256(),
            endpoint_authority_agreement=self.endpoint_authority_agreement,
        )
        evidence = {
            "kind": "dpone.clickhouse-raw-snapshot-evidence.v1",
            "endpoint_identity_sha256": admitted.authority.endpoint,
            "before": before.model_dump(mode="json"),
            "after": after.model_dump(mode="json"),
            "coverage": [entry.model_dump(mode="json") for entry in coverage],
        }
        self._lease.ensure()
        self._stage.open_prefix(evidence_prefix(admitted.plan.invocation_id))
        self._stage.put(
            evidence_key(admitted.plan.invocation_id, "source_physical"),
            canonical_json_bytes(evidence, max_bytes=64 * 1024 * 1024),
        )
        return SourceSnapshotExtension.seal(admitted.profile, admitted.plan.legacy_source_binding_sha256, eof)


class _ChunkBuffer:
    """The rows of the chunk being filled: Arrow slices (zero-copy views of source blocks) and their row hashes,
    summed once per chunk (``total``, in the writer thread) rather than once per slice."""

    def __init__(self) -> None:
        self._slices: list[pa.Table] = []
        self._hashes: list[pa.Array] = []
        self.rows = 0
        self.body_bytes = 0

    def add(self, columns: pa.Table, hashes: pa.Array) -> None:
        self._slices.append(columns)
        self._hashes.append(hashes)
        self.rows += columns.num_rows
        self.body_bytes += columns.nbytes

    def table(self) -> pa.Table:
        return pa.concat_tables(self._slices).combine_chunks()

    def total(self) -> int:
        """The chunk's typed sum: the modular sum of its row hashes."""
        return hash_sum(pa.concat_arrays(self._hashes)) % MODULUS if self._hashes else 0


class _StageWriter:
    """One background thread that encodes sealed chunks and puts them into the stage, in submission order."""

    def __init__(self, stage: StageStore, lease: LeaseKeeper, admitted: AdmittedSnapshot) -> None:
        self._stage = stage
        self._lease = lease
        self.admitted = admitted
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dpone-stage")
        self.pending: deque[Future[_Written]] = deque()

    def submit(self, buffer: _ChunkBuffer, ordinal: int) -> None:
        self.pending.append(self._pool.submit(self._write, buffer, ordinal))

    def oldest(self) -> _Written:
        return self.pending.popleft().result()

    def _write(self, buffer: _ChunkBuffer, ordinal: int) -> _Written:
        plan = self.admitted.plan
        total = buffer.total()
        data = encode_chunk(buffer.table(), plan.columns, plan.invocation_id, ordinal, total)
        key = stage_key(plan.invocation_id, ordinal)
        self._put_in_custody(key, data)
        return _Written(ordinal, buffer.rows, total, key, _sha(data), len(data))

    def _put_in_custody(self, key: str, data: bytes) -> None:
        """Put ``key`` only while the lease is certainly ours, and keep it only if it still was once durable.

        A recoverer fences after expiry plus the skew margin and only then retires the prefix, so an object whose
        writer saw a live lease after the put landed before any retirement and is removed by it. Otherwise the writer
        removes its own object (never journaled, so nothing refers to it) and stops as fenced.
        """
        self._lease.require_live()
        try:
            self._stage.put(key, data)
        except Exception:
            self._lease.require_live()  # a put refused by a retired prefix is the fence, not a storage fault
            raise
        try:
            self._lease.require_live()
        except DponeError:
            self._stage.delete(key)
            raise

    def close(self) -> None:
        """Finish the write in progress and drop queued ones: after this, nothing more reaches the stage."""
        self._pool.shutdown(wait=True, cancel_futures=True)
