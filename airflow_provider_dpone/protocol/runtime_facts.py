"""Gathers the live facts runtime admission decides on: one inventory read plus two catalog reads per member.

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
from airflow_provider_dpone.protocol.request import PublicationRequest
from airflow_provider_dpone.protocol.runtime_admission import (
    admit_inventory,
    require_atomic_databases,
    require_authority_table,
)


def admit_runtime(catalog: ClusterCatalog, request: PublicationRequest) -> AdmittedInventory:
    """Read the complete inventory and catalog facts and admit them, or fail with a stable code."""
    try:
        rows = catalog.inventory(request.cluster)
        inventory = admit_inventory(rows, cluster=request.cluster, mode=request.replication_mode)
        engines = {m.member_id: catalog.database_engine(m, request.database) for m in inventory.members}
        require_atomic_databases(engines)
        facts = {m.member_id: catalog.table_facts(m, request.database, AUTHORITY_TABLE) for m in inventory.members}
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
