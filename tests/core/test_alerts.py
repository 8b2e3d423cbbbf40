"""The seeds' alerts: each is emitted once, where its condition is decided, with opaque facts only; never otherwise.

Driven on the fake ports (cluster) and the route harness (transfer); each test drives its condition once and reads
the events the protocol handed its sink, and one reads the log record ``emit`` wrote for it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

import pytest

from airflow_provider_dpone.core.alerts import (
    CLEANUP_FAILED,
    CLEANUP_UNKNOWN,
    CUSTODY_HELD,
    CUSTODY_UNKNOWN,
    FENCED_FOREIGN_OPERATION,
    PROVENANCE_DRIFT,
    PUBLICATION_UNKNOWN,
    PUBLISHED_CHANGED_AFTER_COMMIT,
    QUEUE_EVIDENCE_EXPIRED,
    REEXTRACT_REQUIRED,
    SOURCE_DRIFT_OBSERVED,
    STAGING_DIVERGENCE,
    TARGET_DRIFT,
    TERMINAL_MIXED_PUBLICATION,
    TOPOLOGY_DRIFT,
    Alert,
    AlertEvent,
)
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.route.target_custody import TargetCustody
from airflow_provider_dpone.transfer.storage import ObjectJournalStore
from tests.cluster.protocol.test_look_after_commit import write_before_committed
from tests.support.cluster.sim import NEW_ROWS, Sim, error_code, point_of
from tests.support.fakes import parts
from tests.support.fakes.faults import FaultKind
from tests.support.fakes.world import FakeTable
from tests.support.transfer.native_route_harness import LEASE, OPERATION, crash_at, make_harness

pytestmark = [pytest.mark.protocol, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def names(events: list[AlertEvent]) -> Counter[str]:
    return Counter(event.name for event in events)


def only(events: list[AlertEvent], alert: Alert) -> dict[str, object]:
    """The facts of the one event, asserting it is the only alert emitted."""
    assert names(events) == Counter({alert.name: 1}), names(events)
    return events[0].as_dict()


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_a_normal_run_emits_no_alert(mode) -> None:
    sim = Sim.build(members=3, mode=mode)
    assert sim.run_dag() == "completed"
    assert sim.world.alerts == []


def test_a_normal_transfer_emits_no_alert(tmp_path) -> None:
    harness = make_harness(tmp_path)
    harness.run()
    assert harness.run().rows > 0  # and the resumed, already succeeded run
    assert harness.alerts == []


def test_a_rival_fenced_by_an_unresolved_operation_alerts_once_with_the_holders_id(caplog) -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    rival = sim.request.model_copy(update={"run_id": "manual__rival"})
    with caplog.at_level(logging.WARNING, logger="airflow_provider_dpone.alerts"):
        assert error_code(lambda: sim.service(rival).fence()) == "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED"
    facts = only(sim.world.alerts, FENCED_FOREIGN_OPERATION)
    assert facts == {
        "alert": "dpone.alert.cluster.fenced_foreign_operation",
        "operation_id": rival.operation_id,
        "holder_operation_id": sim.request.operation_id,
        "target_key": sim.request.target_key,
        "phase": "STAGED",
        "code": "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED",
    }
    [record] = [r for r in caplog.records if r.name == "airflow_provider_dpone.alerts"]
    assert record.levelno == logging.WARNING and record.dpone_alert == facts  # type: ignore[attr-defined]
    assert record.getMessage().startswith("dpone alert dpone.alert.cluster.fenced_foreign_operation: ")
    assert "analytics" not in record.getMessage()  # no cluster, database or table name: opaque ids only
    assert sim.run_dag() == "completed" and len(sim.world.alerts) == 1


def test_an_abort_of_another_runs_operation_alerts_fenced() -> None:
    sim = Sim.build()
    sim.service().fence()
    rival = sim.request.model_copy(update={"run_id": "manual__rival"})
    assert error_code(lambda: sim.service(rival).abort()) == "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED"
    assert only(sim.world.alerts, FENCED_FOREIGN_OPERATION)["holder_operation_id"] == sim.request.operation_id


def test_inventory_drift_alerts_topology_drift_on_each_decision() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.service().stage(sim.source)
    extra = sim.world.add_member(3)
    assert error_code(lambda: sim.service().publish()) == "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_DRIFT"
    facts = only(sim.world.alerts, TOPOLOGY_DRIFT)
    assert (facts["members"], facts["live_members"], facts["phase"]) == (2, 3, "STAGED")
    sim.world.members.remove(extra)
    assert sim.run_dag() == "completed" and len(sim.world.alerts) == 1


def _rewrite_a_row(table: FakeTable) -> None:
    table.rows[0] = table.rows[1]


def _insert_a_row(table: FakeTable) -> None:
    parts.append(table, [(77, "written into the live target")])


@pytest.mark.parametrize("mode", ["external", "internal"])
@pytest.mark.parametrize(
    ("candidate", "write", "alert", "code"),
    [
        (True, _rewrite_a_row, STAGING_DIVERGENCE, "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_DIVERGENT"),
        (False, _insert_a_row, TARGET_DRIFT, "DPONE_CLICKHOUSE_CLUSTER_TARGET_DRIFT"),
    ],
    ids=["staged_candidate_diverged", "live_target_written_in_place"],
)
def test_a_staged_table_written_before_its_publication_alerts_for_its_member(
    mode, candidate: bool, write: Callable[[FakeTable], None], alert: Alert, code: str
) -> None:
    """A write into a member's staged candidate alerts staging divergence; one into its live target (in place, after
    the baseline) alerts target drift. Either stops the publication with its code."""
    sim = Sim.build(members=3, mode=mode)
    sim.service().fence()
    sim.service().stage(sim.source)
    member = sim.world.members[2]
    table = sim.world.table(member, sim.request.candidate_name if candidate else sim.request.target)
    assert table is not None
    write(table)
    assert error_code(lambda: sim.service().publish()) == code
    facts = only(sim.world.alerts, alert)
    assert (facts["member_id"], facts["code"]) == (member.member_id, code)
    assert facts["operation_id"] == sim.request.operation_id


def test_a_candidate_no_load_explains_alerts_staging_divergence_when_staging_stops() -> None:
    sim = Sim.build()
    sim.service().fence()
    sim.world.faults.schedule([(point_of(sim, "member.load"), FaultKind.CRASH_AFTER)])
    with pytest.raises(BaseException, match="simulated crash"):
        sim.service().stage(sim.source)
    assert sim.world.alerts == []  # a lost load response is not an alert: staging resolves it by observation
    member = sim.world.members[0]
    table = sim.world.table(member, sim.request.candidate_name)
    assert table is not None
    parts.append(table, table.rows[:1])  # a row the candidate already holds, once more: no load explains it
    assert error_code(lambda: sim.service().stage(sim.source)) == "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_DIVERGENT"
    assert only(sim.world.alerts, STAGING_DIVERGENCE)["member_id"] == member.member_id


def test_a_replica_no_load_explains_alerts_staging_divergence_in_internal_mode() -> None:
    sim = Sim.build(members=2, mode="internal")
    sim.world.faults.schedule([(point_of(sim, "member.load"), FaultKind.CRASH_AFTER)])
    assert sim.run_dag(tries=1).startswith("stopped at stage")
    sim.world.faults.disable()
    assert sim.world.alerts == []
    replica = sim.world.table(sim.world.members[1], sim.request.candidate_name)
    assert replica is not None
    parts.append(replica, [NEW_ROWS[0]])  # a write that bypasses the provider: one row twice on one replica
    assert sim.run_dag(tries=1) == "stopped at stage: DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_DIVERGENT"
    assert only(sim.world.alerts, STAGING_DIVERGENCE)["member_id"] == sim.world.members[1].member_id


def test_a_terminal_mixed_publication_alerts_once_per_decision() -> None:
    sim = Sim.build(members=3)
    sim.world.members[1].ddl_fails = True
    assert sim.run_dag(tries=1) == "stopped at publish: DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_MIXED"
    facts = only(sim.world.alerts, TERMINAL_MIXED_PUBLICATION)
    assert (facts["step"], facts["epoch"], facts["phase"]) == ("publication", 1, "PUBLICATION_DISPATCHING")


@pytest.mark.parametrize("mode", ["external", "internal"])
def test_a_target_written_before_the_committed_write_alerts_published_changed_after_commit(
    monkeypatch: pytest.MonkeyPatch, mode
) -> None:
    sim = Sim.build(members=2, mode=mode)
    write_before_committed(monkeypatch, sim, 0, lambda table: parts.append(table, [NEW_ROWS[0]]))
    code = "DPONE_CLICKHOUSE_CLUSTER_PUBLISHED_CHANGED_AFTER_COMMIT"
    assert sim.run_dag(tries=1) == f"stopped at publish: {code}"
    facts = only(sim.world.alerts, PUBLISHED_CHANGED_AFTER_COMMIT)
    assert (facts["member_id"], facts["phase"], facts["code"]) == (sim.world.members[0].member_id, "COMMITTED", code)


def test_expired_queue_evidence_of_the_publication_alerts_queue_evidence_expired() -> None:
    sim = Sim.build()
    sim.world.faults.schedule([(point_of(sim, "ddl.dispatch"), FaultKind.CRASH_AFTER)])
    assert sim.run_dag(tries=1).startswith("stopped at publish")
    assert sim.world.alerts == []  # an unanswered dispatch is not an alert: it is reconciled
    sim.world.queue.clear()  # the queue entry expired
    code = error_code(lambda: sim.service().publish())
    assert code == "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_EVIDENCE_MISSING"
    assert only(sim.world.alerts, QUEUE_EVIDENCE_EXPIRED)["step"] == "publication"


def test_a_cleanup_without_queue_evidence_alerts_cleanup_unknown_only() -> None:
    sim = Sim.build()
    sim.world.faults.schedule([(point_of(sim, "ddl.dispatch", 1), FaultKind.CRASH_AFTER)])
    assert sim.run_dag(tries=1).startswith("stopped at cleanup")
    assert sim.world.alerts == []
    sim.world.queue.clear()
    code = error_code(lambda: sim.service().cleanup())
    assert code == "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_EVIDENCE_MISSING"
    facts = only(sim.world.alerts, CLEANUP_UNKNOWN)
    assert (facts["step"], facts["code"]) == ("cleanup", code)


def test_a_live_writer_lease_alerts_custody_held(tmp_path) -> None:
    harness = make_harness(tmp_path)
    with pytest.raises(BaseException, match="block"):
        harness.run(crash_at("block"))  # the writer died holding its lease
    with pytest.raises(DponeError) as held:
        harness.run()
    assert held.value.code == "native_transfer.custody_held"
    assert only(harness.alerts, CUSTODY_HELD) == {
        "alert": "dpone.alert.transfer.custody_held",
        "operation_id": OPERATION,
        "code": "native_transfer.custody_held",
    }


def test_settling_an_interrupted_invocation_alerts_reextract_required(tmp_path) -> None:
    harness = make_harness(tmp_path)
    with pytest.raises(BaseException, match="block"):
        harness.run(crash_at("block"))
    harness.expire_lease()
    harness.run()
    facts = only(harness.alerts, REEXTRACT_REQUIRED)
    assert facts["reason"] == "interrupted_before_eof" and facts["operation_id"] == OPERATION
    assert isinstance(facts["invocation_id"], str) and len(facts["invocation_id"]) == 32


def test_a_server_change_before_eof_alerts_provenance_drift_and_the_reextract(tmp_path) -> None:
    harness = make_harness(tmp_path)

    def fail_over(point: str) -> None:
        if point == "admitted":
            harness.source.server.server_uuid = "0" * 8 + "-0000-0000-0000-" + "0" * 11 + "1"

    with pytest.raises(DponeError) as drift:
        harness.run(fail_over)
    assert drift.value.code == "native_transfer.source_endpoint_drift"
    assert names(harness.alerts) == Counter({PROVENANCE_DRIFT.name: 1, REEXTRACT_REQUIRED.name: 1})
    drifted, settled = harness.alerts
    assert drifted.as_dict()["code"] == drift.value.code and "endpoint" in str(drifted.as_dict()["drifted"])
    assert settled.as_dict()["reason"] == drift.value.code  # the invocation was settled because of the drift


def test_a_merge_during_the_read_alerts_observed_source_drift_and_the_acquired_snapshot_publishes(tmp_path) -> None:
    harness = make_harness(tmp_path)
    before = harness.source_rows()

    def merge_once(point: str) -> None:
        if point == "block" and not getattr(merge_once, "done", False):
            merge_once.done = True  # type: ignore[attr-defined]
            harness.source.tables[("db", "events")].merge()

    result = harness.run(merge_once)
    assert harness.source_rows() != before, "the merge did change the physical rows"
    assert result.rows == sum(before.values()) and result.endpoint_authority_agreement is False
    facts = only(harness.alerts, SOURCE_DRIFT_OBSERVED)
    assert facts == {
        "alert": SOURCE_DRIFT_OBSERVED.name,
        "invocation_id": result.invocation_id,
        "operation_id": OPERATION,
    }


def test_a_target_held_by_an_operation_with_an_unknown_publication_alerts_custody_unknown(tmp_path) -> None:
    harness = make_harness(tmp_path)
    with pytest.raises(BaseException, match="publish_intent"):
        harness.run(crash_at("publish_intent"))  # OPERATION's publication outcome is not recorded
    events: list[AlertEvent] = []

    def custody(operation: str) -> TargetCustody:
        return TargetCustody(
            ObjectJournalStore(f"file://{tmp_path}/targets", "c" * 32),
            operation,
            harness.clock,
            LEASE,
            lambda other: ObjectJournalStore(f"file://{tmp_path}", other),
            alerts=events.append,
            target_key="c" * 32,
        )

    custody(OPERATION).acquire()
    with pytest.raises(DponeError) as live:
        custody("b" * 32).acquire()
    assert live.value.code == "native_transfer.custody_held"
    assert only(events, CUSTODY_HELD)["target_key"] == "c" * 32
    events.clear()
    harness.expire_lease()
    with pytest.raises(DponeError) as unknown:
        custody("b" * 32).acquire()
    assert unknown.value.code == "native_transfer.custody_held"
    assert only(events, CUSTODY_UNKNOWN)["operation_id"] == "b" * 32


def test_a_result_that_drifts_while_streaming_alerts_provenance_drift_once(tmp_path) -> None:
    harness = make_harness(tmp_path)

    def header_changed(emitted: int) -> None:
        raise DponeError("native_transfer.source_snapshot_drift", "result header differs from the admitted projection")

    harness.source.on_block = header_changed
    with pytest.raises(DponeError) as drift:
        harness.run()
    assert drift.value.code == "native_transfer.source_snapshot_drift"
    assert names(harness.alerts) == Counter({PROVENANCE_DRIFT.name: 1, REEXTRACT_REQUIRED.name: 1})
    drifted = harness.alerts[0].as_dict()
    assert (drifted["drifted"], drifted["code"]) == ("result", drift.value.code)
    harness.source.on_block = None
    harness.alerts.clear()
    assert harness.run().rows > 0 and harness.alerts == []


def test_a_publication_the_target_cannot_reconcile_alerts_publication_unknown(tmp_path, monkeypatch) -> None:
    harness = make_harness(tmp_path)
    with pytest.raises(BaseException, match="publish_intent"):
        harness.run(crash_at("publish_intent"))  # the next run must reconcile the publication first
    harness.expire_lease()

    def unreadable(invocation: object) -> None:
        raise DponeError("native_transfer.target_publication_outcome_unknown", "the target did not answer")

    monkeypatch.setattr(harness.target, "reconcile", unreadable)
    with pytest.raises(DponeError) as unknown:
        harness.run()
    assert unknown.value.code == "native_transfer.target_publication_outcome_unknown"
    facts = only(harness.alerts, PUBLICATION_UNKNOWN)
    assert (facts["operation_id"], facts["code"]) == (OPERATION, unknown.value.code)


def test_a_target_receipt_that_differs_from_the_stage_alerts_publication_unknown(tmp_path, monkeypatch) -> None:
    harness = make_harness(tmp_path)
    with pytest.raises(BaseException, match="publish_acknowledged"):
        harness.run(crash_at("publish_acknowledged"))  # published, the outcome not journaled
    harness.expire_lease()
    reconcile = harness.target.reconcile

    def other_rows(invocation):  # type: ignore[no-untyped-def]
        receipt = reconcile(invocation)
        return receipt.model_copy(update={"rows": receipt.rows + 1})

    monkeypatch.setattr(harness.target, "reconcile", other_rows)
    with pytest.raises(DponeError) as unknown:
        harness.run()
    assert unknown.value.code == "native_transfer.publication_outcome_unknown"
    assert only(harness.alerts, PUBLICATION_UNKNOWN)["code"] == unknown.value.code


def test_a_cleanup_that_fails_after_success_alerts_cleanup_failed_and_the_success_stands(tmp_path, monkeypatch) -> None:
    harness = make_harness(tmp_path)

    def refused(invocation: object) -> None:
        raise DponeError("native_transfer.target_unavailable", "cleanup")

    monkeypatch.setattr(harness.target, "cleanup", refused)
    result = harness.run()
    assert result.rows > 0 and result.stage_retired is False
    facts = only(harness.alerts, CLEANUP_FAILED)
    assert facts["operation_id"] == OPERATION and facts["invocation_id"] == result.invocation_id
    assert facts["code"] == "native_transfer.target_unavailable"
