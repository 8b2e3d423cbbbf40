"""The replication mode's behaviour: everything the two publication protocols *do* differently, named once.

``internal`` publishes a ``Replicated*MergeTree`` table: one replicated candidate, created by one fenced ``ON
CLUSTER`` CREATE, loaded once through one replica, converged on all. ``external`` publishes a direct ``*MergeTree``
table on an ``internal_replication=false`` cluster: every member stages its own candidate. Fencing, the artifact,
publication, cleanup, abort and the void share one machine
(:class:`~airflow_provider_dpone.cluster.protocol.service.PublicationService`); it holds its mode's
:class:`ModeBehaviour` and hands it (or one of its functions) to the steps that differ, and branches on nothing else,
as :class:`~.ddl_step.DdlStep` does for DDL kinds. What the request and admission need of a mode is data, the
request's :class:`~airflow_provider_dpone.cluster.values.replication.ReplicationVariant` (``request.mode``): the
input never depends on the machine.

A mode's functions see only that mode's records: the protocol reaches them after the own-record test
(:meth:`~airflow_provider_dpone.cluster.values.replication.ReplicationVariant.holds`), so each narrows its record once (``as_external``/``as_internal``) and a record of
the other mode is invalid there. Neither mode ever falls back to the other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from airflow_provider_dpone.cluster.protocol.authority_io import Held
from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.protocol.ddl_step import DdlStep
from airflow_provider_dpone.cluster.protocol.replicated_staging import bound_staging_step, stage_replicated
from airflow_provider_dpone.cluster.protocol.results import MemberProgress, member_progress
from airflow_provider_dpone.cluster.protocol.seal import FirstIntents, Observations, external_intents, internal_intents
from airflow_provider_dpone.cluster.protocol.staging import stage_all
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.external import ExternalAuthorityRecord, MemberRecord, as_external
from airflow_provider_dpone.cluster.values.authority.generation import MemberGeneration
from airflow_provider_dpone.cluster.values.authority.internal import (
    InternalAuthorityRecordV1,
    InternalAuthorityRecordV2,
    as_internal,
)
from airflow_provider_dpone.cluster.values.authority.phases import MemberStage
from airflow_provider_dpone.cluster.values.inventory import Position
from airflow_provider_dpone.cluster.values.publication_receipts import (
    PublicationReceipt,
    external_receipt,
    internal_receipt,
)
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode

StagingStep = Callable[[Context, Held, Observations | None], Held]
"""STAGING -> STAGED; the observations are the candidate names seen just before this invocation's STAGING CAS."""


@dataclass(frozen=True)
class ModeBehaviour:
    """What one replication mode does differently (its data is the request's ``mode``)."""

    new_record: Callable[[Mapping[str, object], Sequence[str], bool], AuthorityRecord]
    """A fresh LOCKED record from the shared fields, the member ids and whether quality replay is selected."""
    first_intents: FirstIntents
    stage: StagingStep
    staging_step: Callable[[Context, AuthorityRecord], DdlStep | None]
    """The staging DDL whose permit is bound and not yet reconciled, or ``None``: what abort waits for and what a
    void while STAGING applies to (external staging sends no ON CLUSTER DDL, so there is none)."""
    ready_members: Callable[[AuthorityRecord], int]
    """Members whose candidate holds exactly the artifact (internal: all replicas once converged, else none)."""
    progress: Callable[[AuthorityRecord, Mapping[str, Position]], tuple[MemberProgress, ...]]
    """Each member's progress, named with its position in the bound inventory (``positions``)."""
    load_member: Callable[[AuthorityRecord], str | None]
    """The replica the one load goes through, once bound (external: ``None``, every member loads its own)."""
    owned_uuids: Callable[[AuthorityRecord, str], tuple[str, ...]]
    """Every candidate UUID the operation ever intended on a member: what abort may drop there."""
    creates_from: Callable[[AuthorityRecord], int | None]
    """The latest time from which a direct (member-local) candidate CREATE of the operation may still be sent, within
    the dispatch deadline of it; ``None``: the mode sends none (internal: its CREATE is a permitted ON CLUSTER DDL,
    which the abort reconciles instead)."""
    receipt: Callable[[AuthorityRecord, int, Mapping[str, Position]], PublicationReceipt]
    """The receipt schema of a committed record (and its authority version and the bound inventory's positions)."""


