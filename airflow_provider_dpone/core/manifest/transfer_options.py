"""``source.options.native_transfer``: the closed option schema of the native ClickHouse -> SQL Server route.

``source_snapshot`` selects the snapshot mode. Omitting it behaves exactly as before (plain MergeTree only); the
explicit ``query_visible`` spelling means the same and is never written into manifests that omit it. Every object
here is closed (unknown keys are refused), because a misspelled safety option must never silently mean the default.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, StrictInt, ValidationError, model_validator

from airflow_provider_dpone.core.canonical import Closed
from airflow_provider_dpone.core.errors import DponeError


class SnapshotMode(StrEnum):
    QUERY_VISIBLE = "query_visible"
    EXACT_RAW_ROWS = "exact_raw_rows"


class ReplicaScope(StrEnum):
    SINGLE_SERVER = "single_server"
    CONNECTED_REPLICA = "connected_replica"


class ImportBackend(StrEnum):
    BCP = "bcp"
    SQLCLIENT = "mssql_sqlclient"


class VerificationBackend(StrEnum):
    TARGET_LOCAL = "target_local"
    SOURCE_ONLY = "source_only"


class SourceSnapshot(Closed):
    """The declared source snapshot semantics (validated again at runtime against the observed engine)."""

    mode: SnapshotMode
    replica_scope: ReplicaScope = ReplicaScope.SINGLE_SERVER


class WireOptions(Closed):
    mode: Literal["typed_binary"] = "typed_binary"
    binary_format: Literal["mssql_native"] = "mssql_native"


class ExecutionOptions(Closed):
    """Import backend, verification, and the chunk bounds that keep peak memory independent of the row count."""

    import_backend: ImportBackend = ImportBackend.BCP
    verification_backend: VerificationBackend = VerificationBackend.TARGET_LOCAL
    chunk_rows: StrictInt = Field(default=100_000, ge=1, le=10_000_000)
    max_chunk_bytes: StrictInt = Field(default=64 * 1024 * 1024, ge=1024, le=2 * 1024**3)


class NativeTransferOptions(Closed):
    source_snapshot: SourceSnapshot | None = None
    wire: WireOptions = WireOptions()
    execution: ExecutionOptions = ExecutionOptions()

    @model_validator(mode="after")
    def _raw_rows_need_target_local_verification(self) -> NativeTransferOptions:
        snapshot = self.source_snapshot
        if (
            snapshot is not None
            and snapshot.mode is SnapshotMode.EXACT_RAW_ROWS
            and self.execution.verification_backend is not VerificationBackend.TARGET_LOCAL
        ):
            raise ValueError("exact_raw_rows requires execution.verification_backend: target_local")
        return self


def parse_source_snapshot(raw: object) -> SourceSnapshot | None:
    """Parse the selector alone, mapping every shape error to ``native_transfer.source_snapshot_mode_invalid``."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise DponeError("native_transfer.source_snapshot_mode_invalid", "source_snapshot must be a mapping")
    try:
        return SourceSnapshot.model_validate(raw)
    except ValidationError as exc:
        fields = sorted({".".join(str(p) for p in err["loc"]) for err in exc.errors()})
        raise DponeError("native_transfer.source_snapshot_mode_invalid", "fields: " + ", ".join(fields)) from None
