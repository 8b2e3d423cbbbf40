"""The way back from a publication that stopped after its swap: inspect, restore or accept, release, publish again.

A write into a member's candidate while the EXCHANGE is in flight makes the publication stop with
``PUBLISHED_CONTENT_DIVERGENT`` after the DDL ran on every member (never COMMITTED, never abortable). The operator
swaps back (restore) or makes every member serve the same content (accept); the release step checks every member
against that decision and records it with one CAS (RELEASED); a new DAG run then takes the target and publishes.
Every assertion reads the fake world's tables and the authority record, never what the protocol says of itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter

import pytest

from airflow_provider_dpone.cluster.protocol.results import InProgress
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.support.cluster.sim import BASELINE_ROWS, NEW_ROWS, Sim, error_code, rows_of
from tests.support.fakes import parts
from tests.support.fakes.faults import SINGLE_FAULT_KINDS, FaultKind, SimulatedCrash
from tests.support.fakes.world import FakeMember

pytestmark = pytest.mark.protocol

DIVERGENT = "DPONE_CLICKHOUSE_CLUSTER_PUBLISHED_CONTENT_DIVERGENT"
DRIFT = "DPONE_CLICKHOUSE_CLUSTER_TARGET_DRIFT"
FOREIGN = "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_FOREIGN_UUID"
FENCED = "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED"
RELEASED = "DPONE_CLICKHOUSE_CLUSTER_OPERATION_RELEASED"
NOT_STOPPED = "DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOT_STOPPED"
PENDING = "DPONE_CLICKHOUSE_CLUSTER_RELEASE_DDL_PENDING"
NOT_RESTORED = "DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOT_RESTORED"
NOT_ACCEPTED = "DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOT_ACCEPTED"
DECIDED = "DPONE_CLICKHOUSE_CLUSTER_RELEASE_DECIDED_OTHERWISE"
NOTHING_TO_RELEASE = "DPONE_CLICKHOUSE_CLUSTER_RELEASE_NOTHING_TO_RELEASE"
STRAY = (99, "written-after-the-barrier")
SUCCESSOR_ROWS = ((1, "third"), (2, "third"), (3, "third"))


def diverged(
    mode: ReplicationMode = "external", *, first: bool = False, live_target: bool = False
) -> tuple[Sim, FakeMember]:
    """Staged; the last member's DDL worker paused after the barrier, a row written into its candidate, then the
    EXCHANGE (``first``: the RENAME of a first publication) runs there: the publication stops with
    ``PUBLISHED_CONTENT_DIVERGENT``. ``live_target``: the row goes into that member's live target instead (still the
    old one there): it stops with ``TARGET_DRIFT``, the predecessor, with the write, under the candidate name."""
    sim = Sim.build(members=3, mode=mode, baseline=None if first else BASELINE_ROWS)
    sim.service().fence()
    sim.service().stage(sim.source)
    paused = sim.world.members[-1]
    paused.paused = True
    assert isinstance(sim.service().publish(), InProgress)
    written = sim.world.table(paused, sim.request.target if live_target else sim.request.candidate_name)
    assert written is not None
    parts.append(written, [STRAY])
    sim.world.resume(paused)
    assert error_code(lambda: sim.service().reconcile_publication()) == (DRIFT if live_target else DIVERGENT)
    return sim, paused


def swap_back(sim: Sim, members: list[FakeMember] | None = None) -> None:
    """The runbook's restore: ``EXCHANGE TABLES target AND candidate`` on every member (by hand)."""
    database = sim.world.database
    for member in members if members is not None else sim.world.members:
        tables = member.tables
        target, candidate = (database, sim.request.target), (database, sim.request.candidate_name)
        tables[target], tables[candidate] = tables[candidate], tables[target]


def write_everywhere_else(sim: Sim, paused: FakeMember) -> None:
    """The runbook's accept, made consistent: the same write on every other member's target."""
    for member in sim.world.members:
        if member is not paused:
            target = sim.world.table(member, sim.request.target)
            assert target is not None
            parts.append(target, [STRAY])


