"""Static admission: decide from a manifest alone whether its route may run, and which mode it selects.

``admit_static`` is what ``dpone check`` and ``dpone plan`` run; every operator runs it again, through
``require_admissible``, before touching a connection. It never performs I/O. It collects *every* blocker (a user fixes a manifest in one pass, not one error
per run), each with a registered code. An admissible result still requires runtime admission against the live
systems; a static pass never substitutes for it.
"""

from __future__ import annotations

from airflow_provider_dpone.cluster.protocol.static_admission import cluster_blockers, replication_decision
from airflow_provider_dpone.core.admission_types import AdmissionResult, Blocker, ReplicationDecision, TransferDecision
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest import ROUTE_CLUSTER, ROUTE_TRANSFER, ClusterPublicationManifest, Manifest
from airflow_provider_dpone.transfer.route.static_admission import transfer_blockers, transfer_decision


def admit_static(manifest: Manifest) -> AdmissionResult:
    """Static admission of ``manifest``: its route, decision and all blockers."""
    if isinstance(manifest, ClusterPublicationManifest):
        blockers = cluster_blockers(manifest)
        return AdmissionResult(ROUTE_CLUSTER, replication_decision(manifest, bool(blockers)), blockers)
    blockers = transfer_blockers(manifest)
    return AdmissionResult(ROUTE_TRANSFER, transfer_decision(manifest, bool(blockers)), blockers)


def require_admissible(manifest: Manifest) -> None:
    """Static admission of either route before any connection is touched: an inadmissible manifest raises the first
    blocker's :class:`DponeError`, whose one line also names every other blocker's code."""
    result = admit_static(manifest)
    if result.blockers:
        first = result.blockers[0]
        others = f"; also {', '.join(result.codes[1:])}" if len(result.blockers) > 1 else ""
        raise DponeError(first.code, f"{first.field}: {first.detail}{others}")


__all__ = [
    "AdmissionResult",
    "Blocker",
    "ReplicationDecision",
    "TransferDecision",
    "admit_static",
    "require_admissible",
]
