""":class:`~airflow_provider_dpone.cluster.ports.ClusterDDL`: one-shot ``ON CLUSTER`` dispatch through the
coordinator, and read-only observation of the one queue entry a correlation token names.

Dispatch failure mapping: the initiator's answer is a hint (the protocol decides from the queue entry and from every
member's physical UUIDs), so only a *complete* answer becomes a :class:`DispatchOutcome`. ``TIMEOUT_EXCEEDED`` (some
host did not finish within ``distributed_ddl_task_timeout``) is an outcome with ``timed_out``. Any other error --
including a host's failure reported by ``distributed_ddl_output_mode = 'throw'``, after which other hosts may have
executed the statement -- and a lost answer are :class:`OutcomeUnknownError`: observe, never redispatch. A pinned
dispatch that reached a server without its session (Code 372, refused before parsing) is
:class:`MutationRejectedError`; the protocol observes it all the same.

Hosts are mapped to member ids through the admitted inventory's ``system.clusters`` endpoints; the result and the
queue report hosts the same way ``system.clusters`` does (host name and TCP port). Hosts outside the inventory are
left out, which the protocol reads as missing evidence.
"""

from __future__ import annotations

from typing import Any

from clickhouse_connect.driver.exceptions import Error

from airflow_provider_dpone.cluster.clickhouse import sql_cluster_ddl
from airflow_provider_dpone.cluster.clickhouse.endpoint import Endpoint
from airflow_provider_dpone.cluster.clickhouse.oneshot import (
    PROCESS_GUARD,
    TIMEOUT_EXCEEDED,
    MutationGuard,
    Refused,
    classify,
    mutation_query_id,
    sanitized,
)
from airflow_provider_dpone.cluster.ports import (
    DdlIntent,
    DispatchOutcome,
    DispatchSettings,
    QueueEntry,
    ServerIdentity,
)
from airflow_provider_dpone.cluster.values.authority.generation import ServerName
from airflow_provider_dpone.cluster.values.inventory import AdmittedInventory
from airflow_provider_dpone.core.canonical import sha256_hex
from airflow_provider_dpone.core.clickhouse.server_codes import SESSION_NOT_FOUND
from airflow_provider_dpone.core.errors import MutationRejectedError, OutcomeUnknownError, UnavailableError


def _hosts(inventory: AdmittedInventory) -> dict[tuple[str, int], str]:
    return {(m.endpoint.host.lower(), m.endpoint.port): m.member_id for m in inventory.members}


def _parse_tsv(body: bytes) -> list[list[str]]:
    return [line.split("\t") for line in body.decode("utf-8", "replace").splitlines() if line]


class ClickHouseClusterDDL:
    def __init__(
        self,
        coordinator: Endpoint,
        *,
        guard: MutationGuard = PROCESS_GUARD,
        task_timeout_seconds: int = sql_cluster_ddl.DEFAULT_TASK_TIMEOUT_SECONDS,
        session_timeout_seconds: int = 60,
    ) -> None:
        """``session_timeout_seconds`` keeps a pinned permit's session alive past its dispatch deadline."""
        self.coordinator = coordinator
        self.session_timeout = session_timeout_seconds
        self.guard = guard
        self.task_timeout_seconds = task_timeout_seconds

    def dispatch(self, inventory: AdmittedInventory, intent: DdlIntent, settings: DispatchSettings) -> DispatchOutcome:
        statement = sql_cluster_ddl.render(intent, settings, task_timeout_seconds=self.task_timeout_seconds)
        query_id = mutation_query_id("ddl", f"cluster:{intent.cluster}", statement)
        # the same settings also as request settings: identical values, so a server (or an emulation) that reads
        # either place applies them; ``wait_end_of_query`` makes a late host error an HTTP error, not a 200 body
        request_settings: dict[str, Any] = {
            **sql_cluster_ddl.ddl_settings(settings, task_timeout_seconds=self.task_timeout_seconds),
            "wait_end_of_query": 1,
        }
        if settings.session_id is not None:  # pinned: run on the permit's server, or be refused before running
            request_settings.update(session_id=settings.session_id, session_check=1)
        self.guard.claim(query_id)
        try:
            body = self.coordinator.mutator().raw_query(statement, settings={**request_settings, "query_id": query_id})
        except Error as error:
            failure = classify(error)
            if isinstance(failure, Refused) and failure.code == TIMEOUT_EXCEEDED:
                return DispatchOutcome(timed_out=True)
            if isinstance(failure, Refused) and failure.code == SESSION_NOT_FOUND:
                raise MutationRejectedError(
                    f"ON CLUSTER {intent.kind}: the pinned session is not on this server"
                ) from None
            raise OutcomeUnknownError(f"ON CLUSTER {intent.kind}: {sanitized(failure)}") from None
        hosts = _hosts(inventory)
        finished: list[str] = []
        failed: list[str] = []
        for row in _parse_tsv(body):
            if len(row) < 3 or not row[1].isdigit() or not row[2].lstrip("-").isdigit():
                continue
            member = hosts.get((row[0].lower(), int(row[1])))
            if member is not None:
                (failed if int(row[2]) else finished).append(member)
        return DispatchOutcome(
            finished=tuple(sorted(finished)),
            failed=tuple(sorted(failed)),
            timed_out=len(finished) + len(failed) < len(inventory.members),
        )

    def queue_status(self, inventory: AdmittedInventory, correlation_token: str) -> QueueEntry | None:
        statement = sql_cluster_ddl.queue_entry(inventory.cluster, correlation_token)
        try:
            rows: list[Any] = list(self.coordinator.reader().query(statement).result_rows)
        except Exception as error:  # noqa: BLE001 -- every read failure is "unavailable"
            raise UnavailableError(f"distributed DDL queue read failed ({type(error).__name__})") from None
        entries = sql_cluster_ddl.queue_entries(rows)
        if not entries:
            return None
        if len(entries) > 1:
            raise UnavailableError(f"{len(entries)} queue entries carry one correlation token")
        return entries[0].bound(correlation_token, _hosts(inventory))

    def server_identity(self, session_id: str | None = None) -> ServerIdentity:
        session = {} if session_id is None else {"session_id": session_id, "session_timeout": self.session_timeout}
        try:
            rows: list[Any] = list(
                self.coordinator.reader().query(sql_cluster_ddl.SERVER_IDENTITY, settings=session).result_rows
            )
            server_uuid, host_name, started_at_ms = rows[0]
            name = ServerName(server_uuid=str(server_uuid), host_digest=sha256_hex(str(host_name).encode()))
            return ServerIdentity(name=name, started_at_ms=int(started_at_ms))
        except Exception as error:  # noqa: BLE001 -- every read failure is "unavailable"
            raise UnavailableError(f"server identity read failed ({type(error).__name__})") from None
