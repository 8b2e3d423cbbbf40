"""Phase machine, record invariants and the redacted external receipt."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from airflow_provider_dpone.cluster.values.authority.external import DdlBinding, MemberRecord
from airflow_provider_dpone.cluster.values.authority.phases import (
    ALLOWED_TRANSITIONS,
    PRE_PUBLICATION_PHASES,
    TERMINAL_PHASES,
    MemberStage,
    Phase,
    is_allowed,
    require_transition,
)
from airflow_provider_dpone.cluster.values.identities import member_id
from airflow_provider_dpone.cluster.values.publication_receipts import RECEIPT_SCHEMA, external_receipt
from airflow_provider_dpone.core.errors import DponeError
from tests.support.fakes.records import SERVER, external_record, token, uuid

pytestmark = pytest.mark.unit

POSITIONS = {member_id(1, replica): (1, replica) for replica in range(1, 4)}
"""The bound inventory's positions of the fake records' members."""

SEED_DIAGRAM = {
    (None, Phase.LOCKED),
    (Phase.LOCKED, Phase.STAGING),
    (Phase.LOCKED, Phase.ABORTED),
    (Phase.STAGING, Phase.STAGING),
    (Phase.STAGING, Phase.STAGED),
    (Phase.STAGED, Phase.PUBLICATION_DISPATCHING),
    (Phase.PUBLICATION_DISPATCHING, Phase.PUBLICATION_DISPATCHING),
    (Phase.PUBLICATION_DISPATCHING, Phase.COMMITTED),
    (Phase.COMMITTED, Phase.CLEANUP_DISPATCHING),
    (Phase.CLEANUP_DISPATCHING, Phase.CLEANUP_DISPATCHING),
    (Phase.CLEANUP_DISPATCHING, Phase.COMPLETED),
    (Phase.COMPLETED, Phase.LOCKED),
    (Phase.ABORTED, Phase.LOCKED),
}
ABORT_BEFORE_PUBLICATION = {  # seed §6.7, through the fence an abort writes before it drops anything
    (Phase.STAGING, Phase.ABORTING),
    (Phase.STAGED, Phase.ABORTING),
    (Phase.ABORTING, Phase.ABORTED),
}
CAPSULE_COMPLETION = {(Phase.COMMITTED, Phase.COMMITTED)}  # seed 002: the capsule's completion writes
READER_FENCE = {(Phase.COMPLETED, Phase.COMPLETED)}  # seed 002: the durable reader fence of a validation
VOIDED_PERMIT = {(Phase.PUBLICATION_DISPATCHING, Phase.STAGED), (Phase.CLEANUP_DISPATCHING, Phase.COMMITTED)}
"""Seed 000 §5.4: the explicit void of a permit proven dead returns to the phase its step is dispatched from."""
RELEASE_AFTER_SWAP = {(Phase.PUBLICATION_DISPATCHING, Phase.RELEASED), (Phase.RELEASED, Phase.LOCKED)}
"""The operator's recorded release of a publication stopped after its swap; RELEASED is terminal."""
EDGES = SEED_DIAGRAM | ABORT_BEFORE_PUBLICATION | CAPSULE_COMPLETION | READER_FENCE | VOIDED_PERMIT | RELEASE_AFTER_SWAP


def test_transition_table_is_the_seed_state_machine() -> None:
    allowed = {(old, new) for old, news in ALLOWED_TRANSITIONS.items() for new in news}
    assert allowed == EDGES
    assert set(Phase) == {new for _, new in allowed}


@pytest.mark.parametrize("old", [None, *Phase])
@pytest.mark.parametrize("new", list(Phase))
def test_every_transition_is_decided_by_the_table(old: Phase | None, new: Phase) -> None:
    if (old, new) in EDGES:
        require_transition(old, new)
    else:
        with pytest.raises(DponeError) as raised:
            require_transition(old, new)
        assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TRANSITION_INVALID"


