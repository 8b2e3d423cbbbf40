"""Resolve the declared ``source_snapshot`` selector into what admission must enforce.

Omission and the explicit ``query_visible`` spelling mean the legacy route (plain MergeTree only); ``exact_raw_rows``
means the raw-row snapshot route with its declared replica scope. No other combination exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer_options import (
    NativeTransferOptions,
    ReplicaScope,
    SnapshotMode,
    SourceSnapshot,
    VerificationBackend,
)


class RouteMode(StrEnum):
    LEGACY = "legacy"
    RAW = "raw"


@dataclass(frozen=True)
class SnapshotRequirement:
    mode: RouteMode
    replica_scope: ReplicaScope
    declared: SourceSnapshot | None

    @property
    def raw(self) -> bool:
        return self.mode is RouteMode.RAW


def normalized_selector(declared: SourceSnapshot | None) -> SourceSnapshot | None:
    """The one form a selector is bound in: omitted and explicit ``query_visible`` are both None (same operation id,
    same sealed plan), so adding or removing that spelling between a crash and its retry changes nothing."""
    return None if declared is None or declared.mode is SnapshotMode.QUERY_VISIBLE else declared


def resolve_selector(options: NativeTransferOptions) -> SnapshotRequirement:
    """The enforced requirement of validated options (validated again here: this is a safety boundary)."""
    declared = options.source_snapshot
    if declared is None or declared.mode is SnapshotMode.QUERY_VISIBLE:
        if declared is not None and declared.replica_scope is not ReplicaScope.SINGLE_SERVER:
            raise DponeError("native_transfer.source_snapshot_mode_invalid", "query_visible admits single_server only")
        return SnapshotRequirement(RouteMode.LEGACY, ReplicaScope.SINGLE_SERVER, normalized_selector(declared))
    if options.execution.verification_backend is not VerificationBackend.TARGET_LOCAL:
        raise DponeError(
            "native_transfer.source_snapshot_mode_invalid", "exact_raw_rows requires verification_backend target_local"
        )
    return SnapshotRequirement(RouteMode.RAW, declared.replica_scope, declared)
