"""Baseline digest reuse across operations (seed 000 §3 step 4): a successor of a COMPLETED operation takes the content
digest of each member's existing target from what the predecessor published and verified there, only while the
target still holds that candidate's UUID, row count and active parts, and the digest has the current version.
Anything else (a merge, another table under the name, an older digest version, a record without the facts, a target
dpone never published) is digested again, and the baseline rules (uniform, equal content) hold as before."""

from __future__ import annotations

import pytest

from airflow_provider_dpone.cluster.ports import TableObservation, TableRead
from airflow_provider_dpone.cluster.protocol.seal import TARGET_DIVERGENT
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord, encode
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.support.cluster.sim import CREATE_WINDOW_MS, Sim, error_code, store_as_written
from tests.support.fakes import parts
from tests.support.fakes.ports import FakeMemberSession
from tests.support.fakes.world import FakeMember, FakeTable

pytestmark = pytest.mark.protocol

SECOND_ROWS = ((40, "second-40"), (41, "second-41"), (42, "second-42"))


@pytest.fixture
def digested(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every (member id, table) whose content the server digests from now on."""
    seen: list[tuple[str, str]] = []
    original = FakeMemberSession.observe_table

    def observe_table(self: FakeMemberSession, read: TableRead) -> TableObservation:
        if read.with_content:
            seen.append((self.member.member_id, read.table))
        return original(self, read)

    monkeypatch.setattr(FakeMemberSession, "observe_table", observe_table)
    return seen


def _completed(mode: ReplicationMode, members: int = 2) -> tuple[Sim, AuthorityRecord, Sim]:
    """A completed operation, its COMPLETED record, and its successor fenced (LOCKED, the predecessor's facts
    carried)."""
    first = Sim.build(members=members, mode=mode)
    assert first.run_dag() == "completed"
    published = first.record()
    second = Sim.successor(first, run_id="scheduled__2026-09-19", rows=SECOND_ROWS)
    second.service().fence()
    return first, published, second


def _successor_and_target(mode: ReplicationMode, index: int) -> tuple[Sim, FakeMember, FakeTable]:
    """A fenced successor, and one member with the target its predecessor published there."""
    _, _, second = _completed(mode)
    member = second.world.members[index]
    target = second.world.table(member, second.request.target)
    assert target is not None
    return second, member, target


def _completes_digesting(sim: Sim, seen: list[tuple[str, str]]) -> list[str]:
    """Run the DAG to completion; the members whose target was digested while it ran."""
    del seen[:]
    assert sim.run_dag() == "completed"
    sim.check_converged()
    return sorted(member_id for member_id, table in seen if table == sim.request.target)


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_the_successor_reuses_every_published_digest(mode: ReplicationMode, digested: list[tuple[str, str]]) -> None:
    _, published, second = _completed(mode, members=3)
    carried = second.record().predecessor
    assert [fact.member_id for fact in carried] == list(published.member_ids())
    assert [fact.target_uuid for fact in carried] == [member.candidate_uuid for member in published.members]
    assert _completes_digesting(second, digested) == []
    record = second.record()
    assert [(m.target_uuid, m.target_row_count, m.target_content_digest) for m in record.members] == [
        (m.candidate_uuid, m.row_count, m.content_digest) for m in published.members
    ]


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_a_merged_target_is_digested_again_on_that_member_only(
    mode: ReplicationMode, digested: list[tuple[str, str]]
) -> None:
    second, merged, target = _successor_and_target(mode, 1)
    target.merges += 1
    assert _completes_digesting(second, digested) == [merged.member_id]


@pytest.mark.parametrize("carried", [True, False])
@pytest.mark.parametrize("mode", ["external", "internal"])
def test_a_partly_merged_target_reads_only_the_merged_part(
    mode: ReplicationMode, carried: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The predecessor published its candidate with its part facts: after a merge of two of the target's parts, the
    successor's baseline reads that one new part and sums it with the carried facts, to the published digest.
    Without ``carried`` part facts (a predecessor written before them) the whole target is read, as before."""
    first = Sim.build(members=2, mode=mode)
    first.world.insert_block_rows = first.world.part_rows = 1  # one part per row
    assert first.run_dag() == "completed"
    published = first.record()
    second = Sim.successor(first, run_id="scheduled__2026-09-19", rows=SECOND_ROWS)
    second.service().fence()
    record = second.record()
    assert all(fact.part_digests is not None for fact in record.predecessor)
    if not carried:
        facts = tuple(fact.model_copy(update={"part_digests": None}) for fact in record.predecessor)
        key = second.request.target_key
        second.world.keeper[key] = (encode(record.evolve(predecessor=facts)), second.world.keeper[key][1])
    member = second.world.members[1]
    target = second.world.table(member, second.request.target)
    assert target is not None and len(parts.active_parts(target)) >= 3
    parts.merge(target, 0, 2)
    read: list[tuple[str, str, int | None]] = []
    original = FakeMemberSession.observe_table

    def observe_table(self: FakeMemberSession, request: TableRead) -> TableObservation:
        observed = original(self, request)
        if request.with_content:
            read.append((self.member.member_id, request.table, observed.parts_read))
        return observed

    monkeypatch.setattr(FakeMemberSession, "observe_table", observe_table)
    assert second.run_dag() == "completed"
    second.check_converged()
    target_reads = [entry for entry in read if entry[1] == second.request.target]
    expected_reads = 1 if carried else len(parts.active_parts(target))
    assert target_reads == [(member.member_id, second.request.target, expected_reads)]
    baseline = second.record().member(member.member_id)
    assert baseline.target_content_digest == published.member(member.member_id).content_digest


def test_another_table_under_the_target_name_is_digested_again(digested: list[tuple[str, str]]) -> None:
    first, _, second = _completed("external")
    replaced = second.world.members[0]
    second.world.put_table(replaced, second.request.target, first.source.columns, first.rows)
    second.snapshot()  # the replacement is a pre-existing (foreign) table for the successor
    assert _completes_digesting(second, digested) == [replaced.member_id]  # equal content, a new UUID: adopted


def test_a_record_without_facts_is_digested_whole(digested: list[tuple[str, str]]) -> None:
    _, _, second = _completed("external")
    rewritten = second.record().evolve(predecessor=())
    key = second.request.target_key
    second.world.keeper[key] = (encode(rewritten), second.world.keeper[key][1])
    assert _completes_digesting(second, digested) == sorted(second.record().member_ids())


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_facts_of_a_pre_release_digest_version_refuse_the_record_and_change_nothing(
    mode: ReplicationMode, digested: list[tuple[str, str]]
) -> None:
    """Predecessor facts of content digest v1 (only pre-release builds wrote it): the record is refused with the one
    format code at its first read, before any member is touched; the stored row stays as it was."""
    _, _, second = _completed(mode)
    key = second.request.target_key
    store_as_written(second, lambda value: [fact.update(digest_version=1) for fact in value["predecessor"]])
    stored = second.world.keeper[key]
    calls = dict(second.world.calls)
    del digested[:]
    assert error_code(lambda: second.service().stage(second.source)) == "DPONE_RECORD_FORMAT_UNSUPPORTED"
    assert second.world.keeper[key] == stored and digested == []
    assert {name: count for name, count in second.world.calls.items() if name.startswith("member.")} == {
        name: count for name, count in calls.items() if name.startswith("member.")
    }


def test_a_target_dpone_never_published_is_digested(digested: list[tuple[str, str]]) -> None:
    sim = Sim.build()
    sim.service().fence()
    assert sim.record().predecessor == ()
    assert _completes_digesting(sim, digested) == sorted(sim.record().member_ids())


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_a_target_written_since_the_commit_is_divergent_and_blocks(
    mode: ReplicationMode, digested: list[tuple[str, str]]
) -> None:
    second, _, target = _successor_and_target(mode, 0)
    target.rows.append((99, "late"))
    del digested[:]
    with pytest.raises(DponeError) as raised:
        second.service().stage(second.source)
    assert raised.value.code == TARGET_DIVERGENT
    assert second.request.target in {table for _, table in digested}
    assert second.record().phase.value == "LOCKED"


def test_an_aborted_operation_hands_on_what_its_predecessor_published(digested: list[tuple[str, str]]) -> None:
    _, published, aborted = _completed("external")
    aborted.service().stage(aborted.source)
    aborted.world.clock.advance(CREATE_WINDOW_MS)  # an external abort waits until no CREATE can still arrive
    aborted.service().abort()
    third = Sim.successor(aborted, run_id="scheduled__2026-09-20", rows=SECOND_ROWS)
    third.service().fence()
    assert [fact.target_uuid for fact in third.record().predecessor] == [m.candidate_uuid for m in published.members]
    assert _completes_digesting(third, digested) == []