def test_abort_only_before_publication_and_terminal_phases_restart_only_as_locked() -> None:
    for phase in Phase:
        reaches = is_allowed(phase, Phase.ABORTED) or is_allowed(phase, Phase.ABORTING)
        assert reaches == (phase in PRE_PUBLICATION_PHASES or phase is Phase.ABORTING)
    # a bound candidate is dropped only behind the fence: nothing that binds one goes straight to ABORTED
    assert {phase for phase in Phase if is_allowed(phase, Phase.ABORTED)} == {Phase.LOCKED, Phase.ABORTING}
    assert ALLOWED_TRANSITIONS[Phase.ABORTING] == frozenset({Phase.ABORTED})
    for phase in TERMINAL_PHASES:
        assert ALLOWED_TRANSITIONS[phase] - {phase} == frozenset({Phase.LOCKED})
    assert ALLOWED_TRANSITIONS[Phase.ABORTED] == frozenset({Phase.LOCKED})


def test_staged_requires_every_member_ready() -> None:
    staged = external_record(Phase.STAGED)
    member = staged.members[0]
    pending = MemberRecord(
        member_id=member.member_id,
        target_uuid=member.target_uuid,
        target_row_count=member.target_row_count,
        target_content_digest=member.target_content_digest,
    )
    with pytest.raises(ValidationError):
        staged.evolve(members=staged.with_member(pending))


def test_committed_requires_every_target_to_be_its_candidate() -> None:
    committed = external_record(Phase.COMMITTED)
    member = committed.members[1].model_copy(update={"published_uuid": uuid(999)})
    with pytest.raises(ValidationError):
        committed.evolve(members=committed.with_member(member))


def test_completed_requires_the_predecessor_absent_everywhere() -> None:
    completed = external_record(Phase.COMPLETED)
    member = completed.members[0].model_copy(update={"predecessor_absent": False})
    with pytest.raises(ValidationError):
        completed.evolve(members=completed.with_member(member))


def test_baseline_is_uniform() -> None:
    staging = external_record(Phase.STAGING)
    member = staging.members[0]
    absent = MemberRecord(member_id=member.member_id)
    with pytest.raises(ValidationError):
        staging.evolve(members=staging.with_member(absent))


def test_member_stage_rules() -> None:
    mid = external_record().members[0].member_id
    with pytest.raises(ValidationError):  # an intent must be owned
        MemberRecord(member_id=mid, stage=MemberStage.INTENDED, candidate_uuid_intent=uuid(1))
    with pytest.raises(ValidationError):  # CREATED binds exactly the intent
        MemberRecord(
            member_id=mid,
            stage=MemberStage.CREATED,
            candidate_uuid_intent=uuid(1),
            candidate_uuid=uuid(2),
            owned_candidate_uuids=(uuid(1), uuid(2)),
        )
    with pytest.raises(ValidationError):  # READY records verified content
        MemberRecord(
            member_id=mid,
            stage=MemberStage.READY,
            candidate_uuid_intent=uuid(1),
            candidate_uuid=uuid(1),
            owned_candidate_uuids=(uuid(1),),
        )
    ok = MemberRecord(
        member_id=mid,
        stage=MemberStage.INTENDED,
        candidate_uuid_intent=uuid(2),
        owned_candidate_uuids=(uuid(1), uuid(2)),
    )
    assert ok.candidate_uuid is None


def test_members_are_unique_and_ordered() -> None:
    record = external_record(Phase.LOCKED, members=3)
    with pytest.raises(ValidationError):
        record.evolve(members=tuple(reversed(record.members)))
    with pytest.raises(ValidationError):
        record.evolve(members=(record.members[0], record.members[0]))


def test_model_copy_cannot_smuggle_an_invalid_member() -> None:
    record = external_record(Phase.STAGED)
    broken = record.members[0].model_copy(update={"content_digest": None})
    with pytest.raises(ValidationError):
        record.evolve(members=record.with_member(broken))


