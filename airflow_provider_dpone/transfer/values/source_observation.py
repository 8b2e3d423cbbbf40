"""What a source session reports about the server and one relation, as plain values.

These are the inputs of admission: the adapter fills them from ``system.*`` metadata, the protocol decides on them.
They may carry raw facts (a host name, a policy predicate) because they never leave the process: admission reduces
them to digests before anything is persisted, logged or returned.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from airflow_provider_dpone.core.canonical import tagged_digest
from airflow_provider_dpone.core.typed_digest import MODULUS
from airflow_provider_dpone.transfer.values.raw_snapshot_physical import PartCoverage


class _Observation(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TransportObservation(_Observation):
    """How the session reaches the server. ``scheme`` is ``https``, ``http`` or ``inprocess`` (embedded engine).

    ``pinned`` has no default: the adapter sets it only from what it observed (an HTTP session the endpoint enforces
    on every request, or the one engine of this process), so an unproven endpoint can never pass as pinned.
    """

    scheme: str
    tls_verified: bool
    requires_tls: bool
    bounded_timeouts: bool
    follows_redirects: bool = False
    pinned: bool
    endpoint_authority: str = Field(description="host:port or engine path; hashed before it is bound anywhere")


class ServerObservation(_Observation):
    version: str
    revision: int
    timezone: str
    session_timezone: str
    server_uuid: str
    host_identity: str = Field(description="hostName() of the server; hashed before it is bound anywhere")
    macros: tuple[tuple[str, str], ...] = Field(description="system.macros (shard, replica, ...) sorted by name")

    def identity_sha256(self) -> str:
        """The opaque identity of the server reached: ``hostName()``, ``serverUUID()`` and its macros.

        Two replicas of one host image can share a host name, and an in-process engine reports a zero UUID: the
        macros (``replica``, ``shard``) still tell them apart. Only this digest is ever bound or recorded.
        """
        macros = [[name, value] for name, value in self.macros]
        return tagged_digest("dpone.endpoint-identity.v1", self.host_identity, self.server_uuid, macros)

    def without_identity(self) -> dict[str, object]:
        """Version, revision and time zones: what must not change, apart from which server answers."""
        return self.model_dump(mode="json", exclude={"server_uuid", "host_identity", "macros"})


class ColumnObservation(_Observation):
    name: str
    type: str
    default_kind: str
    default_expression: str
    in_partition_key: bool
    in_sorting_key: bool
    in_primary_key: bool


class RelationObservation(_Observation):
    """One relation as ``system.databases``/``system.tables``/``system.columns`` report it (``exists`` False if not)."""

    exists: bool
    database_engine: str = ""
    engine: str = ""
    engine_full: str = ""
    uuid: str = ""
    is_temporary: bool = False
    partition_key: str = ""
    sorting_key: str = ""
    primary_key: str = ""
    columns: tuple[ColumnObservation, ...] = ()


class RowPolicyObservation(_Observation):
    policy_id: str
    name: str
    select_filter: str
    is_restrictive: bool
    apply_to_all: bool
    apply_to_list: tuple[str, ...]
    apply_to_except: tuple[str, ...]


class AccessObservation(_Observation):
    """The effective principal, its roles, and the row policies defined on the relation.

    ``policies_inspectable`` is False when the account may not read ``system.row_policies``: then applicability of a
    policy cannot be proven and admission refuses (a policy is never assumed absent).
    """

    user: str
    current_roles: tuple[str, ...]
    enabled_roles: tuple[str, ...]
    policies_inspectable: bool
    row_policies: tuple[RowPolicyObservation, ...] = ()


class SettingsObservation(_Observation):
    """Effective setting values under the frozen query-level overlay; a name the server lacks is absent."""

    values: dict[str, str]


class ReplicaObservation(_Observation):
    """``system.replicas`` for the relation (``present`` False for a non-replicated table)."""

    present: bool
    replica_name: str = ""
    zookeeper_path: str = ""
    replica_path: str = ""
    is_readonly: bool = False
    is_session_expired: bool = False


class PartObservation(_Observation):
    name: str
    partition_id: str
    rows: int
    level: int
    data_version: int
    min_block: int
    max_block: int
    checksum: str
    has_lightweight_delete: bool


class PhysicalObservation(_Observation):
    """Active parts of the bounded partition set; ``truncated`` when the cap was hit (admission refuses then)."""

    parts: tuple[PartObservation, ...]
    truncated: bool


class SelectedRows(_Observation):
    """The server's own account of the rows the data SELECT selects, read in a separate aggregate statement:
    ``rows`` and ``typed_sum`` (the sum modulo 2**256 of the rows' typed SHA-256s, which the server recomputes over
    its own values) always, and per part (``parts``, sorted by name: the same coverage the worker accumulates from
    the rows it receives) when the SELECT carries part provenance."""

    rows: int = Field(ge=0)
    typed_sum: int = Field(ge=0, lt=MODULUS)
    parts: tuple[PartCoverage, ...] | None = None


class MutationObservation(_Observation):
    pending_classic_mutations: int
