"""After COMMITTED, look again: a write into a member's published target between the check after the publication DDL
and the COMMITTED CAS is alerted and recorded in the receipt, COMMITTED stands, and the task fails with a code."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from airflow_provider_dpone.cluster.protocol.after_commit import ChangedAfterCommitError
from airflow_provider_dpone.cluster.protocol.results import Committed, Completed
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.core.alerts import PUBLISHED_CHANGED_AFTER_COMMIT
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.support.cluster.sim import NEW_ROWS, Sim
from tests.support.fakes import parts
from tests.support.fakes.ports import FakeAuthorityStore
from tests.support.fakes.world import FakeTable

pytestmark = pytest.mark.protocol

CHANGED = "DPONE_CLICKHOUSE_CLUSTER_PUBLISHED_CHANGED_AFTER_COMMIT"


def _insert_one(table: FakeTable) -> None:
    parts.append(table, [(99, "written-before-the-commit")])


def _update_in_place(table: FakeTable) -> None:
    """ALTER UPDATE: one value rewritten, the row count unchanged (only the digest can tell)."""
    table.rows[0] = (table.rows[0][0], "updated-before-the-commit")
    table.merges += 1


def write_before_committed(
    monkeypatch: pytest.MonkeyPatch, sim: Sim, member: int, write: Callable[[FakeTable], None]
) -> list[int]:
    """Run ``write`` into ``member``'s target when the COMMITTED CAS is about to leave: after the check after the
    publication DDL, before the record says COMMITTED. Returns the list the write's count goes to."""
    cas = FakeAuthorityStore.compare_and_set
    written: list[int] = []

    def committing(store: FakeAuthorityStore, row, expected_version: int) -> None:  # type: ignore[no-untyped-def]
        if row.phase == Phase.COMMITTED.value and not written:
            target = sim.world.table(sim.world.members[member], sim.request.target)
            assert target is not None
            write(target)
            written.append(1)
        cas(store, row, expected_version)

    monkeypatch.setattr(FakeAuthorityStore, "compare_and_set", committing)
    return written


@pytest.mark.parametrize("mode", ["external", "internal"])
@pytest.mark.parametrize("write", [_insert_one, _update_in_place], ids=["insert", "alter_update"])
def test_a_target_written_before_the_committed_write_is_alerted_recorded_and_fails_after_commit(
    monkeypatch: pytest.MonkeyPatch, mode: ReplicationMode, write: Callable[[FakeTable], None]
) -> None:
    sim = Sim.build(members=3, mode=mode)
    sim.service().fence()
    sim.service().stage(sim.source)
    written = write_before_committed(monkeypatch, sim, 1, write)
    with pytest.raises(ChangedAfterCommitError) as raised:
        sim.service().publish()
    assert written == [1] and raised.value.code == CHANGED and not raised.value.retryable
    record = sim.record()
    assert record.phase is Phase.COMMITTED and record.last_error is None  # the publication stands
    changed = sim.world.members[1].member_id
    receipt = raised.value.committed.receipt
    assert receipt.phase == "COMMITTED" and receipt.after_commit is not None
    look = receipt.after_commit
    assert not look.matched
    by_member = {member.member_id: member for member in look.members}
    assert [m for m, member in by_member.items() if not member.matched] == [changed]
    assert by_member[changed].same_table and by_member[changed].schema_matched
    assert by_member[changed].content_digest != receipt.content_digest
    expected_rows = len(NEW_ROWS) + (1 if write is _insert_one else 0)
    assert by_member[changed].row_count == expected_rows
    for member_id, member in by_member.items():
        if member_id != changed:
            assert (member.row_count, member.content_digest) == (receipt.row_count, receipt.content_digest)
    assert [(event.name, dict(event.facts)["member_id"]) for event in sim.world.alerts] == [
        (PUBLISHED_CHANGED_AFTER_COMMIT.name, changed)
    ]
    assert '"after_commit":{' in receipt.to_json() and "host" not in receipt.to_json()

    dispatched = sim.world.calls["ddl.dispatch"]
    cas_before = sim.world.calls["authority.cas"]
    with pytest.raises(ChangedAfterCommitError):  # a retry only looks again: no dispatch, no write
        sim.service().publish()
    with pytest.raises(ChangedAfterCommitError):
        sim.service().reconcile_publication()
    assert sim.world.calls["ddl.dispatch"] == dispatched and sim.world.calls["authority.cas"] == cas_before
    assert sim.record().phase is Phase.COMMITTED and len(sim.world.alerts) == 3


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_without_a_write_the_look_after_commit_matches_and_raises_nothing(
    monkeypatch: pytest.MonkeyPatch, mode: ReplicationMode
) -> None:
    sim = Sim.build(members=3, mode=mode)
    sim.service().fence()
    sim.service().stage(sim.source)
    written = write_before_committed(monkeypatch, sim, 1, lambda _table: None)
    committed = sim.service().publish()
    assert written == [1] and isinstance(committed, Committed)
    sim.check_success(committed)
    look = committed.receipt.after_commit
    assert look is not None and look.matched and len(look.members) == 3
    assert all(
        (member.row_count, member.content_digest) == (committed.receipt.row_count, committed.receipt.content_digest)
        for member in look.members
    )
    assert sim.world.alerts == []
    completed = sim.service().cleanup()
    assert isinstance(completed, Completed) and completed.receipt.after_commit is None
    again = sim.service().publish()  # past COMMITTED: the cleanup was run, nothing to look at again
    assert isinstance(again, Committed) and again.receipt.after_commit is None
    sim.check_converged()


def test_a_merge_before_the_committed_write_still_matches() -> None:
    """A background merge renames parts without changing rows: the look recomputes the digest and it is equal."""
    sim = Sim.build(members=2)
    sim.service().fence()
    sim.service().stage(sim.source)
    committed = sim.service().publish()
    assert isinstance(committed, Committed)
    record = sim.record()
    assert record.phase is Phase.COMMITTED
    target = sim.world.table(sim.world.members[0], sim.request.target)
    assert target is not None
    parts.append(target, [])
    target.merges += 1
    again = sim.service().publish()
    assert (
        isinstance(again, Committed) and again.receipt.after_commit is not None and again.receipt.after_commit.matched
    )
    assert Counter(target.rows) == Counter(NEW_ROWS) and sim.world.alerts == []
