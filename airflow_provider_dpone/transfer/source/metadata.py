"""Bounded metadata reads of the snapshot source, as observation values for admission.

Read failures map to stable codes: a metadata table the account may not read is
``native_transfer.source_metadata_unavailable`` - except ``system.row_policies``, whose denial is reported as
"not inspectable" so admission refuses with ``source_read_profile_unsupported`` (a policy is never assumed absent).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError, DatabaseError

from airflow_provider_dpone.core.clickhouse.server_codes import ACCESS_DENIED, SESSION_NOT_FOUND
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.typed_digest import MODULUS
from airflow_provider_dpone.transfer.source import sql
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.query import SnapshotQuery
from airflow_provider_dpone.transfer.values.raw_snapshot_physical import PartCoverage
from airflow_provider_dpone.transfer.values.source_observation import (
    AccessObservation,
    ColumnObservation,
    MutationObservation,
    PartObservation,
    PhysicalObservation,
    RelationObservation,
    ReplicaObservation,
    RowPolicyObservation,
    SelectedRows,
    ServerObservation,
    SettingsObservation,
)

SESSION_IS_LOCKED: Final = 373
LOCKED_PAUSES: Final = (0.05, 0.1, 0.2, 0.4, 0.8)
T = TypeVar("T")
_SETTING_REFUSALS: Final = frozenset({115, 164, 452})  # UNKNOWN_SETTING, READONLY, SETTING_CONSTRAINT_VIOLATION


def source_failure(exc: ClickHouseError, code: str, what: str) -> DponeError:
    """The stable error for a failed source request (only the server code is kept: messages name hosts).

    ``ACCESS_DENIED`` is a missing grant, whatever the read: no retry can succeed without it. ``SESSION_NOT_FOUND`` means the request reached a server that does not hold this run's session: another server
    than the one admission observed (a balancer moved it), or the same one restarted. Either way the reads are no
    longer bound to one server, which is endpoint drift whatever the request was.
    """
    server_code = getattr(exc, "code", None)
    if server_code == ACCESS_DENIED:
        return DponeError("native_transfer.source_access_denied", f"{what}: server code {server_code}")
    if server_code == SESSION_NOT_FOUND:
        return DponeError(
            "native_transfer.source_endpoint_drift", f"{what}: the server reached does not hold this run's session"
        )
    return DponeError(code, f"{what}: server code {server_code}" if server_code else f"{what}: {type(exc).__name__}")


def on_session(request: Callable[[], T]) -> T:
    """Send one request of the pinned session, again after a pause while the server answers ``SESSION_IS_LOCKED``.

    A server may send the end of a response before it releases the session, so the next request of this (strictly
    sequential) client can find it still held. The refusal comes before any query runs and every request here is a
    read, so sending it again is safe; the pauses are bounded (1.55 s in all), then the refusal stands.
    """
    for pause in LOCKED_PAUSES:
        try:
            return request()
        except DatabaseError as exc:
            if getattr(exc, "code", None) != SESSION_IS_LOCKED:
                raise
        time.sleep(pause)
    return request()


def _rows(client: Client, query: str, parameters: dict[str, Any], what: str) -> list[Sequence[Any]]:
    try:
        return list(on_session(lambda: client.query(query, parameters=parameters)).result_rows)
    except ClickHouseError as exc:
        raise source_failure(exc, "native_transfer.source_metadata_unavailable", what) from None


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def read_server(client: Client) -> ServerObservation:
    row = _rows(client, sql.SERVER_SQL, {}, "server")[0]
    version, revision, timezone, session_timezone, server_uuid, host, macros = row
    return ServerObservation(
        version=_text(version),
        revision=int(revision),
        timezone=_text(timezone),
        session_timezone=_text(session_timezone),
        server_uuid=_text(server_uuid),
        host_identity=_text(host),
        macros=tuple((_text(name), _text(value)) for name, value in macros),
    )


def read_relation(client: Client, relation: RelationRef) -> RelationObservation:
    names = {"database": relation.database, "table": relation.table}
    databases = _rows(client, sql.DATABASE_SQL, {"database": relation.database}, "databases")
    tables = _rows(client, sql.TABLE_SQL, names, "tables")
    if not databases or not tables:
        return RelationObservation(exists=False)
    engine, engine_full, uuid, is_temporary, partition_key, sorting_key, primary_key = tables[0]
    # system.columns lists only the columns the account may see: SELECT on every column is proven first, so a
    # column-restricted account is refused for its grants, not admitted (or misjudged) on a partial column list
    _rows(client, sql.relation_privilege_probe(relation), {}, "SELECT privilege on the relation")
    columns = tuple(
        ColumnObservation(
            name=_text(name),
            type=_text(type_),
            default_kind=_text(kind),
            default_expression=_text(expression),
            in_partition_key=bool(in_partition),
            in_sorting_key=bool(in_sorting),
            in_primary_key=bool(in_primary),
        )
        for name, type_, kind, expression, in_partition, in_sorting, in_primary in _rows(
            client, sql.COLUMNS_SQL, names, "columns"
        )
    )
    return RelationObservation(
        exists=True,
        database_engine=_text(databases[0][0]),
        engine=_text(engine),
        engine_full=_text(engine_full),
        uuid=_text(uuid),
        is_temporary=bool(is_temporary),
        partition_key=_text(partition_key),
        sorting_key=_text(sorting_key),
        primary_key=_text(primary_key),
        columns=columns,
    )


def read_access(client: Client, relation: RelationRef) -> AccessObservation:
    user, current_roles, enabled_roles = _rows(client, sql.PRINCIPAL_SQL, {}, "principal")[0]
    try:
        parameters = {"database": relation.database, "table": relation.table}
        rows = on_session(lambda: client.query(sql.ROW_POLICIES_SQL, parameters=parameters)).result_rows
    except DatabaseError as exc:
        if getattr(exc, "code", None) != ACCESS_DENIED:
            raise source_failure(exc, "native_transfer.source_metadata_unavailable", "row policies") from None
        return AccessObservation(
            user=_text(user),
            current_roles=tuple(sorted(map(_text, current_roles))),
            enabled_roles=tuple(sorted(map(_text, enabled_roles))),
            policies_inspectable=False,
        )
    policies = tuple(
        RowPolicyObservation(
            policy_id=_text(policy_id),
            name=_text(name),
            select_filter=_text(select_filter or ""),
            is_restrictive=bool(restrictive),
            apply_to_all=bool(to_all),
            apply_to_list=tuple(sorted(map(_text, to_list))),
            apply_to_except=tuple(sorted(map(_text, to_except))),
        )
        for policy_id, name, select_filter, restrictive, to_all, to_list, to_except in rows
    )
    return AccessObservation(
        user=_text(user),
        current_roles=tuple(sorted(map(_text, current_roles))),
        enabled_roles=tuple(sorted(map(_text, enabled_roles))),
        policies_inspectable=True,
        row_policies=tuple(sorted(policies, key=lambda policy: policy.policy_id)),
    )


def observe_settings(client: Client, overlay: Mapping[str, str], names: Sequence[str]) -> SettingsObservation:
    """Effective values under the query-level overlay (a refused overlay is an unsupported read profile)."""
    try:
        rows = on_session(
            lambda: client.query(sql.SETTINGS_SQL, parameters={"names": list(names)}, settings=dict(overlay))
        ).result_rows
    except DatabaseError as exc:
        code = getattr(exc, "code", None)
        if code in _SETTING_REFUSALS:
            raise DponeError(
                "native_transfer.source_read_profile_unsupported", f"server refused the frozen settings ({code})"
            ) from None
        raise source_failure(exc, "native_transfer.source_metadata_unavailable", "settings") from None
    return SettingsObservation(values={_text(name): _text(value) for name, value in rows})


def read_replica(client: Client, relation: RelationRef) -> ReplicaObservation:
    rows = _rows(client, sql.REPLICA_SQL, {"database": relation.database, "table": relation.table}, "replicas")
    if not rows:
        return ReplicaObservation(present=False)
    name, zookeeper_path, replica_path, readonly, expired = rows[0]
    return ReplicaObservation(
        present=True,
        replica_name=_text(name),
        zookeeper_path=_text(zookeeper_path),
        replica_path=_text(replica_path),
        is_readonly=bool(readonly),
        is_session_expired=bool(expired),
    )


def read_mutations(client: Client, relation: RelationRef) -> MutationObservation:
    rows = _rows(client, sql.MUTATIONS_SQL, {"database": relation.database, "table": relation.table}, "mutations")
    return MutationObservation(pending_classic_mutations=int(rows[0][0]))


def read_physical(
    client: Client, relation: RelationRef, partition_ids: Sequence[str] | None, cap: int
) -> PhysicalObservation:
    parameters: dict[str, Any] = {"database": relation.database, "table": relation.table, "limit": cap + 1}
    if partition_ids is not None:
        parameters["partition_ids"] = list(partition_ids)
    rows = _rows(client, sql.parts_sql(partition_ids is not None), parameters, "parts")
    parts = tuple(
        PartObservation(
            name=_text(name),
            partition_id=_text(partition_id),
            rows=int(rows_),
            level=int(level),
            data_version=int(data_version),
            min_block=int(min_block),
            max_block=int(max_block),
            checksum=_text(checksum),
            has_lightweight_delete=bool(lightweight),
        )
        for name, partition_id, rows_, level, data_version, min_block, max_block, checksum, lightweight in rows[:cap]
    )
    return PhysicalObservation(parts=parts, truncated=len(rows) > cap)


def read_selected_rows(client: Client, query: SnapshotQuery, cancel_on_close: Mapping[str, str]) -> SelectedRows:
    """The server's count and typed sum of the rows ``query`` selects, under the query's own frozen settings (and the
    transport's ``cancel_on_close`` settings: a full scan, cancelled by the server when the client hangs up)."""
    text, parameters = sql.render_selected_rows(query)
    settings = {**query.settings_dict(), **cancel_on_close}
    try:
        rows = list(on_session(lambda: client.query(text, parameters=parameters, settings=settings)).result_rows)
    except ClickHouseError as exc:
        raise source_failure(exc, "native_transfer.source_query_failed", "selected rows") from None
    if not query.provenance:
        count, typed_sum = rows[0]
        return SelectedRows(rows=int(count), typed_sum=int(_text(typed_sum)))
    parts = tuple(
        PartCoverage(
            part=_text(part),
            rows=int(count),
            min_offset=int(low),
            max_offset=int(high),
            offsets_hash_sum=int(hashed),
        )
        for part, count, low, high, hashed, _typed in rows
    )
    return SelectedRows(
        rows=sum(part.rows for part in parts), parts=parts, typed_sum=sum(int(_text(row[5])) for row in rows) % MODULUS
    )