def test_ddl_binding_token_and_server_match_kind() -> None:
    with pytest.raises(ValidationError, match="correlation token"):
        DdlBinding(
            kind="exchange", epoch=1, correlation_token=None, query_digest=None, permitted_at_ms=0, server=SERVER
        )
    with pytest.raises(ValidationError, match="correlation token"):
        DdlBinding(kind="none", epoch=1, correlation_token=token(1), query_digest="e" * 64, permitted_at_ms=0)
    with pytest.raises(ValidationError, match="pinned to its server"):
        DdlBinding(kind="none", epoch=1, correlation_token=None, query_digest=None, permitted_at_ms=0, server=SERVER)
    with pytest.raises(ValidationError, match="without its pinned server"):
        DdlBinding(kind="drop", epoch=1, correlation_token=token(1), query_digest="e" * 64, permitted_at_ms=0)


@pytest.mark.parametrize("phase", [Phase.COMMITTED, Phase.CLEANUP_DISPATCHING, Phase.COMPLETED])
@pytest.mark.parametrize("existing", [True, False])
def test_receipt_is_built_only_from_committed_records_and_is_redacted(phase: Phase, existing: bool) -> None:
    record = external_record(phase, existing=existing, members=3)
    receipt = external_receipt(record, version=17, positions=POSITIONS)
    text = receipt.to_json()
    value = json.loads(text)
    assert value["schema"] == RECEIPT_SCHEMA
    assert value["phase"] == phase.value and value["authority_version"] == 17
    assert value["publication_kind"] == ("exchange" if existing else "rename")
    assert [m["member_id"] for m in value["members"]] == list(record.member_ids())
    assert [(m["shard_num"], m["replica_num"]) for m in value["members"]] == [POSITIONS[m] for m in record.member_ids()]
    for member in record.members:  # physical UUIDs, tokens, names and endpoints stay out of the receipt
        assert member.candidate_uuid is not None and member.candidate_uuid not in text
        assert member.target_uuid is None or member.target_uuid not in text
    assert record.fence_token not in text and record.candidate_name not in text
    assert record.publication is not None and record.publication.correlation_token not in text


@pytest.mark.parametrize(
    "phase", [Phase.LOCKED, Phase.STAGING, Phase.STAGED, Phase.PUBLICATION_DISPATCHING, Phase.ABORTED]
)
def test_no_receipt_before_commit(phase: Phase) -> None:
    with pytest.raises(DponeError) as raised:
        external_receipt(external_record(phase), version=3, positions=POSITIONS)
    assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_RECEIPT_INVALID"


def test_released_records_exactly_the_decision_its_members_show() -> None:
    released = external_record(Phase.RELEASED)
    assert released.release is not None and released.release.decision == "restored"
    assert released.published() == ()  # a successor digests the target again
    dispatching = external_record(Phase.PUBLICATION_DISPATCHING)
    with pytest.raises(ValidationError):  # RELEASED without its evidence
        dispatching.evolve(phase=Phase.RELEASED)
    with pytest.raises(ValidationError):  # the evidence outside RELEASED
        dispatching.evolve(release=released.release)
    swapped = tuple(
        seen.model_copy(update={"target_uuid": member.candidate_uuid, "candidate_uuid": member.target_uuid})
        for member, seen in zip(released.members, released.release.members, strict=True)
    )
    with pytest.raises(ValidationError):  # "restored" over members that still show the candidate as target
        released.evolve(release=released.release.model_copy(update={"members": swapped}))
    accepted = released.release.model_copy(update={"decision": "accepted", "accepted_row_count": 2, "members": swapped})
    with pytest.raises(ValidationError):  # "accepted" without the candidates recorded as published
        released.evolve(release=accepted)
    published = tuple(
        member.model_copy(update={"published_uuid": member.candidate_uuid}) for member in released.members
    )
    assert released.evolve(release=accepted, members=published).release == accepted
