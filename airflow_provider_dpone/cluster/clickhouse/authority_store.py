""":class:`~airflow_provider_dpone.cluster.ports.AuthorityStore` on the KeeperMap authority table.

* ``read`` -- one ``SELECT`` with ``_version``; any failure is :class:`UnavailableError`.
* ``create`` -- the strict insert, one-shot. ``KEEPER_EXCEPTION`` naming Keeper's own refusal of the multi-request
  ("Node exists", or "Bad version" for the update) is an :class:`AuthorityConflictError`; any other Keeper failure
  (connection loss, timeout, session expiry: the multi may have applied) and no answer are an
  :class:`OutcomeUnknownError`; another server error a :class:`MutationRejectedError`. Both writes carry
  ``insert_keeper_max_retries = 0`` (``sql_authority.WRITE``), so the server never resends the multi and meets its
  own applied write as a refusal. A strict insert that was acknowledged *is* the proof of creation.
* ``compare_and_set`` -- one-shot ``ALTER ... UPDATE ... WHERE _version = N``, then one read. The caller already
  holds version N (it read or wrote it), so no read precedes the write. The update statement succeeds *without
  effect* when its ``WHERE`` matches nothing, so the outcome is proven by the versions read after it
  (:func:`~airflow_provider_dpone.cluster.values.authority.row.judge_read_back`). A key's version only grows and
  authority rows are never deleted, so a read of at most N (or no row) cannot be the key's state after our write
  was acknowledged: it is a read served by a Keeper server that has not applied the latest writes yet. ZooKeeper
  and ClickHouse Keeper order writes linearizably but serve reads from the server a session is connected to, and
  KeeperMap adds no ``sync`` before a read: ``StorageKeeperMap::getClient`` (src/Storages/StorageKeeperMap.cpp)
  calls ``sync(zk_root_path)`` only when it opens a new Keeper session, and ``getBySerializedKeys`` reads with a
  plain ``tryGet``. One ClickHouse server sees its own session's writes (FIFO client order), but a coordinator
  endpoint that spans several servers can send the read to another server, whose session may lag:

  ===============================================  ===============================================
  observed after the update                        outcome
  ===============================================  ===============================================
  version N + 1 and exactly our row                applied
  version N + 1, another row                       conflict (another writer made N -> N + 1)
  no row, or version <= N                          not yet known: :class:`ReadBackOlderError`
  version > N + 1, or no answer                    outcome unknown
  ===============================================  ===============================================

  The caller resolves "not yet known" by reading again within a bound (``cluster/protocol/authority_io.py``),
  never by repeating the write. "Exactly our row" includes the caller-specific write id inside the payload, so
  another writer's equal-looking row cannot be mistaken for ours.
"""

from __future__ import annotations

from clickhouse_connect.driver.exceptions import Error

from airflow_provider_dpone.cluster.clickhouse import sql_authority
from airflow_provider_dpone.cluster.clickhouse.endpoint import Endpoint
from airflow_provider_dpone.cluster.clickhouse.oneshot import (
    KEEPER_EXCEPTION,
    PROCESS_GUARD,
    MutationGuard,
    Refused,
    classify,
    mutation_query_id,
    sanitized,
)
from airflow_provider_dpone.cluster.values.authority.row import (
    AuthorityRow,
    ReadBack,
    VersionedAuthorityRow,
    judge_read_back,
)
from airflow_provider_dpone.core.errors import (
    AuthorityConflictError,
    MutationRejectedError,
    OutcomeUnknownError,
    ReadBackOlderError,
    UnavailableError,
)

SCOPE = "authority"
KEEPER_REFUSALS = ("(Node exists)", "(Bad version)")
"""How ClickHouse names Keeper's refusal of a multi-request (``Transaction failed (Node exists): Op #0, ...``)."""


class ClickHouseAuthorityStore:
    """The authority table in ``database`` on the coordinator (the KeeperMap facade the protocol writes through)."""

    def __init__(self, endpoint: Endpoint, database: str, *, guard: MutationGuard = PROCESS_GUARD) -> None:
        self.endpoint = endpoint
        self.database = database
        self.guard = guard

    def read(self, target_key: str) -> VersionedAuthorityRow | None:
        try:
            rows = self.endpoint.reader().query(sql_authority.read_row(self.database, target_key)).result_rows
            if not rows:
                return None
            if len(rows) > 1:
                raise UnavailableError(f"{len(rows)} rows under one primary key")
            values = dict(zip(sql_authority.READ_COLUMNS, rows[0], strict=True))
            version = values.pop("_version")
            return VersionedAuthorityRow(row=AuthorityRow.model_validate(values), version=version)
        except UnavailableError:
            raise
        except Exception as error:  # noqa: BLE001 -- every read failure is "unavailable"
            raise UnavailableError(f"authority read failed ({type(error).__name__})") from None

    def create(self, row: AuthorityRow) -> None:
        self._send("authority-create", sql_authority.strict_insert(self.database, row))

    def compare_and_set(self, row: AuthorityRow, expected_version: int) -> None:
        self._send("authority-cas", sql_authority.compare_and_set(self.database, row, expected_version))
        try:
            after = self.read(row.target_key)
        except UnavailableError:
            raise OutcomeUnknownError("authority read after compare-and-set failed") from None
        verdict = judge_read_back(after, row, expected_version)
        if verdict is ReadBack.APPLIED:
            return
        if verdict is ReadBack.CONFLICT:
            raise AuthorityConflictError("another write holds the next version")
        if verdict is ReadBack.OLDER:
            raise ReadBackOlderError(f"the read after the update shows a version older than {expected_version + 1}")
        raise OutcomeUnknownError("authority version moved on; the outcome of this write is not provable")

    def _send(self, kind: str, statement: str) -> None:
        query_id = mutation_query_id(kind, SCOPE, statement)
        self.guard.claim(query_id)
        try:
            self.endpoint.mutator().command(statement, settings={"query_id": query_id})
        except Error as error:
            failure = classify(error)
            if isinstance(failure, Refused) and failure.code == KEEPER_EXCEPTION:
                if any(refusal in str(error) for refusal in KEEPER_REFUSALS):
                    raise AuthorityConflictError("Keeper refused the write (Code 999)") from None
                raise OutcomeUnknownError("Keeper failed during the write (Code 999): it may have applied") from None
            if isinstance(failure, Refused):
                raise MutationRejectedError(sanitized(failure)) from None
            raise OutcomeUnknownError(sanitized(failure)) from None
