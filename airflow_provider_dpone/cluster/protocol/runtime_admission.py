"""Runtime admission: the live inventory and catalog facts, read once per phase, and the pure decisions over them.

:func:`admit_runtime` gathers the facts (one inventory read, which also reports the coordinator session's
``distributed_ddl_entry_format_version``, plus one catalog read per member, the members concurrently) and every other function decides on them without reading anything, so each rule is tested exhaustively
and every phase re-runs admission cheaply (inventory drift fences the operation). Any member that cannot answer
blocks: partial inventory is never sufficient, and ``skip_unavailable_shards`` is never admission evidence. With
durable quality replay selected, the authority-table check is the store preflight (read-only; a store that is absent,
legacy or not exactly the admitted schema gives ``..._UNSUPPORTED``, never a migration), and
:func:`admit_quality_selection` refuses what the selected policy cannot observe (a target metric without a bounded
reader, a selected column the table does not have, too many columns) before the fence or the stage writes anything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from airflow_provider_dpone.cluster.ports import AcceptanceReader, ClusterCatalog
from airflow_provider_dpone.cluster.protocol.context import concurrently
from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
from airflow_provider_dpone.cluster.values.authority.row import (
    AUTHORITY_COLUMNS,
    AUTHORITY_PRIMARY_KEY,
    AUTHORITY_TABLE,
)
from airflow_provider_dpone.cluster.values.identities import inventory_digest, member_id
from airflow_provider_dpone.cluster.values.inventory import (
    AdmittedInventory,
    AdmittedMember,
    InventoryRow,
    MemberFacts,
    TableFacts,
)
from airflow_provider_dpone.cluster.values.replication import VARIANTS
from airflow_provider_dpone.core.errors import DponeError, UnavailableError
from airflow_provider_dpone.core.errors.replay import UNSUPPORTED
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode

INVENTORY_INCOMPLETE: Final[str] = "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE"

MAX_MEMBERS: Final[int] = 16
"""The member-count budget: one record of this many members, each with its candidate's and its predecessor's part
digests at their bound, stays inside the 256 KiB authority envelope; round trips and fan-out grow with it."""

SETTINGS_IN_QUEUE_ENTRY_VERSION: Final[int] = 2
"""The least ``distributed_ddl_entry_format_version`` at which ClickHouse stores an ``ON CLUSTER`` statement's settings
in its queue entry (``SETTINGS_IN_ZK_VERSION``): the dispatch's entry is found by ``settings['log_comment']``."""

_KEEPER_MAP: Final[re.Pattern[str]] = re.compile(
    r"KeeperMap\('(?P<path>/[A-Za-z0-9_.\-/]*)'(?:, ?(?P<capacity>[0-9]+))?\)(?: PRIMARY KEY target_key)?"
)


def admit_inventory(rows: Sequence[InventoryRow], *, cluster: str, mode: ReplicationMode) -> AdmittedInventory:
    """One shard, two to :data:`MAX_MEMBERS` unique members, uniform flag equal to the mode, one opaque id per member."""
    rows = [row for row in rows if row.cluster == cluster]
    if not rows:  # a name the coordinator does not define: no later try changes it
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_NOT_DEFINED", f"cluster {cluster}")
    shards = {row.shard_num for row in rows}
    if len(shards) != 1:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_INVENTORY_MULTI_SHARD", f"{len(shards)} shards")
    positions = [(row.shard_num, row.replica_num) for row in rows]
    endpoints = [(row.endpoint.host.lower(), row.endpoint.port) for row in rows]
    if len(set(positions)) != len(positions) or len(set(endpoints)) != len(endpoints):
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_INVENTORY_AMBIGUOUS", f"{len(rows)} rows")
    if len(rows) < 2:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_INVENTORY_TOO_FEW_MEMBERS", f"{len(rows)} member")
    if len(rows) > MAX_MEMBERS:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_INVENTORY_TOO_MANY_MEMBERS", f"{len(rows)} > {MAX_MEMBERS} members")
    flags = {row.internal_replication for row in rows}
    if len(flags) != 1:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_INVENTORY_MIXED_REPLICATION", "internal_replication differs")
    internal = flags.pop()
    if internal != VARIANTS[mode].internal_replication:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_REPLICATION_MODE_MISMATCH", f"mode {mode}, internal_replication={internal}"
        )
    members = [
        AdmittedMember(
            member_id=member_id(row.shard_num, row.replica_num),
            shard_num=row.shard_num,
            replica_num=row.replica_num,
            endpoint=row.endpoint,
        )
        for row in rows
    ]
    if len({member.member_id for member in members}) != len(members):
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_MEMBER_ID_COLLISION", f"{len(members)} members")
    members.sort(key=lambda member: member.member_id)
    return AdmittedInventory(
        cluster=cluster,
        internal_replication=internal,
        members=tuple(members),
        digest=inventory_digest(cluster=cluster, internal_replication=internal, members=positions),
    )


def require_ddl_entry_settings(rows: Sequence[InventoryRow]) -> None:
    """The coordinator queues this user's ``ON CLUSTER`` statements with their settings, so each dispatch's entry can
    be found by its ``log_comment``; below the version that stores them the publication could never resolve its own
    dispatch (it would end holding the target), so it is refused before anything is written."""
    versions = sorted({row.ddl_entry_format_version for row in rows})
    if not versions or versions[0] < SETTINGS_IN_QUEUE_ENTRY_VERSION:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_DDL_ENTRY_FORMAT_UNSUPPORTED",
            f"distributed_ddl_entry_format_version={versions[0] if versions else 'unread'}"
            f" < {SETTINGS_IN_QUEUE_ENTRY_VERSION}",
        )


