"""A stalled coordinator, the fail-closed stop it causes, and the explicit void of the permit (seed 000 §5.4, §6.5).

The fake coordinator can stall (it takes ON CLUSTER requests and queues none: the client times out), wake up (it
queues what it held, late) or restart (what it held dies; its Keeper lives on). Every assertion is about the world's
physical state (queue entries, UUIDs, rows) and the authority record, never about what the protocol says of itself.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

import pytest

from airflow_provider_dpone.cluster.protocol.authority_io import Held
from airflow_provider_dpone.cluster.protocol.results import Committed, InProgress
from airflow_provider_dpone.cluster.values.authority.generation import ServerName, VoidedPermit
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.support.cluster.sim import NEW_ROWS, SETTINGS, UNPROVEN, Sim, error_code, rows_of, store_as_written
from tests.support.fakes.faults import SINGLE_FAULT_KINDS, FaultKind, SimulatedCrash
from tests.support.fakes.ports import FakeClusterDDL

pytestmark = pytest.mark.protocol

NOTHING = "DPONE_CLICKHOUSE_CLUSTER_VOID_NOTHING_TO_VOID"
RESTART = "DPONE_CLICKHOUSE_CLUSTER_VOID_RESTART_UNPROVEN"
QUEUED = "DPONE_CLICKHOUSE_CLUSTER_VOID_QUEUE_ENTRY_EXISTS"
EFFECT = "DPONE_CLICKHOUSE_CLUSTER_VOID_MEMBER_CHANGED"
MARGINS_MS = SETTINGS.dispatch_deadline_ms + SETTINGS.send_timeout_ms + SETTINGS.void_skew_margin_ms


def exchanges(sim: Sim) -> int:
    """EXCHANGE statements that reached the queue (each one the workers ran on every member)."""
    return sum(entry.intent.kind == "exchange" for entry in sim.world.queue)


def keeper_row(sim: Sim) -> object:
    return sim.world.keeper[sim.request.target_key]


def stalled_publication(mode: ReplicationMode = "external") -> Sim:
    """Staged; then the coordinator stalls holding the EXCHANGE and the publish task fails closed."""
    sim = Sim.build(mode=mode)
    sim.service().fence()
    sim.service().stage(sim.source)
    sim.world.stall_coordinator()
    early = sim.service().publish()
    assert isinstance(early, InProgress) and early.entry is None
    sim.world.clock.advance(SETTINGS.dispatch_quiet_ms)
    assert error_code(lambda: sim.service().publish()) == UNPROVEN
    assert sim.world.held and exchanges(sim) == 0
    return sim


def permit_time(sim: Sim) -> int:
    binding = sim.record().publication
    assert binding is not None
    return binding.permitted_at_ms


def restart_after_margins(sim: Sim, permitted_at: int) -> None:
    sim.world.clock.ms = max(sim.world.clock.ms, permitted_at + MARGINS_MS + 1)
    sim.world.restart_coordinator()


def test_a_stalled_coordinator_runs_its_exchange_late_exactly_once_and_nothing_commits_before_it() -> None:
    sim = stalled_publication()
    record = sim.record()
    assert record.phase is Phase.PUBLICATION_DISPATCHING and record.last_error is not None
    assert record.last_error.code == UNPROVEN
    for _ in range(3):  # retries after the stop never dispatch again
        sim.world.clock.advance(SETTINGS.dispatch_quiet_ms)
        assert error_code(lambda: sim.service().publish()) == UNPROVEN
    assert sim.world.calls["ddl.dispatch"] == 1
    assert rows_of(sim, 0, "target_table") != Counter(NEW_ROWS)
    sim.world.resume_coordinator()  # the late request runs now
    assert exchanges(sim) == 1
    committed = sim.service().publish()  # the bound entry now proves the one exchange
    assert isinstance(committed, Committed)
    sim.check_success(committed)
    assert exchanges(sim) == 1 and sim.world.calls["ddl.dispatch"] == 1
    assert sim.run_dag() == "completed"
    sim.check_converged()


def test_void_with_restart_proof_releases_the_permit_and_the_retry_publishes_exactly_once() -> None:
    sim = stalled_publication()
    first = sim.record().publication
    assert first is not None
    restart_after_margins(sim, first.permitted_at_ms)
    voided = sim.service().void_permit()
    assert (voided.step, voided.phase_before, voided.phase) == ("publication", "PUBLICATION_DISPATCHING", "STAGED")
    record = sim.record()
    assert record.phase is Phase.STAGED and record.publication is None and record.last_error is None
    (proof,) = record.voided
    assert proof.permit == first and proof.server_started_at_ms == sim.world.coordinator_started_at_ms
    assert (proof.dispatch_deadline_ms, proof.send_timeout_ms, proof.skew_margin_ms) == (
        SETTINGS.dispatch_deadline_ms,
        SETTINGS.send_timeout_ms,
        SETTINGS.void_skew_margin_ms,
    )
    assert [m.member_id for m in proof.members] == list(record.member_ids())
    for observed in proof.members:
        member = record.member(observed.member_id)
        assert (observed.target_uuid, observed.candidate_uuid) == (member.target_uuid, member.candidate_uuid)
    assert sim.run_dag() == "completed"
    second = sim.record().publication
    assert second is not None
    assert second.epoch > first.epoch and second.correlation_token != first.correlation_token
    assert exchanges(sim) == 1 and len(sim.record().voided) == 1
    sim.check_converged()
    again = sim.service().void_permit  # a completed operation has nothing to void
    assert error_code(again) == NOTHING


@pytest.mark.parametrize("late_ms", [None, 0, 1])
def test_void_without_a_late_enough_restart_is_refused_and_changes_nothing(late_ms: int | None) -> None:
    """No restart at all; a restart exactly at the permit plus every margin; one just before that. A restart alone is
    not proof: a request sent after it would still run."""
    sim = stalled_publication()
    if late_ms is not None:
        sim.world.clock.ms = permit_time(sim) + MARGINS_MS - late_ms
        sim.world.restart_coordinator()
    before = keeper_row(sim)
    assert error_code(lambda: sim.service().void_permit()) == RESTART
    assert keeper_row(sim) == before and sim.record().phase is Phase.PUBLICATION_DISPATCHING


def test_void_is_refused_once_the_request_reached_the_queue() -> None:
    sim = stalled_publication()
    sim.world.resume_coordinator()
    restart_after_margins(sim, permit_time(sim))
    before = keeper_row(sim)
    assert error_code(lambda: sim.service().void_permit()) == QUEUED
    assert keeper_row(sim) == before
    assert isinstance(sim.service().publish(), Committed) and exchanges(sim) == 1


def test_void_is_refused_when_a_member_shows_an_effect() -> None:
    sim = stalled_publication()
    restart_after_margins(sim, permit_time(sim))
    member = sim.world.members[1]
    tables = member.tables
    target, candidate = (sim.world.database, "target_table"), (sim.world.database, sim.request.candidate_name)
    tables[target], tables[candidate] = tables[candidate], tables[target]
    before = keeper_row(sim)
    assert error_code(lambda: sim.service().void_permit()) == EFFECT
    assert keeper_row(sim) == before


def test_nothing_to_void_for_a_run_that_never_fenced_or_whose_target_is_free() -> None:
    """The runbook's promise: a void for a run that holds no record of its operation says VOID_NOTHING_TO_VOID
    (not "run the fence task first", which would start a new operation), and writes nothing."""
    sim = Sim.build()
    assert error_code(lambda: sim.service().void_permit()) == NOTHING
    assert sim.world.keeper == {}, "nothing written"
    sim.service().fence()
    sim.service().abort()
    aborted = keeper_row(sim)
    later = Sim.successor(sim, run_id="manual__later", rows=sim.rows)
    assert error_code(lambda: later.service().void_permit()) == NOTHING, "the target is free: another run holds nothing"
    assert keeper_row(sim) == aborted


def test_nothing_to_void_before_any_permit() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    before = keeper_row(sim)
    assert error_code(lambda: sim.service().void_permit()) == NOTHING
    assert keeper_row(sim) == before


def test_a_voided_cleanup_permit_returns_to_committed_and_cleanup_drops_exactly_once() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    assert isinstance(sim.service().publish(), Committed)
    sim.world.stall_coordinator()
    assert isinstance(sim.service().cleanup(), InProgress)
    sim.world.clock.advance(SETTINGS.dispatch_quiet_ms)
    assert error_code(lambda: sim.service().cleanup()) == UNPROVEN
    cleanup = sim.record().cleanup
    assert cleanup is not None
    restart_after_margins(sim, cleanup.permitted_at_ms)
    voided = sim.service().void_permit()
    assert (voided.step, voided.phase) == ("cleanup", "COMMITTED")
    assert sim.run_dag() == "completed"
    assert sum(entry.intent.kind == "drop" for entry in sim.world.queue) == 1
    sim.check_converged()


def test_a_voided_candidate_create_permit_of_the_internal_route_is_taken_again_and_stages() -> None:
    sim = Sim.build(mode="internal")
    sim.service().fence()
    sim.world.stall_coordinator()
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING"
    sim.world.clock.advance(SETTINGS.dispatch_quiet_ms)
    assert error_code(lambda: sim.service().stage(sim.source)) == UNPROVEN
    record = sim.record()
    assert record.phase is Phase.STAGING
    create = record.candidate.create if hasattr(record, "candidate") and record.candidate else None
    assert create is not None
    restart_after_margins(sim, create.permitted_at_ms)
    voided = sim.service().void_permit()
    assert (voided.step, voided.phase) == ("candidate create", "STAGING")
    assert sim.run_dag() == "completed"
    assert sum(entry.intent.kind == "create" for entry in sim.world.queue) == 1
    sim.check_converged()


def test_a_stalled_exchange_of_the_internal_route_is_voided_and_published_once() -> None:
    sim = stalled_publication("internal")
    restart_after_margins(sim, permit_time(sim))
    assert sim.service().void_permit().phase == "STAGED"
    assert sim.run_dag() == "completed"
    assert exchanges(sim) == 1
    sim.check_converged()


# --- the void CAS in the fault matrix -----------------------------------------------------------------------------


def _ready_to_void() -> Sim:
    sim = stalled_publication()
    restart_after_margins(sim, permit_time(sim))
    return sim


def _void_points() -> list[tuple[int, str]]:
    sim = _ready_to_void()
    start = sim.world.faults.counter
    sim.service().void_permit()
    return list(enumerate(sim.world.faults.trace))[start:]


def test_every_fault_of_the_void_is_resolved_by_reading_back_never_by_writing_twice() -> None:
    """Crash before, crash after, lost response at every I/O point of the void (its reads and its one CAS): a later
    void (faults off) reports the void done, exactly once in the record, and the retry publishes exactly once."""
    points = _void_points()
    assert {name for _, name in points} >= {"authority.cas", "ddl.server_identity", "ddl.queue_status"}
    runs = 0
    for point, name in points:
        for kind in SINGLE_FAULT_KINDS:
            sim = _ready_to_void()
            sim.world.faults.schedule([(point, kind)])
            with contextlib.suppress(SimulatedCrash, DponeError):  # any stop; the durable outcome below decides
                sim.service().void_permit()
            assert (point, name, kind) in sim.world.faults.fired
            sim.world.faults.disable()
            cas_landed = name == "authority.cas" and kind is not FaultKind.CRASH_BEFORE
            assert (sim.record().phase is Phase.STAGED) == cas_landed, (point, name, kind)
            voided = sim.service().void_permit()
            assert voided.phase == "STAGED" and len(sim.record().voided) == 1, (point, name, kind)
            assert sim.run_dag() == "completed", (point, name, kind, sim.errors)
            assert exchanges(sim) == 1 and len(sim.record().voided) == 1
            sim.check_converged()
            runs += 1
    assert runs == 3 * len(points)


# --- the rules the proof rests on -----------------------------------------------------------------------------------


def test_a_dispatch_recorded_longer_ago_than_the_deadline_is_never_sent() -> None:
    """A worker slowed between its dispatch record and its send (here: 6 s pass at every clock read) does not send:
    the request could otherwise reach the coordinator after the restart a void counts on. It writes the record back
    to 'never sent' and stops retryably; the next try takes a new permit and sends it once, with no void."""
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    clock = sim.world.clock
    real = clock.now_ms

    def slow() -> int:
        clock.ms += 6_000
        return real()

    clock.now_ms = slow  # type: ignore[method-assign]
    with pytest.raises(DponeError) as stopped:
        sim.service().publish()
    clock.now_ms = real  # type: ignore[method-assign]
    assert stopped.value.code == "DPONE_CLICKHOUSE_CLUSTER_DISPATCH_NOT_SENT" and stopped.value.retryable
    first = sim.record().publication
    assert first is not None and first.unsent and sim.world.calls["ddl.dispatch"] == 0
    assert sim.run_dag() == "completed" and sim.world.calls["ddl.dispatch"] == 2  # the exchange once, the drop once
    second = sim.record().publication
    assert second is not None and second.epoch > first.epoch and sim.record().voided == ()
    sim.check_converged()


def test_the_back_edge_is_written_only_with_one_more_voided_permit() -> None:
    sim = stalled_publication()
    service = sim.service()
    ctx, current = service._begin()
    assert current is not None
    held = Held(current.record, current.version)
    with pytest.raises(DponeError) as raised:
        ctx.commit(held, phase=Phase.STAGED, publication=None)
    assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TRANSITION_INVALID"
    assert sim.record().phase is Phase.PUBLICATION_DISPATCHING


def test_a_proof_whose_restart_is_not_after_every_margin_cannot_even_be_recorded() -> None:
    sim = stalled_publication()
    restart_after_margins(sim, permit_time(sim))
    sim.service().void_permit()
    (proof,) = sim.record().voided
    assert proof.server_started_at_ms > proof.earliest_restart_ms
    with pytest.raises(ValueError, match="started after the permit"):
        VoidedPermit.model_validate({**proof.model_dump(), "server_started_at_ms": proof.earliest_restart_ms})
    with pytest.raises(ValueError, match="queue entry was never observed"):
        VoidedPermit.model_validate({**proof.model_dump(), "permit": {**proof.permit.model_dump(), "entry": "q"}})


def test_a_voided_rebuild_drop_permit_of_the_internal_route_is_taken_again_and_stages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim = Sim.build(mode="internal")
    clean = Sim.build(mode="internal")
    assert clean.run_dag() == "completed"
    sim.world.faults.schedule([(clean.world.faults.trace.index("member.load"), FaultKind.PARTIAL)])
    dispatch = FakeClusterDDL.dispatch
    drops: list[str] = []

    def stall_at_the_first_drop(self: FakeClusterDDL, inventory: Any, intent: Any, settings: Any) -> Any:
        if intent.kind == "drop" and not drops:
            self.world.stall_coordinator()  # the coordinator stalls holding the rebuild's first DROP
        drops.extend(["drop"] if intent.kind == "drop" else [])
        return dispatch(self, inventory, intent, settings)

    monkeypatch.setattr(FakeClusterDDL, "dispatch", stall_at_the_first_drop)
    sim.service().fence()
    code = error_code(lambda: sim.service().stage(sim.source))  # the one load was interrupted: rebuild
    assert code in ("DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING", "DPONE_CLICKHOUSE_CLUSTER_MEMBER_OUTCOME_UNKNOWN")
    if code != "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING":
        assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_STAGING_DDL_PENDING"
    sim.world.clock.advance(SETTINGS.dispatch_quiet_ms)
    assert error_code(lambda: sim.service().stage(sim.source)) == UNPROVEN
    record = sim.record()
    drop = record.candidate.drop if hasattr(record, "candidate") and record.candidate else None
    assert drop is not None
    restart_after_margins(sim, drop.permitted_at_ms)
    assert sim.service().void_permit().step == "candidate drop"
    assert sim.run_dag() == "completed"
    assert [entry.intent.kind for entry in sim.world.queue][:3] == ["create", "drop", "create"]
    # dispatched: the voided DROP, the rebuild's DROP under a new permit, the cleanup's DROP; the first never ran
    assert len(drops) == 3 and sum(entry.intent.kind == "drop" for entry in sim.world.queue) == 2
    assert len(sim.record().voided) == 1
    sim.check_converged()


def test_a_zero_skew_margin_is_refused_even_with_a_late_restart_and_changes_nothing() -> None:
    """Zero assumes the workers' and the coordinator's clocks agree exactly: no restart time proves anything then."""
    import dataclasses

    sim = stalled_publication()
    restart_after_margins(sim, permit_time(sim))
    sim.settings = dataclasses.replace(sim.settings, void_skew_margin_ms=0)
    before, reads = keeper_row(sim), sim.world.faults.trace.count("ddl.server_identity")
    assert error_code(lambda: sim.service().void_permit()) == "DPONE_CLICKHOUSE_CLUSTER_VOID_SKEW_MARGIN_INVALID"
    assert keeper_row(sim) == before and sim.record().phase is Phase.PUBLICATION_DISPATCHING
    assert sim.world.faults.trace.count("ddl.server_identity") == reads  # refused before any proof is read
    sim.settings = dataclasses.replace(sim.settings, void_skew_margin_ms=SETTINGS.void_skew_margin_ms)
    assert sim.service().void_permit().phase == "STAGED"


# --- the permit is pinned to the server that answered its identity read -------------------------------------------

OTHER_SERVER = ServerName(server_uuid="5e1f0000-0000-4000-8000-000000000002", host_digest="d" * 64)
SERVER_DIFFERS = "DPONE_CLICKHOUSE_CLUSTER_VOID_SERVER_DIFFERS"


def test_every_permit_names_the_coordinator_and_its_dispatch_carries_that_servers_session() -> None:
    sim = Sim.build()
    assert sim.run_dag() == "completed"
    dispatched = {settings.correlation_token: settings.session_id for settings in sim.world.dispatched}
    record = sim.record()
    for binding in (record.publication, record.cleanup):
        assert binding is not None and binding.server == sim.world.coordinator_server
        assert binding.correlation_token is not None
        assert dispatched[binding.correlation_token] == f"dpone-{binding.correlation_token}"


def test_a_restart_proof_answered_by_another_server_is_refused_until_the_pinned_server_answers() -> None:
    """Behind a load balancer the void's proof read can reach another server: its restart says nothing about the
    request the pinned server may still hold. Refused, nothing changes; the pinned server's own restart proves it."""
    sim = stalled_publication()
    pinned = sim.world.coordinator_server
    first = sim.record().publication
    assert first is not None and first.server == pinned
    sim.world.clock.ms = first.permitted_at_ms + MARGINS_MS + 1
    sim.world.balance_to(OTHER_SERVER)
    sim.world.restart_coordinator()  # the other server restarted: the pinned one may still hold the EXCHANGE
    before = keeper_row(sim)
    assert error_code(lambda: sim.service().void_permit()) == SERVER_DIFFERS
    assert keeper_row(sim) == before and sim.record().phase is Phase.PUBLICATION_DISPATCHING
    sim.world.balance_to(pinned)
    assert error_code(lambda: sim.service().void_permit()) == RESTART  # the pinned server never restarted
    sim.world.restart_coordinator()
    sim.service().void_permit()
    (proof,) = sim.record().voided
    assert proof.server == pinned
    assert sim.run_dag() == "completed" and exchanges(sim) == 1
    sim.check_converged()