def successor(sim: Sim) -> Sim:
    return Sim.successor(sim, run_id="scheduled__2026-09-19", rows=SUCCESSOR_ROWS)


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_restored_is_checked_recorded_and_a_new_run_publishes(mode: ReplicationMode) -> None:
    sim, _ = diverged(mode)
    before = sim.record()
    assert error_code(lambda: sim.service().release("restored")) == NOT_RESTORED  # nothing swapped back yet
    swap_back(sim, sim.world.members[:1])
    assert error_code(lambda: sim.service().release("restored")) == NOT_RESTORED  # one member still swapped
    assert sim.record() == before, "a refusal changes nothing"
    swap_back(sim, sim.world.members[1:])
    later = successor(sim)  # restored, but the stopped record holds the target until it is released
    assert error_code(lambda: later.service().fence()) == FENCED
    assert error_code(lambda: sim.service().abort()) == "DPONE_CLICKHOUSE_CLUSTER_ABORT_AFTER_PUBLICATION"

    released = sim.service().release("restored")
    outcome = (released.decision, released.phase_before, released.phase)
    assert outcome == ("restored", "PUBLICATION_DISPATCHING", "RELEASED")
    record = sim.record()
    assert record.phase is Phase.RELEASED and record.release is not None
    assert (record.release.decision, record.release.stopped_by) == ("restored", DIVERGENT)
    assert record.release.publication_epoch == before.publication.epoch  # type: ignore[union-attr]
    for member, seen in zip(record.members, record.release.members, strict=True):
        assert (seen.target_uuid, seen.candidate_uuid) == (member.target_uuid, member.candidate_uuid)
        assert seen.content_digest == member.target_content_digest and member.published_uuid is None
    for index in range(len(sim.world.members)):
        assert rows_of(sim, index, "target_table") == Counter(BASELINE_ROWS)
    again = sim.service().release("restored")  # idempotent: reported again, never written twice
    assert again == dataclasses.replace(released, phase_before="RELEASED")
    assert error_code(lambda: sim.service().release("accepted", accepted_row_count=3)) == DECIDED
    assert error_code(lambda: sim.service().publish()) == RELEASED  # the operation never resumes
    assert error_code(lambda: sim.service().cleanup()) == RELEASED

    assert later.run_dag() == "completed", later.errors
    later.check_converged()
    assert later.record().previous_operation_id == record.operation_id


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_accepted_is_checked_recorded_and_a_new_run_publishes(mode: ReplicationMode) -> None:
    sim, paused = diverged(mode)
    accepted = len(NEW_ROWS) + 1
    assert error_code(lambda: sim.service().release("accepted", accepted_row_count=accepted)) == NOT_ACCEPTED
    write_everywhere_else(sim, paused)
    assert error_code(lambda: sim.service().release("accepted", accepted_row_count=len(NEW_ROWS))) == NOT_ACCEPTED
    assert sim.record().phase is Phase.PUBLICATION_DISPATCHING

    released = sim.service().release("accepted", accepted_row_count=accepted)
    assert (released.decision, released.accepted_row_count, released.phase) == ("accepted", accepted, "RELEASED")
    record = sim.record()
    assert record.release is not None and len(set(released.target_digests.values())) == 1
    for member, seen in zip(record.members, record.release.members, strict=True):
        assert (seen.target_uuid, seen.candidate_uuid) == (member.candidate_uuid, member.target_uuid)
        assert seen.row_count == accepted and member.published_uuid == member.candidate_uuid
    for index in range(len(sim.world.members)):
        assert rows_of(sim, index, "target_table") == Counter((*NEW_ROWS, STRAY))
    assert error_code(lambda: sim.service().release("restored")) == DECIDED

    later = successor(sim)
    assert later.run_dag() == "completed", later.errors
    later.check_converged()


def test_restored_after_a_first_publication_is_the_candidate_renamed_back() -> None:
    """No predecessor: the publication was a RENAME; restored means no table under the target name and the
    candidate back under its own name, on every member (until then refused)."""
    sim, _ = diverged(first=True)
    assert error_code(lambda: sim.service().release("restored")) == NOT_RESTORED
    database = sim.world.database
    for member in sim.world.members:  # RENAME TABLE target TO candidate ON CLUSTER
        member.tables[(database, sim.request.candidate_name)] = member.tables.pop((database, sim.request.target))
    released = sim.service().release("restored")
    assert released.target_digests == dict.fromkeys(released.target_digests)
    record = sim.record()
    assert record.phase is Phase.RELEASED and record.release is not None
    for member, seen in zip(record.members, record.release.members, strict=True):
        assert member.target_uuid is None and (seen.target_uuid, seen.row_count) == (None, None)
        assert seen.candidate_uuid == member.candidate_uuid
    later = successor(sim)
    assert later.run_dag() == "completed", later.errors
    later.check_converged()


def test_restored_refuses_a_target_whose_content_changed_since_the_baseline() -> None:
    sim, _ = diverged()
    swap_back(sim)
    target = sim.world.table(sim.world.members[0], sim.request.target)
    assert target is not None
    parts.append(target, [STRAY])
    assert error_code(lambda: sim.service().release("restored")) == NOT_RESTORED
    assert sim.record().phase is Phase.PUBLICATION_DISPATCHING


