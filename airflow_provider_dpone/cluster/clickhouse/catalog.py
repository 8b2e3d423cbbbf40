""":class:`~airflow_provider_dpone.cluster.ports.ClusterCatalog`: topology from the coordinator, catalog facts
from each member's own direct connection (a fact about member B is never read through member A).

Every failure is :class:`UnavailableError` (the protocol blocks: partial inventory is never sufficient), except
refused credentials (``DPONE_CLICKHOUSE_AUTHENTICATION_FAILED``, terminal) and a coordinator that does not answer the
first read at all (``DPONE_CLICKHOUSE_COORDINATOR_UNREACHABLE``): a person must not read either as a missing cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow_provider_dpone.cluster.clickhouse import sql_catalog
from airflow_provider_dpone.cluster.clickhouse.endpoint import Endpoint
from airflow_provider_dpone.cluster.clickhouse.oneshot import Refused, Unknown, classify
from airflow_provider_dpone.cluster.values.inventory import (
    AdmittedMember,
    ColumnFact,
    InventoryRow,
    MemberEndpoint,
    MemberFacts,
    TableFacts,
)
from airflow_provider_dpone.core.errors import DponeError, UnavailableError

MemberEndpoints = Callable[[AdmittedMember], Endpoint]
AUTHENTICATION_FAILED = 516
"""ClickHouse's ``AUTHENTICATION_FAILED``: wrong password, or no such user."""


COORDINATOR_UNREACHABLE = "DPONE_CLICKHOUSE_COORDINATOR_UNREACHABLE"
MEMBER_UNREACHABLE = "DPONE_CLICKHOUSE_MEMBER_UNREACHABLE"


def _rows(endpoint: Endpoint, statement: str, what: str, *, unanswered: str | None = None) -> list[Any]:
    """The rows of a read; a failure is "unavailable", except two a person must tell apart from a missing cluster:
    refused credentials (terminal) and, with ``unanswered``, a server that gives no ClickHouse answer at all."""
    try:
        return list(endpoint.reader().query(statement).result_rows)
    except Exception as error:  # noqa: BLE001 -- every read failure is classified, by type and code only
        raise read_failure(error, what, unanswered=unanswered) from None


def read_failure(error: BaseException, what: str, *, unanswered: str | None) -> DponeError | UnavailableError:
    """The failure a failed read means: refused credentials, no answer at all (the code ``unanswered`` when given:
    :data:`COORDINATOR_UNREACHABLE` or :data:`MEMBER_UNREACHABLE`), or "unavailable"."""
    failure = classify(error)
    if isinstance(failure, Refused) and failure.code == AUTHENTICATION_FAILED:
        return DponeError("DPONE_CLICKHOUSE_AUTHENTICATION_FAILED", f"{what} read: Code {failure.code}")
    if unanswered is not None and isinstance(failure, Unknown):
        return DponeError(unanswered, f"{what} read: {type(error).__name__}")
    return UnavailableError(f"{what} read failed ({type(error).__name__})")


class ClickHouseCatalog:
    """``declared``: the keys of the connection's ``member_endpoints`` map; an inventory without one of them is
    refused (``DPONE_CLICKHOUSE_MEMBER_ENDPOINT_EXTRA``): an entry for no member is a mapping nobody checked."""

    def __init__(self, coordinator: Endpoint, members: MemberEndpoints, declared: frozenset[str] | None = None) -> None:
        self.coordinator = coordinator
        self.members = members
        self.declared = declared

    def inventory(self, cluster: str) -> tuple[InventoryRow, ...]:
        rows = _rows(
            self.coordinator, sql_catalog.inventory(cluster), "system.clusters", unanswered=COORDINATOR_UNREACHABLE
        )
        try:
            inventory = tuple(
                InventoryRow(
                    cluster=name,
                    shard_num=int(shard),
                    replica_num=int(replica),
                    internal_replication=bool(internal),
                    endpoint=MemberEndpoint(host=host, port=int(port)),
                    ddl_entry_format_version=int(version),
                )
                for name, shard, replica, internal, host, port, version in rows
            )
        except ValueError:
            raise UnavailableError("system.clusters returned a malformed row") from None
        if self.declared is not None and inventory:  # no row at all: admission says INVENTORY_INCOMPLETE
            extra = self.declared - {f"{row.shard_num}:{row.replica_num}" for row in inventory}
            if extra:
                raise DponeError("DPONE_CLICKHOUSE_MEMBER_ENDPOINT_EXTRA", f"{len(extra)} member_endpoints entries")
        return inventory

    def admission_facts(self, member: AdmittedMember, cluster: str, database: str, table: str) -> MemberFacts:
        return admission_facts(self.members(member), cluster, database, table)


def admission_facts(endpoint: Endpoint, cluster: str | None, database: str, table: str) -> MemberFacts:
    """The engine of ``database``, the facts of ``table`` (``None`` when absent) and the positions of ``cluster`` the
    answering server reports as its own, as ``endpoint`` reports them (``cluster`` ``None``: no position asked)."""
    rows = _rows(endpoint, sql_catalog.admission_facts(cluster, database, table), "catalog facts")
    if len(rows) != 1:
        raise UnavailableError(f"catalog facts read returned {len(rows)} rows")
    engines, tables, columns, local = rows[0]
    if len(engines) > 1 or len(tables) > 1:
        raise UnavailableError("catalog facts read returned more than one database or table")
    facts = None
    if tables:
        engine, engine_full, primary_key = tables[0]
        facts = TableFacts(
            engine=engine,
            engine_full=engine_full,
            primary_key=primary_key,
            columns=tuple(ColumnFact(name=name, type=type_, default_kind=kind) for name, type_, kind in columns),
        )
    return MemberFacts(
        database_engine=str(engines[0]) if engines else None,
        table=facts,
        local_positions=tuple((int(shard), int(replica)) for shard, replica in local),
    )