def test_a_dispatch_the_balancer_sends_to_another_server_is_refused_unrun_and_never_repeated() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    pinned = sim.world.coordinator_server
    original = FakeClusterDDL.server_identity

    def identity_then_switch(self: FakeClusterDDL, session_id: str | None = None) -> Any:
        answered = original(self, session_id)
        if session_id is not None:
            sim.world.balance_to(OTHER_SERVER)  # the permit's dispatch reaches another server
        return answered

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FakeClusterDDL, "server_identity", identity_then_switch)
        sim.service().publish()
    assert sim.world.calls["ddl.dispatch"] == 1 and exchanges(sim) == 0  # refused before it ran anywhere
    sim.world.clock.advance(SETTINGS.dispatch_quiet_ms)
    assert error_code(lambda: sim.service().publish()) == UNPROVEN
    assert sim.world.calls["ddl.dispatch"] == 1
    first = sim.record().publication
    assert first is not None and first.server == pinned
    sim.world.balance_to(pinned)
    restart_after_margins(sim, first.permitted_at_ms)
    sim.service().void_permit()
    assert sim.run_dag() == "completed" and exchanges(sim) == 1
    sim.check_converged()


def test_a_pre_release_permit_without_a_server_is_refused_and_nothing_is_voided() -> None:
    """A permit written before permits were pinned names no server, so no restart could be attributed to it: the
    record is another build's and refused with the one format code; the void changes nothing."""
    sim = stalled_publication()
    first = sim.record().publication
    assert first is not None
    store_as_written(sim, lambda value: value["publication"].pop("server"))  # as a pre-release build wrote it
    sim.world.balance_to(OTHER_SERVER)
    restart_after_margins(sim, first.permitted_at_ms)
    before = keeper_row(sim)
    assert error_code(lambda: sim.service().void_permit()) == "DPONE_RECORD_FORMAT_UNSUPPORTED"
    assert keeper_row(sim) == before and sim.world.calls["ddl.dispatch"] == 1