# --- external: one candidate per member ---------------------------------------------------------------------------


def _new_external(fields: Mapping[str, object], member_ids: Sequence[str], quality: bool) -> AuthorityRecord:
    del quality  # refused for this mode by the request
    members = tuple(MemberRecord(member_id=member_id) for member_id in member_ids)
    return ExternalAuthorityRecord.model_validate({**fields, "members": members})


def _external_ready(record: AuthorityRecord) -> int:
    return sum(member.stage is MemberStage.READY for member in as_external(record).members)


def _external_progress(record: AuthorityRecord, positions: Mapping[str, Position]) -> tuple[MemberProgress, ...]:
    members = as_external(record).members
    return tuple(member_progress(m.member_id, positions, m.stage.value, m.row_count, m.rebuilds) for m in members)


def _external_creates_from(record: AuthorityRecord) -> int | None:
    """The latest intent stamp (an intent without one, written before intents were stamped: the record's last
    write, the latest time any earlier try could have stamped it)."""
    stamps = [
        record.updated_at_ms if member.intended_at_ms is None else member.intended_at_ms
        for member in as_external(record).members
        if member.candidate_uuid_intent is not None
    ]
    return max(stamps, default=None)


EXTERNAL_BEHAVIOUR: Final = ModeBehaviour(
    new_record=_new_external,
    first_intents=external_intents,
    stage=stage_all,
    staging_step=lambda ctx, record: None,
    ready_members=_external_ready,
    progress=_external_progress,
    load_member=lambda record: None,
    owned_uuids=lambda record, member_id: as_external(record).member(member_id).owned_candidate_uuids,
    creates_from=_external_creates_from,
    receipt=lambda record, version, positions: external_receipt(as_external(record), version, positions),
)


# --- internal: one replicated candidate ---------------------------------------------------------------------------


def _new_internal(fields: Mapping[str, object], member_ids: Sequence[str], quality: bool) -> AuthorityRecord:
    members = tuple(MemberGeneration(member_id=member_id) for member_id in member_ids)
    model = InternalAuthorityRecordV2 if quality else InternalAuthorityRecordV1  # v2 carries the capsule
    return model.model_validate({**fields, "members": members})


def _stage_internal(ctx: Context, held: Held, names: Observations | None) -> Held:
    del names  # the create step's barrier and reconciliation observe the names themselves
    return stage_replicated(ctx, held)


def _internal_ready(record: AuthorityRecord) -> int:
    return len(record.members) if record.members_staged() else 0


def _internal_progress(record: AuthorityRecord, positions: Mapping[str, Position]) -> tuple[MemberProgress, ...]:
    """The replicas share one candidate, so they share its stage and rebuild count."""
    candidate = as_internal(record).candidate
    stage = "PENDING" if candidate is None else candidate.stage.value
    rebuilds = 0 if candidate is None else candidate.rebuilds
    return tuple(member_progress(m.member_id, positions, stage, m.row_count, rebuilds) for m in record.members)


def _internal_load_member(record: AuthorityRecord) -> str | None:
    candidate = as_internal(record).candidate
    return None if candidate is None or candidate.load is None else candidate.load.member_id


def _internal_owned(record: AuthorityRecord, member_id: str) -> tuple[str, ...]:
    del member_id  # every replica holds the shared candidate
    candidate = as_internal(record).candidate
    return () if candidate is None else candidate.owned_uuids


INTERNAL_BEHAVIOUR: Final = ModeBehaviour(
    new_record=_new_internal,
    first_intents=internal_intents,
    stage=_stage_internal,
    staging_step=bound_staging_step,
    ready_members=_internal_ready,
    progress=_internal_progress,
    load_member=_internal_load_member,
    owned_uuids=_internal_owned,
    creates_from=lambda record: None,
    receipt=lambda record, version, positions: internal_receipt(as_internal(record), version, positions),
)

MODES: Final[Mapping[ReplicationMode, ModeBehaviour]] = {
    ReplicationMode.INTERNAL: INTERNAL_BEHAVIOUR,
    ReplicationMode.EXTERNAL: EXTERNAL_BEHAVIOUR,
}
"""Every replication mode's behaviour by name (the request's ``replication_mode``)."""