def require_member_identities(local: Mapping[AdmittedMember, Sequence[tuple[int, int]]]) -> None:
    """Each member's direct endpoint is that member: its own ``system.clusters`` marks exactly the member's
    ``(shard_num, replica_num)`` local. Another member's position, none, or several (one server behind two
    positions) refuses before anything is created."""
    wrong = sorted(
        f"member {member.label}"
        for member, positions in local.items()
        if tuple(positions) != ((member.shard_num, member.replica_num),)
    )
    if wrong:
        raise DponeError("DPONE_CLICKHOUSE_MEMBER_IDENTITY_MISMATCH", f"members {wrong}")


def require_atomic_databases(engines: Mapping[str, str | None]) -> None:
    """Every member has the database and it is Atomic (EXCHANGE and UUID-exact tables need it)."""
    bad = sorted(member for member, engine in engines.items() if engine != "Atomic")
    if bad:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_DATABASE_NOT_ATOMIC", f"members {bad}")


def require_authority_table(facts: Mapping[str, TableFacts | None]) -> str:
    """Exact columns without defaults, primary key ``target_key``, one literal Keeper path, same engine everywhere.

    Returns the Keeper path. Macros (``{...}``), relative paths, ``..`` segments and differing facades are refused:
    SQL metadata cannot prove two facades share Keeper data, but differing metadata proves they may not.
    """
    absent = sorted(member for member, fact in facts.items() if fact is None)
    if absent or not facts:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TABLE_UNSUPPORTED", f"absent on members {absent}")
    engines: set[str] = set()
    for member, fact in sorted(facts.items()):
        assert fact is not None
        columns = tuple((column.name, column.type) for column in fact.columns)
        if columns != AUTHORITY_COLUMNS or any(column.default_kind for column in fact.columns):
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TABLE_UNSUPPORTED", f"{member}: columns differ")
        if fact.primary_key.strip() != AUTHORITY_PRIMARY_KEY:
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TABLE_UNSUPPORTED", f"{member}: primary key differs")
        match = _KEEPER_MAP.fullmatch(fact.engine_full.strip())
        if fact.engine != "KeeperMap" or match is None:
            raise DponeError(
                "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TABLE_UNSUPPORTED", f"{member}: not KeeperMap with a literal path"
            )
        path = match.group("path")
        if "//" in path or "/../" in path + "/" or "/./" in path + "/":
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TABLE_UNSUPPORTED", f"{member}: non-normal path")
        engines.add(fact.engine_full.strip())
    if len(engines) != 1:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TABLE_UNSUPPORTED", "engine expressions differ")
    only = _KEEPER_MAP.fullmatch(engines.pop())
    assert only is not None
    return only.group("path")


def admit_runtime(catalog: ClusterCatalog, request: PublicationRequest, *, parallelism: int = 1) -> AdmittedInventory:
    """Read the complete inventory and catalog facts and admit them, or fail with a stable code. The members'
    reads run ``parallelism`` members at a time (they are independent reads); the decision waits for all of them."""
    try:
        rows = catalog.inventory(request.cluster)
    except UnavailableError:
        raise DponeError(INVENTORY_INCOMPLETE, f"cluster {request.cluster}: the coordinator did not answer") from None
    inventory = admit_inventory(rows, cluster=request.cluster, mode=request.replication_mode)
    require_ddl_entry_settings([row for row in rows if row.cluster == request.cluster])

    def admission_facts(member: AdmittedMember) -> MemberFacts:
        try:
            return catalog.admission_facts(member, request.cluster, request.database, AUTHORITY_TABLE)
        except UnavailableError:
            raise DponeError(
                INVENTORY_INCOMPLETE, f"cluster {request.cluster}: member {member.label} did not answer"
            ) from None

    read = concurrently(admission_facts, inventory.members, parallelism)
    require_member_identities({member: fact.local_positions for member, fact in read.items()})
    names = {member: f"member {member.label}" for member in read}  # as the connection check names its facades
    require_atomic_databases({names[member]: fact.database_engine for member, fact in read.items()})
    facts = {names[member]: fact.table for member, fact in read.items()}
    try:
        require_authority_table(facts)
    except DponeError as error:
        if request.quality is None:
            raise
        # the quality-replay store preflight: an absent, legacy or unverified store is refused, never migrated
        raise DponeError("DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED", f"authority store: {error.detail}") from None
    return inventory


def admit_quality_selection(
    request: PublicationRequest, acceptance: AcceptanceReader | None, columns: Sequence[tuple[str, str]] | None
) -> None:
    """What the request's durable quality policy selects can be observed: target metrics need a bounded reader,
    and the selected columns must be among ``columns`` (the source's typed columns: the stage's source, or the
    fence's description of it, which a policy that observes columns needs; ``None``: not described). Checked by the
    fence and the stage before they write anything."""
    policy = request.quality
    if policy is None:
        return
    if policy.target_metrics and acceptance is None:
        raise DponeError(UNSUPPORTED, "no bounded acceptance reader is configured for target observations")
    if columns is None and policy.observes_columns:
        raise DponeError(UNSUPPORTED, "the policy observes columns, and the source's columns were not described")
    policy.selected_columns([name for name, _ in columns or ()])
