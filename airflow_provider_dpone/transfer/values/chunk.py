"""The chunk plan, chunk receipts and the stage-complete record of the native transfer route.

One invocation = one source query = one :class:`NativeChunkPlan`. Every chunk that the single producer seals into
the durable stage gets a :class:`ChunkReceipt` (row count, typed sum, object digest). :class:`NativeStageComplete`
atomically co-binds the ordered receipts, the total typed evidence and the completion metadata; in raw mode that
metadata carries the one ``source_snapshot_v1`` extension, in legacy mode it never gains an empty one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer

from airflow_provider_dpone.core.canonical import Closed, Hex64, tagged_digest
from airflow_provider_dpone.core.columns import MAX_COLUMNS, NativeColumn, columns_sha256
from airflow_provider_dpone.core.manifest.transfer_options import SourceSnapshot
from airflow_provider_dpone.core.record_format import ANOTHER_BUILD, PRE_RELEASE, format_error, format_name
from airflow_provider_dpone.core.typed_digest import MODULUS, native_multiset_digest
from airflow_provider_dpone.transfer.values.raw_snapshot_eof import EXTENSION_KEY, SourceSnapshotExtension
from airflow_provider_dpone.transfer.values.row_digest import RowDigest, parse_row_digest
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow

CHUNK_PLAN_KIND: Final = "dpone.native-chunk-plan.v1"
STAGE_FORMAT: Final = "dpone.native-arrow-chunk.v2"
"""The stage object format (``transfer/values/arrow_chunk.py``), the only one this build writes and reads."""
PRE_RELEASE_STAGE_FORMAT: Final = "dpone.native-typed-chunk.v1"
"""The stage format of pre-release builds (per-row frames): named only to refuse it."""
_Id = Field(pattern=r"^[0-9a-f]{32}$")


class RelationRef(Closed):
    database: str
    table: str

    def identity(self) -> dict[str, str]:
        """The relation identity of the legacy source binding."""
        return {"kind": "clickhouse.relation.v1", "database": self.database, "table": self.table}


class NativeChunkPlan(Closed):
    """Frozen before the first row is read; ``source_query_id`` is the opaque source binding (see raw_snapshot)."""

    kind: Literal["dpone.native-chunk-plan.v1"] = CHUNK_PLAN_KIND
    operation_id: str = _Id
    invocation_id: str = _Id
    route_fingerprint: Hex64
    selector: SourceSnapshot | None
    relation: RelationRef
    window: UtcWindow | None
    columns: tuple[NativeColumn, ...] = Field(min_length=1, max_length=MAX_COLUMNS)
    chunk_rows: int = Field(ge=1)
    max_chunk_bytes: int = Field(ge=1024)
    legacy_source_binding_sha256: Hex64
    source_query_id: str
    row_digest: RowDigest = RowDigest.TYPED_SHA256
    """How every row hash of the invocation was computed (absent in plans sealed before it was recorded: typed)."""

    @field_validator("row_digest", mode="before")
    @classmethod
    def _known_method(cls, value: object) -> RowDigest:
        return parse_row_digest(value)

    @model_serializer(mode="wrap")
    def _sealed_form(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The typed method is left out, so a plan sealed before the method was recorded re-encodes to its bytes."""
        body: dict[str, Any] = handler(self)
        if self.row_digest is RowDigest.TYPED_SHA256:
            body.pop("row_digest", None)
        return body

    @field_validator("kind", mode="before")
    @classmethod
    def _plan_kind_of_this_build(cls, value: Any) -> Any:
        if value != CHUNK_PLAN_KIND:
            raise format_error(f"chunk plan kind {format_name(value)}", ANOTHER_BUILD)
        return value

    @property
    def columns_sha256(self) -> str:
        return columns_sha256(self.columns)


class ChunkReceipt(Closed):
    """A sealed chunk: the stage object's digest and the typed evidence of its rows."""

    invocation_id: str = _Id
    ordinal: int = Field(ge=0)
    rows: int = Field(ge=1)
    typed_sum: Hex64
    object_key: str
    object_sha256: Hex64
    object_bytes: int = Field(ge=1)

    @property
    def typed_sum_int(self) -> int:
        return int(self.typed_sum, 16)


def typed_sum_hex(total: int) -> str:
    return f"{total % MODULUS:064x}"


def receipts_sha256(receipts: Sequence[ChunkReceipt]) -> str:
    """Digest of the ordered receipts (ordinal order)."""
    return tagged_digest("dpone.native-receipts.v1", [receipt.model_dump(mode="json") for receipt in receipts])


def workload_totals(receipts: Sequence[ChunkReceipt]) -> tuple[int, int]:
    """Total rows and the modulo-2**256 sum of the receipts' typed sums (chunk-boundary independent)."""
    rows = sum(receipt.rows for receipt in receipts)
    total = sum(receipt.typed_sum_int for receipt in receipts) % MODULUS
    return rows, total


class CompletionMetadata(Closed):
    """EOF completion metadata. ``source_snapshot_v1`` exists only in raw mode and only here."""

    stage_format: Literal["dpone.native-arrow-chunk.v2"] = STAGE_FORMAT
    columns_sha256: Hex64
    source_snapshot_v1: SourceSnapshotExtension | None = None

    @field_validator("stage_format", mode="before")
    @classmethod
    def _stage_format_of_this_build(cls, value: Any) -> Any:
        """Stages of another format were sealed by another build: refused, never read."""
        if value != STAGE_FORMAT:
            writer = PRE_RELEASE if value == PRE_RELEASE_STAGE_FORMAT else ANOTHER_BUILD
            raise format_error(f"stage format {format_name(value)}", writer)
        return value

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"stage_format": self.stage_format, "columns_sha256": self.columns_sha256}
        if self.source_snapshot_v1 is not None:
            body[EXTENSION_KEY] = self.source_snapshot_v1.to_json()
        return body


class NativeStageComplete(Closed):
    """The atomic stage-complete record: ordered receipts, totals and completion metadata in one write."""

    invocation_id: str = _Id
    rows: int = Field(ge=0)
    chunks: int = Field(ge=0)
    receipts_sha256: Hex64
    typed_sum: Hex64
    workload_digest: Hex64
    completion_metadata: CompletionMetadata

    @classmethod
    def seal(
        cls, invocation_id: str, receipts: Sequence[ChunkReceipt], metadata: CompletionMetadata
    ) -> NativeStageComplete:
        rows, total = workload_totals(receipts)
        return cls(
            invocation_id=invocation_id,
            rows=rows,
            chunks=len(receipts),
            receipts_sha256=receipts_sha256(receipts),
            typed_sum=typed_sum_hex(total),
            workload_digest=native_multiset_digest(rows, total),
            completion_metadata=metadata,
        )

    def to_json(self) -> dict[str, Any]:
        body = self.model_dump(mode="json", exclude={"completion_metadata"})
        body["completion_metadata"] = self.completion_metadata.to_json()
        return body


def transfer_operation_id(dag_id: str, run_id: str, target_key: str, route_fingerprint: str) -> str:
    """Deterministic operation id: the same DAG run, target and normalized plan always resume the same journal."""
    return tagged_digest("dpone.native-operation.v1", dag_id, run_id, target_key, route_fingerprint)[:32]