# --- a coordinator recreated with a new server identity ---------------------------------------------------------------

REPLACEMENT = "DPONE_CLICKHOUSE_CLUSTER_VOID_REPLACEMENT_UNPROVEN"
RECREATED_UUID = "5e1f0000-0000-4000-8000-0000000000aa"


def test_a_coordinator_recreated_with_a_new_uuid_is_voided_once_its_old_identity_is_declared_retired() -> None:
    """The pinned server lost its data directory: it answers with a new serverUUID() on the same host, so the plain
    void stops with VOID_SERVER_DIFFERS for ever. Naming the pinned UUID as retired accepts the new identity on that
    host (it started after every margin), records both, and the retry publishes exactly once."""
    sim = stalled_publication()
    first = sim.record().publication
    assert first is not None and first.server is not None
    pinned = first.server
    sim.world.clock.ms = first.permitted_at_ms + MARGINS_MS + 1
    sim.world.recreate_coordinator(RECREATED_UUID)  # the held EXCHANGE died with the old process
    before = keeper_row(sim)
    assert error_code(lambda: sim.service().void_permit()) == SERVER_DIFFERS
    voided = sim.service().void_permit(retired_server_uuid=pinned.server_uuid)
    assert voided.server_uuid == RECREATED_UUID and keeper_row(sim) != before
    (proof,) = sim.record().voided
    assert proof.server_replaced and proof.permit.server == pinned
    assert proof.server is not None and proof.server.server_uuid == RECREATED_UUID
    assert proof.server.host_digest == pinned.host_digest
    assert sim.record().phase is Phase.STAGED and exchanges(sim) == 0
    assert sim.run_dag() == "completed" and exchanges(sim) == 1
    sim.check_converged()


