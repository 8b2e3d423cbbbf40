"""Runtime inventory values: what system.clusters and the catalogs say, and the admitted member map.

Endpoints (host, port) are needed in memory to open member connections, but they never enter an identity, the
authority, a receipt, a log line or an error: :class:`MemberEndpoint` is excluded from ``repr`` and from every
serialized form of :class:`AdmittedMember`, and the protocol only ever serializes ``member_id``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, StrictBool, StrictInt, StrictStr

from airflow_provider_dpone.core.canonical import CLOSED, Hex64, MemberId

Position = tuple[int, int]
"""A member's ``(shard_num, replica_num)`` in ``system.clusters``."""


def member_label(member_id: str, shard_num: int | None, replica_num: int | None) -> str:
    """The one name of a member in the task logs and the Test button: ``m<16 hex> (shard S, replica R)``, the
    opaque id with the position a person finds in ``system.clusters`` (never the host). The position comes from the
    inventory the operation bound; ``None`` (the live inventory is not the bound one, so no position is proven) names
    the id alone, saying so."""
    if shard_num is None or replica_num is None:
        return f"{member_id} (position unknown: the inventory changed)"
    return f"{member_id} (shard {shard_num}, replica {replica_num})"


class MemberEndpoint(BaseModel):
    """Where a member answers; in memory only."""

    model_config = CLOSED

    host: StrictStr = Field(min_length=1)
    port: StrictInt = Field(ge=1, le=65535)

    def __repr__(self) -> str:  # never print endpoints
        return "MemberEndpoint(<redacted>)"

    __str__ = __repr__


class InventoryRow(BaseModel):
    """One row of ``system.clusters`` for the cluster (as read, before any decision), with the
    ``distributed_ddl_entry_format_version`` the reading session has on the coordinator (one value, read by the same
    statement, so the same on every row): the ``ON CLUSTER`` dispatch runs under that user's settings too."""

    model_config = CLOSED

    cluster: StrictStr
    shard_num: StrictInt = Field(ge=1)
    replica_num: StrictInt = Field(ge=1)
    internal_replication: StrictBool
    endpoint: MemberEndpoint = Field(repr=False)
    ddl_entry_format_version: StrictInt = Field(ge=0)


class AdmittedMember(BaseModel):
    """One admitted member: its opaque id and position; the endpoint travels only to the member-session provider."""

    model_config = CLOSED

    member_id: MemberId
    shard_num: StrictInt = Field(ge=1)
    replica_num: StrictInt = Field(ge=1)
    endpoint: MemberEndpoint = Field(repr=False, exclude=True)

    @property
    def label(self) -> str:
        """The member's one name (:func:`member_label`)."""
        return member_label(self.member_id, self.shard_num, self.replica_num)


class AdmittedInventory(BaseModel):
    """The complete admitted member map, ordered by ``member_id`` (the stable staging order)."""

    model_config = CLOSED

    cluster: StrictStr
    internal_replication: StrictBool
    members: tuple[AdmittedMember, ...]
    digest: Hex64

    @property
    def member_ids(self) -> tuple[str, ...]:
        return tuple(member.member_id for member in self.members)

    def positions(self, bound_digest: str) -> dict[str, Position]:
        """Each member's ``(shard_num, replica_num)`` by id when this is the inventory ``bound_digest`` names (the
        digest covers every position: equal digests, equal positions); empty when it is not, so a position is
        never guessed."""
        if bound_digest != self.digest:
            return {}
        return {member.member_id: (member.shard_num, member.replica_num) for member in self.members}

    def member(self, member_id: str) -> AdmittedMember:
        for candidate in self.members:
            if candidate.member_id == member_id:
                return candidate
        raise KeyError(member_id)


class ColumnFact(BaseModel):
    """A column as ``system.columns`` reports it; ``default_kind`` is empty when the column has no default."""

    model_config = CLOSED

    name: StrictStr
    type: StrictStr
    default_kind: StrictStr = ""


class TableFacts(BaseModel):
    """Catalog facts of one table on one member (``system.tables`` + ``system.columns``)."""

    model_config = CLOSED

    engine: StrictStr
    engine_full: StrictStr
    primary_key: StrictStr
    columns: tuple[ColumnFact, ...]


class MemberFacts(BaseModel):
    """What one member's own direct connection answers at runtime admission, in one request: its database's
    engine (``None``: absent), one table's facts (``None``: absent), and the ``(shard_num, replica_num)`` rows its own
    ``system.clusters`` marks ``is_local`` for the cluster: the proof that the endpoint is that member."""

    model_config = CLOSED

    database_engine: StrictStr | None
    table: TableFacts | None
    local_positions: tuple[tuple[StrictInt, StrictInt], ...]
