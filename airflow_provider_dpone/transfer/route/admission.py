"""Source admission: observe, decide, and freeze the profile and chunk plan before any row I/O.

The order: transport authority, server, relation and engine, schema, window, access
context, effective read settings, pending mutations, the frozen profile and ``source_query_id``, then the bounded
pre-query physical profile. Every refusal is a stable ``native_transfer.*`` code raised here, before extraction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from airflow_provider_dpone.core.canonical import sha256_hex, tagged_digest
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer_options import NativeTransferOptions, ReplicaScope
from airflow_provider_dpone.transfer.ports import SnapshotSourceSession
from airflow_provider_dpone.transfer.route.engine_admission import admit_legacy_engine, admit_raw_engine
from airflow_provider_dpone.transfer.route.physical import physical_profile
from airflow_provider_dpone.transfer.route.read_profile import (
    FILTER_SETTINGS,
    admit_access,
    admit_settings,
    frozen_settings,
)
from airflow_provider_dpone.transfer.route.schema_admission import admit_columns, implicit_calendar_is_utc
from airflow_provider_dpone.transfer.route.selector import SnapshotRequirement, resolve_selector
from airflow_provider_dpone.transfer.route.window import admit_window
from airflow_provider_dpone.transfer.values.chunk import NativeChunkPlan, RelationRef
from airflow_provider_dpone.transfer.values.query import SnapshotQuery, query_record
from airflow_provider_dpone.transfer.values.raw_snapshot import (
    KeysRecord,
    RawSnapshotProfile,
    ReplicaRecord,
    ServerRecord,
    SettingRecord,
    TransportRecord,
    legacy_source_binding_sha256,
    raw_source_query_id,
)
from airflow_provider_dpone.transfer.values.raw_snapshot_physical import MAX_PARTS, PhysicalProfile
from airflow_provider_dpone.transfer.values.row_digest import RowDigest
from airflow_provider_dpone.transfer.values.source_observation import (
    AccessObservation,
    RelationObservation,
    ReplicaObservation,
    ServerObservation,
    SettingsObservation,
    TransportObservation,
)
from airflow_provider_dpone.transfer.values.utc_window import UtcWindow


@dataclass(frozen=True)
class SourceRequest:
    """What one operation asks of the source (the caller derives ``operation_id`` and ``route_fingerprint``)."""

    operation_id: str
    route_fingerprint: str
    relation: RelationRef
    window: UtcWindow | None
    options: NativeTransferOptions
    max_execution_time_seconds: int = 3600
    block_rows: int = 65_536
    row_digest: RowDigest = RowDigest.TYPED_SHA256


@dataclass(frozen=True)
class AuthorityFingerprint:
    """Digests of everything that must stay unchanged until EOF (in memory only, never persisted).

    Replica status (read-only, session expired) is diagnostic context only: the identity must not change, its
    health may. ``endpoint`` is the identity of the server reached (:meth:`ServerObservation.identity_sha256`).
    """

    relation: str
    access: str
    settings: str
    replica: str
    server: str
    endpoint: str

    def drifted(self, other: AuthorityFingerprint) -> list[str]:
        names = ("relation", "access", "settings", "replica", "server", "endpoint")
        return [name for name in names if getattr(self, name) != getattr(other, name)]

    def require_unchanged(
        self, other: AuthorityFingerprint, on_drift: Callable[[str, list[str]], object] = lambda _code, _names: None
    ) -> None:
        """Another server answering is endpoint drift; any other change is snapshot drift. ``on_drift`` hears the
        code and the drifted names first (the provenance-drift alert)."""
        drifted = self.drifted(other)
        if not drifted:
            return
        code = (
            "native_transfer.source_endpoint_drift"
            if "endpoint" in drifted
            else "native_transfer.source_snapshot_drift"
        )
        on_drift(code, drifted)
        if "endpoint" in drifted:
            raise DponeError(code, "another server answered at EOF than at admission")
        raise DponeError(code, "changed before EOF: " + ", ".join(drifted))


@dataclass(frozen=True)
class AdmittedSnapshot:
    requirement: SnapshotRequirement
    plan: NativeChunkPlan
    query: SnapshotQuery
    profile: RawSnapshotProfile | None
    authority: AuthorityFingerprint | None
    relation_uuid: str
    partition_ids: tuple[str, ...] | None
    frozen: dict[str, str]


def check_transport(observed: TransportObservation) -> TransportRecord:
    """One direct, bounded, verified-when-required endpoint; no redirect, no unpinned balancer."""
    if observed.requires_tls and (observed.scheme != "https" or not observed.tls_verified):
        raise DponeError("native_transfer.source_transport_unsupported", "TLS is required but not verified")
    if observed.scheme == "https" and not observed.tls_verified:
        raise DponeError("native_transfer.source_transport_unsupported", "HTTPS without certificate verification")
    if not observed.bounded_timeouts:
        raise DponeError("native_transfer.source_transport_unsupported", "timeouts are not bounded")
    if observed.follows_redirects:
        raise DponeError("native_transfer.source_transport_unsupported", "redirects are followed")
    if not observed.pinned:
        raise DponeError("native_transfer.replica_scope_unproven", "endpoint is not pinned to one server")
    if observed.scheme not in ("https", "http", "inprocess"):
        raise DponeError("native_transfer.source_transport_unsupported", "unknown transport scheme")
    scheme = "https" if observed.scheme == "https" else "http" if observed.scheme == "http" else "inprocess"
    return TransportRecord(scheme=scheme, tls_verified=observed.tls_verified)


def endpoint_authority_sha256(
    transport: TransportRecord, observed: TransportObservation, server: ServerObservation
) -> str:
    """The sanitized endpoint authority the profile binds: the address dialled AND the identity of the server that
    answered on the pinned session (host name, server UUID, macros), as one opaque digest."""
    return tagged_digest(
        "dpone.endpoint-authority.v2", transport.scheme, observed.endpoint_authority, server.identity_sha256()
    )


def fingerprint(
    relation: RelationObservation,
    access: AccessObservation,
    settings: SettingsObservation,
    replica: ReplicaObservation,
    server: ServerObservation,
) -> AuthorityFingerprint:
    return AuthorityFingerprint(
        relation=tagged_digest("dpone.authority.relation.v1", relation.model_dump(mode="json")),
        access=tagged_digest("dpone.authority.access.v1", access.model_dump(mode="json")),
        settings=tagged_digest("dpone.authority.settings.v1", settings.model_dump(mode="json")),
        replica=tagged_digest(
            "dpone.authority.replica.v1",
            replica.model_dump(mode="json", exclude={"is_readonly", "is_session_expired"}),
        ),
        server=tagged_digest("dpone.authority.server.v2", server.without_identity()),
        endpoint=server.identity_sha256(),
    )


def observe_authority(
    session: SnapshotSourceSession, relation: RelationRef, frozen: dict[str, str]
) -> AuthorityFingerprint:
    """Re-observe relation, access, effective settings, replica and server as comparable digests."""
    return fingerprint(
        session.relation(relation),
        session.access(relation),
        session.settings(frozen, sorted({*frozen, *FILTER_SETTINGS})),
        session.replica(relation),
        session.server(),
    )


def capture_physical(session: SnapshotSourceSession, admitted: AdmittedSnapshot) -> PhysicalProfile:
    """The bounded, checksum-bearing physical profile (called before and after the SELECT)."""
    observed = session.physical(admitted.plan.relation, admitted.partition_ids, MAX_PARTS)
    return physical_profile(admitted.relation_uuid, admitted.partition_ids, observed)


def admit(
    session: SnapshotSourceSession, request: SourceRequest, invocation_id: str, vendor_query_id: str
) -> AdmittedSnapshot:
    """Admit the relation under the declared selector and freeze plan, query and (raw) profile."""
    requirement = resolve_selector(request.options)
    transport_observed = session.transport()
    transport = check_transport(transport_observed)
    server = session.server()
    relation = session.relation(request.relation)
    replica = session.replica(request.relation)
    engine = admit_raw_engine(requirement, relation, replica) if requirement.raw else None
    if engine is None:
        admit_legacy_engine(relation)
    implicit_utc = implicit_calendar_is_utc(server.timezone, server.session_timezone)
    columns, schema = admit_columns(relation.columns, raw=requirement.raw, implicit_utc=implicit_utc)
    window = admit_window(request.window, columns, relation.partition_key, implicit_utc=implicit_utc)
    legacy = legacy_source_binding_sha256(request.relation.identity(), request.route_fingerprint, request.window)
    frozen = frozen_settings(request.max_execution_time_seconds)
    settings_for_query = frozen if requirement.raw else {"max_execution_time": frozen["max_execution_time"]}
    query = SnapshotQuery(
        relation=request.relation,
        projection=columns,
        window=window.window,
        provenance=requirement.raw,
        settings=tuple(SettingRecord(name=name, value=value) for name, value in sorted(settings_for_query.items())),
        vendor_query_id=vendor_query_id,
        block_rows=request.block_rows,
        expected=None,
        row_digest=request.row_digest,
    )
    profile: RawSnapshotProfile | None = None
    authority: AuthorityFingerprint | None = None
    source_query_id = legacy
    if engine is not None:
        access_observed = session.access(request.relation)
        access = admit_access(access_observed)
        settings_observed = session.settings(frozen, sorted({*frozen, *FILTER_SETTINGS}))
        read_settings, filters = admit_settings(settings_observed, frozen)
        if session.mutations(request.relation).pending_classic_mutations:
            raise DponeError(
                "native_transfer.source_read_profile_unsupported",
                "pending classic mutations with apply_mutations_on_fly=0",
            )
        record = query_record(query)
        query = query.model_copy(update={"expected": record})
        connected = requirement.replica_scope is ReplicaScope.CONNECTED_REPLICA
        profile = RawSnapshotProfile(
            engine=engine,
            relation_uuid=relation.uuid,
            database_engine="Atomic",
            schema_columns=schema,
            keys=KeysRecord(
                partition_key_sha256=sha256_hex(relation.partition_key),
                sorting_key_sha256=sha256_hex(relation.sorting_key),
                primary_key_sha256=sha256_hex(relation.primary_key),
            ),
            window=request.window,
            read_settings=read_settings,
            filters=filters,
            pending_classic_mutations=0,
            server=ServerRecord(
                version=server.version,
                revision=server.revision,
                timezone=server.timezone,
                session_timezone=server.session_timezone,
            ),
            endpoint_authority_sha256=endpoint_authority_sha256(transport, transport_observed, server),
            transport=transport,
            replica=ReplicaRecord(
                scope=requirement.replica_scope,
                identity_sha256=(
                    tagged_digest("dpone.replica-identity.v1", replica.zookeeper_path, replica.replica_name)
                    if connected
                    else None
                ),
            ),
            access=access,
            query=record,
        )
        source_query_id = raw_source_query_id(legacy, profile.sha256())
        authority = fingerprint(relation, access_observed, settings_observed, replica, server)
    plan = NativeChunkPlan(
        operation_id=request.operation_id,
        invocation_id=invocation_id,
        route_fingerprint=request.route_fingerprint,
        selector=requirement.declared,
        relation=request.relation,
        window=request.window,
        columns=columns,
        chunk_rows=request.options.execution.chunk_rows,
        max_chunk_bytes=request.options.execution.max_chunk_bytes,
        legacy_source_binding_sha256=legacy,
        source_query_id=source_query_id,
        row_digest=request.row_digest,
    )
    return AdmittedSnapshot(
        requirement=requirement,
        plan=plan,
        query=query,
        profile=profile,
        authority=authority,
        relation_uuid=relation.uuid,
        partition_ids=window.partition_ids,
        frozen=frozen,
    )