def test_a_retired_identity_needs_the_pinned_uuid_a_new_uuid_and_the_same_host_else_nothing_changes() -> None:
    sim = stalled_publication()
    first = sim.record().publication
    assert first is not None and first.server is not None
    pinned = first.server
    sim.world.clock.ms = first.permitted_at_ms + MARGINS_MS + 1
    before = keeper_row(sim)
    sim.world.restart_coordinator()  # restarted, but with its identity: it is not retired
    assert error_code(lambda: sim.service().void_permit(retired_server_uuid=pinned.server_uuid)) == REPLACEMENT
    sim.world.balance_to(OTHER_SERVER)  # another host behind a balancer: the pinned process may still hold it
    sim.world.restart_coordinator()
    assert error_code(lambda: sim.service().void_permit(retired_server_uuid=pinned.server_uuid)) == REPLACEMENT
    sim.world.balance_to(pinned)
    sim.world.recreate_coordinator(RECREATED_UUID)
    assert error_code(lambda: sim.service().void_permit(retired_server_uuid=RECREATED_UUID)) == REPLACEMENT
    assert keeper_row(sim) == before and sim.record().phase is Phase.PUBLICATION_DISPATCHING
    assert sim.world.calls["ddl.dispatch"] == 1


def test_a_recreated_coordinator_that_started_before_every_margin_proves_nothing() -> None:
    """The new identity's start must still come after the permit plus every margin: a request sent late could
    reach the new process."""
    sim = stalled_publication()
    first = sim.record().publication
    assert first is not None and first.server is not None
    sim.world.clock.ms = first.permitted_at_ms + MARGINS_MS  # one ms too early
    sim.world.recreate_coordinator(RECREATED_UUID)
    before = keeper_row(sim)
    assert error_code(lambda: sim.service().void_permit(retired_server_uuid=first.server.server_uuid)) == RESTART  # type: ignore[union-attr]
    assert keeper_row(sim) == before


def test_a_replaced_server_proof_cannot_be_recorded_for_another_host_or_the_same_uuid() -> None:
    sim = stalled_publication()
    first = sim.record().publication
    assert first is not None and first.server is not None
    pinned = first.server
    member = sim.record().members[0]
    common: dict[str, Any] = {
        "step": "publication",
        "permit": first,
        "server_started_at_ms": first.permitted_at_ms + MARGINS_MS + 1,
        "dispatch_deadline_ms": SETTINGS.dispatch_deadline_ms,
        "send_timeout_ms": SETTINGS.send_timeout_ms,
        "skew_margin_ms": SETTINGS.void_skew_margin_ms,
        "members": ({"member_id": member.member_id, "target_uuid": None, "candidate_uuid": None},),
        "voided_at_ms": first.permitted_at_ms + MARGINS_MS + 2,
        "server_replaced": True,
    }
    recreated = ServerName(server_uuid=RECREATED_UUID, host_digest=pinned.host_digest)
    assert VoidedPermit(**common, server=recreated).server_replaced
    for server in (pinned, OTHER_SERVER, ServerName(server_uuid=RECREATED_UUID, host_digest="d" * 64)):
        with pytest.raises(ValueError, match="replacement"):
            VoidedPermit(**common, server=server)
