"""The connection check behind Airflow's Test button: what a connection must satisfy before any operator uses it.

:func:`check_connection` reads only (no mutation, no authority write) and reports every failure it finds, one coded
line each (:class:`~airflow_provider_dpone.core.errors.DponeError` rendering), instead of stopping at the first:
1. the coordinator answers with these credentials (its ``system.clusters`` is the reference for step 2);
2. every member (of the connection's ``cluster``, else every ``member_endpoints`` entry) is reached through the
   endpoint the operators would use, accepts the credentials, and is the member it claims to be: the position it
   reports as its own (``is_local``) is the ``shard:replica`` the coordinator lists it at;
3. with ``authority_database``: the authority table of seed 002 on the coordinator and every identified member
   (Atomic database, exact columns without defaults, ``PRIMARY KEY target_key``, KeeperMap with one literal path,
   the same engine expression everywhere), decided by the same rules as runtime admission.
Lines name members by ``shard:replica`` (the key of ``member_endpoints``), never by host.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_dpone.cluster.clickhouse import sql_catalog
from airflow_provider_dpone.cluster.clickhouse.catalog import (
    COORDINATOR_UNREACHABLE,
    MEMBER_UNREACHABLE,
    admission_facts,
    read_failure,
)
from airflow_provider_dpone.cluster.clickhouse.endpoint import Endpoint
from airflow_provider_dpone.cluster.protocol.context import concurrently
from airflow_provider_dpone.cluster.protocol.runtime_admission import require_atomic_databases, require_authority_table
from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_TABLE
from airflow_provider_dpone.cluster.values.identities import member_id
from airflow_provider_dpone.cluster.values.inventory import AdmittedMember, MemberEndpoint, TableFacts
from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection
from airflow_provider_dpone.core.errors import DponeError, UnavailableError

ClusterPosition = tuple[str, int, int]
"""``(cluster, shard_num, replica_num)`` as ``system.clusters`` reports it."""
MEMBER_PARALLELISM = 8
"""Members reached at once (an unreachable one costs up to the connect timeout)."""
ListedMembers = dict[ClusterPosition, MemberEndpoint]
"""The coordinator's rows: each position with the host and port it names."""


@dataclass(frozen=True)
class CheckResult:
    """Each failure as one coded line (empty: every check passed) and one line saying what was checked."""

    failures: tuple[str, ...]
    checked: str

    @property
    def ok(self) -> bool:
        return not self.failures


def _coded(error: BaseException, unreachable_detail: str) -> DponeError:
    """A coded failure for the line: an uncoded "unavailable" read becomes ``..._INVENTORY_INCOMPLETE``."""
    if isinstance(error, DponeError):
        return error
    return DponeError("DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE", unreachable_detail)


def _read(endpoint: Endpoint, statement: str, what: str, unanswered: str) -> ListedMembers:
    try:
        rows = endpoint.reader().query(statement).result_rows
    except Exception as error:  # noqa: BLE001 -- classified by type and server code only
        raise _coded(read_failure(error, what, unanswered=unanswered), f"{what} read failed") from None
    try:
        return {
            (str(name), int(shard), int(replica)): MemberEndpoint(host=str(host), port=int(port))
            for name, shard, replica, host, port in rows
        }
    except (ValueError, TypeError):  # pydantic's ValidationError is a ValueError
        raise _coded(UnavailableError(what), f"{what} read returned a malformed row") from None


def _members(connection: ResolvedConnection, listed: ListedMembers) -> list[AdmittedMember]:
    """The members to check: the named cluster's rows, else one per ``member_endpoints`` key (none: no member).

    A member's route is the operators' (:meth:`ResolvedConnection.for_member`): its ``member_endpoints`` entry, else
    its host from the coordinator's ``system.clusters`` and the connection's member port."""
    if connection.options.cluster is not None:
        claims = {(shard, replica): endpoint for (_, shard, replica), endpoint in listed.items()}
    else:
        keys = connection.options.member_endpoints or {}
        fallback = MemberEndpoint(host=connection.host, port=connection.port)  # never used: the map has the key
        claims = {(int(s), int(r)): fallback for s, _, r in (key.partition(":") for key in keys)}
    return [
        AdmittedMember(member_id=member_id(shard, replica), shard_num=shard, replica_num=replica, endpoint=endpoint)
        for (shard, replica), endpoint in sorted(claims.items(), key=lambda item: item[0])
    ]