def test_restored_refuses_a_copy_of_the_predecessor_under_the_target_name() -> None:
    """Equal content is not the predecessor: a copy (a new UUID holding the same rows) under the target name is
    refused, so the release never records a table it did not check as the one retained."""
    sim, _ = diverged()
    swap_back(sim)
    member = sim.world.members[0]
    original = sim.world.drop_on(member, sim.world.database, sim.request.target)
    copy = sim.world.put_table(member, sim.request.target, original.columns, list(original.rows))
    assert copy.uuid != original.uuid and Counter(copy.rows) == Counter(BASELINE_ROWS)
    before = sim.record()
    assert error_code(lambda: sim.service().release("restored")) == NOT_RESTORED
    assert sim.record() == before


def test_accepted_refuses_a_copy_of_the_published_candidate_under_the_target_name() -> None:
    sim, paused = diverged()
    write_everywhere_else(sim, paused)
    member = sim.world.members[0]
    published = sim.world.drop_on(member, sim.world.database, sim.request.target)
    sim.world.put_table(member, sim.request.target, published.columns, list(published.rows))
    before = sim.record()
    assert error_code(lambda: sim.service().release("accepted", accepted_row_count=len(NEW_ROWS) + 1)) == NOT_ACCEPTED
    assert sim.record() == before


def test_accepted_refuses_members_that_hold_as_many_rows_but_other_content() -> None:
    sim, paused = diverged()
    for member in sim.world.members:
        if member is not paused:
            target = sim.world.table(member, sim.request.target)
            assert target is not None
            parts.append(target, [(98, "another-row")])
    before = sim.record()
    assert error_code(lambda: sim.service().release("accepted", accepted_row_count=len(NEW_ROWS) + 1)) == NOT_ACCEPTED
    assert sim.record() == before


def test_accepted_refuses_a_published_table_whose_schema_changed() -> None:
    """Altered the same way on every member (same rows, same digest everywhere), the schema is not the artifact's."""
    sim, paused = diverged()
    write_everywhere_else(sim, paused)
    for member in sim.world.members:
        target = sim.world.table(member, sim.request.target)
        assert target is not None
        (first, kind), *others = target.columns
        target.columns = ((f"{first}_renamed", kind), *others)
    before = sim.record()
    assert error_code(lambda: sim.service().release("accepted", accepted_row_count=len(NEW_ROWS) + 1)) == NOT_ACCEPTED
    assert sim.record() == before


def test_release_refuses_an_operation_that_did_not_stop_after_its_swap() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    assert error_code(lambda: sim.service().release("restored")) == NOT_STOPPED  # STAGED: abort instead
    assert sim.run_dag() == "completed"
    assert error_code(lambda: sim.service().release("restored")) == NOT_STOPPED  # COMPLETED
    with pytest.raises(DponeError) as caught:
        sim.service().release("accepted")  # no declared row count
    assert caught.value.code == "DPONE_CLICKHOUSE_CLUSTER_REQUEST_INVALID"


def test_release_waits_while_the_publication_entry_has_not_run_on_every_host() -> None:
    """A foreign table under the candidate name stops the publication while a member has not run the EXCHANGE: the
    release refuses (the EXCHANGE may still run there after RELEASED), until the entry finished everywhere."""
    sim = Sim.build(members=3)
    sim.service().fence()
    sim.service().stage(sim.source)
    paused = sim.world.members[-1]
    paused.paused = True
    assert isinstance(sim.service().publish(), InProgress)
    sim.world.drop_on(paused, sim.world.database, sim.request.candidate_name)
    sim.world.put_table(paused, sim.request.candidate_name, (("id", "UInt64"),), [])
    assert error_code(lambda: sim.service().reconcile_publication()) == FOREIGN
    assert error_code(lambda: sim.service().release("restored")) == PENDING
    assert sim.record().phase is Phase.PUBLICATION_DISPATCHING


def test_release_acts_only_on_the_operation_of_its_run() -> None:
    sim, _ = diverged()
    swap_back(sim)
    later = successor(sim)
    assert error_code(lambda: later.service().release("restored")) == FENCED
    assert sim.record().phase is Phase.PUBLICATION_DISPATCHING


