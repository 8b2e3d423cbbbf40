""":class:`~airflow_provider_dpone.cluster.ports.MemberSession` on one member's direct connection.

Failure mapping of the mutations (each sent once, under the process-wide guard):

* ``create_table`` / ``drop_table`` -- an error answered by the server is a refusal (:class:`MutationRejectedError`):
  single-table DDL in an Atomic database either happens or not. No answer is :class:`OutcomeUnknownError`.
* ``load`` -- *any* failure after the request left is :class:`OutcomeUnknownError`: an INSERT of several blocks can
  fail after some blocks were written, so even an error answer does not prove "no effect". The protocol observes
  the candidate and rebuilds it when it is not exact; nothing is ever appended to a candidate twice. The one
  exception: artifact bytes that fail verification while streaming raise :class:`ArtifactInvalidError`, so the
  protocol stops instead of rebuilding from the same bad bytes.
* a content read (the digest of a candidate or of a published table) runs under the server-side verification budget
  (``max_execution_time``, ``timeout_overflow_mode='throw'``); the server's ``TIMEOUT_EXCEEDED`` is
  :class:`VerificationBudgetExceededError` (``DPONE_CLICKHOUSE_CLUSTER_VERIFICATION_BUDGET_EXCEEDED``), an
  unavailable read: never a success, never a mismatch, and a retry verifies again.
* ``exchange_tables`` (the fence's probe of two scratch tables) -- as ``create_table``, except that ClickHouse's
  refusal for an OS or filesystem without ``renameat2(RENAME_EXCHANGE)`` is :class:`ExchangeUnsupportedError`:
  ``DatabaseAtomic::renameTable`` (src/Databases/DatabaseAtomic.cpp) throws Code 48 ``NOT_IMPLEMENTED`` ("RENAME
  EXCHANGE is not supported because exchanging files is not supported by the OS") when the kernel is older than
  3.15, and ``renameExchange`` (src/Common/renameat2.cpp) Code 1 ``UNSUPPORTED_METHOD`` ("System call renameat2()
  is not supported") when the filesystem answers ``EINVAL`` (or the kernel ``ENOSYS``). Within one Atomic database
  neither code has another cause.
* the UUID guard of ``load`` and ``drop_table`` (the probe right before) refuses with
  :class:`MutationRejectedError` when the name does not hold exactly the expected UUID: nothing is sent.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from clickhouse_connect.driver.exceptions import Error

from airflow_provider_dpone.cluster.clickhouse import part_content, sql_digest, sql_member
from airflow_provider_dpone.cluster.clickhouse.endpoint import Endpoint
from airflow_provider_dpone.cluster.clickhouse.oneshot import (
    PROCESS_GUARD,
    TIMEOUT_EXCEEDED,
    MutationGuard,
    Refused,
    classify,
    error_code,
    mutation_query_id,
    sanitized,
)
from airflow_provider_dpone.cluster.ports import ArtifactHandle, ReplicaStatus, TableObservation, TableRead, TableSpec
from airflow_provider_dpone.cluster.values.clickhouse_engines import EngineClass, classify_engine
from airflow_provider_dpone.cluster.values.inventory import AdmittedMember
from airflow_provider_dpone.core.clickhouse.server_codes import ACCESS_DENIED
from airflow_provider_dpone.core.errors import (
    AccessDeniedError,
    ArtifactInvalidError,
    DponeError,
    ExchangeUnsupportedError,
    MutationRejectedError,
    OutcomeUnknownError,
    UnavailableError,
    VerificationBudgetExceededError,
)

_PARTED = frozenset({EngineClass.MERGE_TREE, EngineClass.REPLICATED_MERGE_TREE, EngineClass.SHARED_MERGE_TREE})
"""Engines whose content is summed per active part (``_part``); any other is digested in one read."""

SYNC_DDL: dict[str, Any] = {"wait_end_of_query": 1}

EXCHANGE_UNSUPPORTED_CODES: Final[frozenset[int]] = frozenset({1, 48})
"""``UNSUPPORTED_METHOD`` (renameat2 refused by the filesystem) and ``NOT_IMPLEMENTED`` (a kernel without it)."""

SYNC_READ_MARGIN_SECONDS: Final[int] = 2
"""How long before the client's HTTP read timeout the server's ``SYSTEM SYNC REPLICA`` bound must elapse."""


def read_timeout_seconds(client: Any) -> float | None:
    """The HTTP read timeout of a clickhouse-connect client (``None``: unbounded or not an HTTP client)."""
    value = getattr(getattr(client, "timeout", None), "read_timeout", None)
    return float(value) if isinstance(value, int | float) else None


def sync_bound(timeout_seconds: float, read_timeout: float | None) -> int:
    """Whole seconds of the server-side wait: the requested bound, ended before the client stops reading."""
    bound = max(1, math.ceil(timeout_seconds))
    if read_timeout is not None:
        bound = min(bound, max(1, math.floor(read_timeout) - SYNC_READ_MARGIN_SECONDS))
    return bound


class ClickHouseMemberSession:
    def __init__(
        self,
        endpoint: Endpoint,
        member_id: str,
        *,
        guard: MutationGuard = PROCESS_GUARD,
        verification_seconds: int = sql_digest.DEFAULT_VERIFICATION_SECONDS,
    ) -> None:
        self.endpoint = endpoint
        self.member_id = member_id
        self.guard = guard
        self.verification_seconds = verification_seconds

    # --- reads --------------------------------------------------------------------------------------------------

    def _rows(self, statement: str, what: str) -> list[Any]:
        try:
            return list(self.endpoint.reader().query(statement).result_rows)
        except Exception as error:  # noqa: BLE001 -- every read failure is "unavailable"
            raise UnavailableError(f"member {self.member_id}: {what} failed ({type(error).__name__})") from None

    def _content_rows(self, statement: str, what: str) -> list[Any]:
        """A content read under the verification budget; the server's timeout is the budget's coded failure."""
        settings = sql_digest.verification_settings(self.verification_seconds)
        try:
            return list(self.endpoint.reader().query(statement, settings=settings).result_rows)
        except Exception as error:  # noqa: BLE001 -- every read failure is "unavailable"
            if error_code(error) == TIMEOUT_EXCEEDED:
                detail = f"member {self.member_id}: {what} over {self.verification_seconds}s"
                raise VerificationBudgetExceededError(
                    str(DponeError("DPONE_CLICKHOUSE_CLUSTER_VERIFICATION_BUDGET_EXCEEDED", detail))
                ) from None
            raise UnavailableError(f"member {self.member_id}: {what} failed ({type(error).__name__})") from None

    def current_uuid(self, database: str, table: str) -> str | None:
        """The UUID the name holds right now, or ``None`` when the name is free."""
        rows = self._rows(sql_member.uuid_probe(database, table), "UUID probe")
        return str(rows[0][0]) if rows else None

    def table_uuids(self, database: str, tables: tuple[str, ...]) -> tuple[str | None, ...]:
        rows = self._rows(sql_member.uuid_snapshot(database, tables), "UUID snapshot")
        found = {str(name): str(uuid) for name, uuid in rows}
        return tuple(found.get(table) for table in tables)

    def observe_table(self, read: TableRead) -> TableObservation:
        database, table, with_content = read.database, read.table, read.with_content
        with_parts, digest_version, known_parts = read.with_parts, read.digest_version, read.known_parts
        parts_read = with_content or with_parts  # in the metadata statement, before the content: sql_digest
        meta = self._rows(sql_member.observe_metadata(database, table, with_parts=parts_read), "metadata read")
        if not meta:
            return TableObservation.absent()
        uuid, engine, columns, *active = meta[0]
        uuid, engine = str(uuid), str(engine)
        schema = tuple((str(name), str(type_)) for name, type_, _ in columns)
        observed = TableObservation(exists=True, uuid=uuid, engine=engine, columns=schema)
        try:
            listed = part_content.listing(active[0], uuid) if parts_read else None
            if listed is not None:
                observed = observed.model_copy(update={"parts_digest": sql_digest.parts_digest(uuid, listed)})
            content = None
            parted = classify_engine(engine) in _PARTED
            if listed is not None and parted and not with_content:
                # a MergeTree table holds its rows only in active parts: the rows listed with them (between the
                # subquery's UUID and the statement's own, which agree) are this very table's, counted by the
                # server with the part set, no second read. A lightweight delete's masked rows are included: such
                # a table never equals a count recorded from its rows, so it is digested again, never reused
                return observed.model_copy(update={"row_count": part_content.listed_rows(active[0])})
            if listed == () and parted:
                # no active part: this very table is empty, its content digest the empty multiset's (a sum over no
                # rows): nothing left to read
                content = part_content.Content(0, sql_digest.content_digest(0, 0, digest_version), (), 0)
            elif with_content and listed is not None and parted:
                target = part_content.DigestedTable(database, table, uuid, schema, digest_version)
                content = part_content.read_content(self._content_rows, target, listed, known_parts)
        except part_content.TableChangedError:
            raise UnavailableError(f"member {self.member_id}: the table changed during observation") from None
        if content is not None:
            return observed.model_copy(
                update={
                    "row_count": content.row_count,
                    "content_digest": content.content_digest,
                    "part_digests": content.part_digests,
                    "parts_read": content.parts_read,
                }
            )
        statement = sql_digest.table_content(database, table, schema if with_content else None, digest_version)
        reader = self._content_rows if with_content else self._rows
        count, *digest, bound_uuid = reader(statement, "content read")[0]
        if bound_uuid != uuid:
            raise UnavailableError(f"member {self.member_id}: the table changed during observation")
        content_digest = None
        if with_content:
            content_digest = sql_digest.content_digest(int(count), int(digest[0]), digest_version)
        return observed.model_copy(update={"row_count": int(count), "content_digest": content_digest})

    def replica_status(self, database: str, table: str) -> ReplicaStatus | None:
        rows = self._rows(sql_member.replica_status(database, table), "replica status read")
        if not rows:
            return None
        values = dict(zip(sql_member.REPLICA_COLUMNS, rows[0], strict=True))
        values["is_readonly"] = bool(values["is_readonly"])  # UInt8 on the wire
        return ReplicaStatus.model_validate(values)

    def sync_replica(self, database: str, table: str, *, timeout_seconds: float) -> bool:
        """Bounded ``SYSTEM SYNC REPLICA``; ``False`` when the server's bound elapsed (Code 159), and
        :class:`AccessDeniedError` when the account lacks the ``SYSTEM SYNC REPLICA`` grant (Code 497).

        The server answers nothing while it waits, so its bound must end before the client's HTTP read timeout, or
        the wait ends as a transport error instead of the server's "not yet". The bound sent is therefore the
        requested one, clamped to the read client's timeout minus :data:`SYNC_READ_MARGIN_SECONDS`.
        """
        client = self.endpoint.reader()
        bound = sync_bound(timeout_seconds, read_timeout_seconds(client))
        try:
            client.command(sql_member.sync_replica(database, table), settings={"receive_timeout": bound})
        except Error as error:
            if error_code(error) == TIMEOUT_EXCEEDED:
                return False
            if error_code(error) == ACCESS_DENIED:
                raise AccessDeniedError(
                    f"member {self.member_id}: SYNC REPLICA refused (Code {ACCESS_DENIED})"
                ) from None
            raise UnavailableError(f"member {self.member_id}: SYNC REPLICA failed ({type(error).__name__})") from None
        return True

    # --- mutations ----------------------------------------------------------------------------------------------

    def create_table(self, database: str, table: str, uuid: str, spec: TableSpec) -> None:
        statement = sql_member.create_table(database, table, uuid, spec)
        self._ddl("create", statement)

    def drop_table(self, database: str, table: str, uuid: str) -> None:
        statement = sql_member.drop_table(database, table, uuid)
        self._require_uuid(database, table, uuid)
        self._ddl("drop", statement)

    def load(
        self,
        database: str,
        table: str,
        uuid: str,
        artifact: ArtifactHandle,
        *,
        query_id: str,
        dedup_token: str,
    ) -> None:
        self._require_uuid(database, table, uuid)
        self.guard.claim(query_id)
        try:
            self.endpoint.mutator().raw_insert(
                sql_member.load_target(database, table),
                column_names=[column.name for column in artifact.receipt.columns],
                insert_block=iter(artifact.chunks()),
                fmt="Native",
                settings=sql_member.load_settings(query_id=query_id, dedup_token=dedup_token),
            )
        except ArtifactInvalidError:
            raise  # the body failed verification while sent: the INSERT never completed, a part may have landed
        except Error as error:
            raise OutcomeUnknownError(f"member {self.member_id}: load {sanitized(classify(error))}") from None

    def _require_uuid(self, database: str, table: str, uuid: str) -> None:
        try:
            current = self.current_uuid(database, table)
        except UnavailableError:
            raise OutcomeUnknownError(f"member {self.member_id}: UUID probe failed; nothing was sent") from None
        if current != uuid:
            raise MutationRejectedError(f"member {self.member_id}: the name does not hold the expected UUID")

    def exchange_tables(self, database: str, left: str, right: str) -> None:
        self._ddl("exchange", sql_member.exchange_tables(database, left, right))

    def _ddl(self, kind: str, statement: str) -> None:
        query_id = mutation_query_id(kind, self.member_id, statement)
        self.guard.claim(query_id)
        try:
            self.endpoint.mutator().command(statement, settings={"query_id": query_id, **SYNC_DDL})
        except Error as error:
            failure = classify(error)
            if kind == "exchange" and isinstance(failure, Refused) and failure.code in EXCHANGE_UNSUPPORTED_CODES:
                raise ExchangeUnsupportedError(f"member {self.member_id}: {kind} {sanitized(failure)}") from None
            if isinstance(failure, Refused):
                raise MutationRejectedError(f"member {self.member_id}: {kind} {sanitized(failure)}") from None
            raise OutcomeUnknownError(f"member {self.member_id}: {kind} {sanitized(failure)}") from None


class ClickHouseMemberSessions:
    """Opens one session per admitted member, over the endpoint the resolver gives for that member."""

    def __init__(
        self, endpoints: Callable[[AdmittedMember], Endpoint], *, guard: MutationGuard = PROCESS_GUARD
    ) -> None:
        self.endpoints = endpoints
        self.guard = guard

    def session(self, member: AdmittedMember) -> ClickHouseMemberSession:
        return ClickHouseMemberSession(self.endpoints(member), member.member_id, guard=self.guard)

    def close(self) -> None:
        """Close the member endpoints when the resolver owns them (``MemberEndpoints``)."""
        close = getattr(self.endpoints, "close", None)
        if callable(close):
            close()
