"""Gathers the live facts runtime admission decides on: one inventory read plus one catalog read per member (the
database engine and the authority table's facts; the members' reads concurrently).

With durable quality replay selected, the authority-table check is the store preflight of seed 002 (read-only; a store
that is absent, legacy or not exactly the admitted schema gives ``..._UNSUPPORTED``, never a migration).

Any member that cannot answer blocks: partial inventory is never sufficient, and ``skip_unavailable_shards`` is never
admission evidence.
"""

from __future__ import annotations

from airflow_provider_dpone.contracts.authority_row import AUTHORITY_TABLE
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.inventory import AdmittedInventory
from airflow_provider_dpone.ports.publication import ClusterCatalog, UnavailableError
from airflow_provider_dpone.protocol.context import concurrently
from airflow_provider_dpone.protocol.request import PublicationRequest
from airflow_provider_dpone.protocol.runtime_admission import (
    admit_inventory,
    require_atomic_databases,
    require_authority_table,
)


def admit_runtime(catalog: ClusterCatalog, request: PublicationRequest, *, parallelism: int = 1) -> AdmittedInventory:
    """Read the complete inventory and catalog facts and admit them, or fail with a stable code. The members'
    reads run ``parallelism`` members at a time (they are independent reads); the decision waits for all of them."""
    try:
        rows = catalog.inventory(request.cluster)
        inventory = admit_inventory(rows, cluster=request.cluster, mode=request.replication_mode)
        read = concurrently(
            lambda member: catalog.admission_facts(member, request.database, AUTHORITY_TABLE),
            inventory.members,
            parallelism,
        )
        require_atomic_databases({member.member_id: engine for member, (engine, _) in read.items()})
        facts = {member.member_id: table for member, (_, table) in read.items()}
    except UnavailableError:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE", "a catalog read did not answer") from None
    try:
        require_authority_table(facts)
    except DponeError as error:
        if request.quality is None:
            raise
        # seed 002 store preflight: an absent, legacy or unverified store is refused, never migrated
        raise DponeError("DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED", f"authority store: {error.detail}") from None
    return inventory
