"""Static admission of the native ClickHouse -> SQL Server / PostgreSQL transfer route.

Only what the manifest alone can decide is checked here. The closed option model has already refused unknown
selector fields, unknown modes and ``exact_raw_rows`` without target-local verification. What remains is the one
mode/replica-scope combination that no engine can admit: ``query_visible`` is the legacy read of a directly connected
plain MergeTree, so it has no ``connected_replica`` form. Which of ``single_server``/``connected_replica`` fits
``exact_raw_rows`` depends on the engine the live server reports: that is runtime admission.
"""

from __future__ import annotations

from airflow_provider_dpone.core.admission_types import Blocker, TransferDecision
from airflow_provider_dpone.core.manifest.transfer import NativeTransferManifest
from airflow_provider_dpone.core.manifest.transfer_options import ReplicaScope, SnapshotMode

_SELECTOR = "source.options.native_transfer.source_snapshot"


def transfer_blockers(manifest: NativeTransferManifest) -> tuple[Blocker, ...]:
    """Every static blocker of a native transfer manifest, in a stable order."""
    blockers: list[Blocker] = []
    snapshot = manifest.source.options.native_transfer.source_snapshot
    if (
        snapshot is not None
        and snapshot.mode is SnapshotMode.QUERY_VISIBLE
        and snapshot.replica_scope is ReplicaScope.CONNECTED_REPLICA
    ):
        detail = "query_visible reads a directly connected plain MergeTree: replica_scope must be single_server"
        blockers.append(Blocker("native_transfer.source_snapshot_mode_invalid", _SELECTOR + ".replica_scope", detail))
    if manifest.sink.options.durable_quality_replay:
        detail = f"route native_transfer_{manifest.sink.type}: no durable quality evidence store"
        blockers.append(
            Blocker("DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED", "sink.options.durable_quality_replay", detail)
        )
    return tuple(blockers)


def transfer_decision(manifest: NativeTransferManifest, blocked: bool) -> TransferDecision:
    """The effective selector (omission is ``query_visible``/``single_server``) and, if nothing blocks, the sink."""
    snapshot = manifest.source.options.native_transfer.source_snapshot
    mode = snapshot.mode if snapshot is not None else SnapshotMode.QUERY_VISIBLE
    scope = snapshot.replica_scope if snapshot is not None else ReplicaScope.SINGLE_SERVER
    return TransferDecision(
        requested="native_transfer",
        selected=None if blocked else f"native_transfer_{manifest.sink.type}",
        source_snapshot=mode.value,
        replica_scope=scope.value,
    )