def test_release_of_a_run_whose_target_record_is_another_ended_operation_says_nothing_to_release() -> None:
    """The target's record is another operation's, ABORTED: that holder is resolved, not fencing anyone, and the
    run named holds no record, so the release says there is nothing to release (not the fence's wording)."""
    sim = Sim.build()
    sim.service().fence()
    sim.service().abort()
    later = successor(sim)
    with pytest.raises(DponeError) as caught:
        later.service().release("restored")
    assert caught.value.code == NOTHING_TO_RELEASE
    assert f"operation {sim.request.operation_id[:16]} in phase ABORTED" in caught.value.detail
    assert error_code(lambda: sim.service().release("restored")) == NOT_STOPPED  # the aborted run's own release
    assert sim.record().phase is Phase.ABORTED
    assert sim.record().operation_id == sim.request.operation_id  # nothing changed


# --- the release CAS in the fault matrix ---------------------------------------------------------------------------


def _restored() -> Sim:
    sim, _ = diverged()
    swap_back(sim)
    return sim


def _release_points() -> list[tuple[int, str]]:
    sim = _restored()
    start = sim.world.faults.counter
    sim.service().release("restored")
    return list(enumerate(sim.world.faults.trace))[start:]


def test_every_fault_of_the_release_is_resolved_by_reading_back_never_by_writing_twice() -> None:
    """Crash before, crash after, lost response at every I/O point of the release (its reads and its one CAS): the
    record is RELEASED exactly when the CAS landed; a later release (faults off) reports it without a second write,
    or writes it once; and a new run then publishes."""
    points = _release_points()
    assert {name for _, name in points} >= {"authority.cas", "ddl.queue_status"}
    runs = 0
    for point, name in points:
        for kind in SINGLE_FAULT_KINDS:
            sim = _restored()
            sim.world.faults.schedule([(point, kind)])
            with contextlib.suppress(SimulatedCrash, DponeError):  # any stop; the durable outcome below decides
                sim.service().release("restored")
            assert (point, name, kind) in sim.world.faults.fired
            sim.world.faults.disable()
            landed = name == "authority.cas" and kind is not FaultKind.CRASH_BEFORE
            assert (sim.record().phase is Phase.RELEASED) == landed, (point, name, kind)
            _, version = sim.world.keeper[sim.request.target_key]
            again = sim.service().release("restored")
            assert again.phase == "RELEASED", (point, name, kind)
            _, after = sim.world.keeper[sim.request.target_key]
            assert after == version + (0 if landed else 1), "the release is written exactly once"
            later = successor(sim)
            assert later.run_dag() == "completed", (point, name, kind, later.errors)
            later.check_converged()
            runs += 1
    assert runs == 3 * len(points)


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_a_publication_stopped_by_target_drift_after_its_swap_is_restored_with_the_write_and_released(
    mode: ReplicationMode,
) -> None:
    """Restored: every member swapped back; the predecessor that stopped the publication holds the write, so the
    UUID pair is checked and the content recorded as observed, not held to the baseline. A new run refuses the
    members' unequal targets until the operator makes them agree, then publishes."""
    sim, paused = diverged(mode, live_target=True)
    assert error_code(lambda: sim.service().release("restored")) == NOT_RESTORED  # nothing swapped back yet
    swap_back(sim)
    released = sim.service().release("restored")
    assert (released.decision, released.phase) == ("restored", "RELEASED")
    record = sim.record()
    assert record.release is not None and record.release.stopped_by == DRIFT
    written = sim.world.members.index(paused)
    for index in range(len(sim.world.members)):  # every member serves its predecessor again, the write kept
        expected = (*BASELINE_ROWS, STRAY) if index == written else BASELINE_ROWS
        assert rows_of(sim, index, "target_table") == Counter(expected)
    later = successor(sim)  # the members differ by the write: the next baseline refuses until they agree
    assert later.run_dag() == "stopped at stage: DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT"
    write_everywhere_else(sim, paused)
    assert later.run_dag() == "completed", later.errors
    later.check_converged()


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_a_publication_stopped_by_target_drift_after_its_swap_can_be_accepted(mode: ReplicationMode) -> None:
    """Accepted: every member serves the new generation, as published; the predecessor with the write stays under
    the candidate name for the operator (the release drops nothing)."""
    sim, paused = diverged(mode, live_target=True)
    released = sim.service().release("accepted", accepted_row_count=len(NEW_ROWS))
    assert (released.decision, released.phase) == ("accepted", "RELEASED")
    for index in range(len(sim.world.members)):
        assert rows_of(sim, index, "target_table") == Counter(NEW_ROWS)
    kept = sim.world.table(paused, sim.request.candidate_name)
    assert kept is not None and STRAY in kept.rows