def _identity(member: AdmittedMember, own: ListedMembers, listed: ListedMembers) -> DponeError | None:
    """``None`` when the member reports as its own a position the coordinator lists for it, else the mismatch."""
    claim = (member.shard_num, member.replica_num)
    agreed = {(shard, replica) for (cluster, shard, replica) in own if (cluster, shard, replica) in listed}
    if claim in agreed:
        return None
    seen = [f"shard {shard}, replica {replica}" for shard, replica in sorted(agreed)]
    answer = "as " + "; ".join(seen) if seen else "as no member the coordinator lists"
    return DponeError("DPONE_CLICKHOUSE_MEMBER_IDENTITY_MISMATCH", f"member {member.label}: answers {answer}")


def check_connection(connection: ResolvedConnection) -> CheckResult:
    """Run the checks of the module docstring over ``connection`` (see there); never raises for a server's answer."""
    options = connection.options
    cluster = options.cluster
    failures: list[str] = []
    coordinator = Endpoint.of(connection)
    opened = [coordinator]
    try:
        try:
            listed = _read(
                coordinator, sql_catalog.positions(cluster, local=False), "system.clusters", COORDINATOR_UNREACHABLE
            )
        except DponeError as error:
            return CheckResult((error.render(),), "the coordinator")
        if cluster is not None and not listed:
            failure = DponeError("DPONE_CLICKHOUSE_CLUSTER_NOT_DEFINED", f"cluster {cluster}")
            return CheckResult((failure.render(),), "the coordinator")
        members = _members(connection, listed)

        def reach(member: AdmittedMember) -> tuple[Endpoint | None, DponeError | None]:
            name = f"member {member.label}"
            try:
                endpoint = Endpoint.of(connection.for_member(member))
            except DponeError as error:
                return None, error
            opened.append(endpoint)
            try:
                own = _read(
                    endpoint, sql_catalog.positions(cluster, local=True), f"{name} identity", MEMBER_UNREACHABLE
                )
            except DponeError as error:
                return None, error
            mismatch = _identity(member, own, listed)
            return (None, mismatch) if mismatch is not None else (endpoint, None)

        facades: dict[str, Endpoint] = {"coordinator": coordinator}
        for member, (endpoint, refused) in concurrently(reach, members, MEMBER_PARALLELISM).items():
            if refused is not None:
                failures.append(refused.render())
            elif endpoint is not None:
                facades[f"member {member.label}"] = endpoint
        checked = f"the coordinator and {len(members)} members" + (f" of {cluster}" if cluster else "")
        checked += " (reachable, authenticated, each the member it is listed at)"
        if options.authority_database is not None:
            failures.extend(_authority(facades, options.authority_database))
            checked += f", and the authority table in {options.authority_database}"
        if not members:
            checked += " (no member: set the extra 'cluster' or 'member_endpoints' to check the members)"
        return CheckResult(tuple(failures), checked)
    finally:
        for endpoint in opened:
            endpoint.close()


def _authority(facades: dict[str, Endpoint], database: str) -> list[str]:
    """One line per facade whose database or authority table fails seed 002's preconditions, then one line if
    the facades that pass individually do not share one engine expression (one Keeper path)."""
    failures: list[str] = []
    passing: dict[str, TableFacts | None] = {}
    for name, endpoint in facades.items():
        try:
            facts = admission_facts(endpoint, None, database, AUTHORITY_TABLE)
            engine, table = facts.database_engine, facts.table
            require_atomic_databases({name: engine})
            require_authority_table({name: table})
        except (DponeError, UnavailableError) as error:
            failures.append(_coded(error, f"{name}: catalog facts read failed").render())
            continue
        passing[name] = table
    if len(passing) > 1:
        try:
            require_authority_table(passing)
        except DponeError as error:
            failures.append(error.render())
    return failures
