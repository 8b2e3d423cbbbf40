"""The example DAG under real Airflow (``dag.test()``, SQLite metadata DB) over the in-memory fake cluster.

Every test asserts physical outcomes in the fake world (what each member holds under the target name) and Airflow
outcomes (task states and tries), never just what the operators report about themselves.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from airflow_provider_dpone.cluster.protocol.exchange_probe import SCRATCH_INFIX
from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
from airflow_provider_dpone.cluster.values.authority.codec import decode
from airflow_provider_dpone.cluster.values.authority.external import ExternalAuthorityRecord
from airflow_provider_dpone.core.manifest import ClusterPublicationManifest, load_manifest
from tests.support.airflow.dag_runner import asset_events, configure, load_example, run_example
from tests.support.airflow.dpone_airflow_fakes import FakeDeployment, NamedFaults, serve_queue
from tests.support.fakes.faults import FaultKind
from tests.support.fakes.world import Effect

pytestmark = pytest.mark.integration

ROWS = ((1, "a", 10), (2, "b", None), (3, "c", 30))
ASSET = "clickhouse-cluster://dpone_cluster/analytics/target_table"
BASELINE = ((7, "old", 1),)


@pytest.fixture(autouse=True)
def _fake_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    serve_queue(monkeypatch)


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder)


@pytest.fixture(scope="module")
def manifest(example: ModuleType) -> ClusterPublicationManifest:
    loaded = load_manifest(example.MANIFEST)
    assert isinstance(loaded, ClusterPublicationManifest)
    return loaded


def _record(deployment: FakeDeployment, target_key: str) -> ExternalAuthorityRecord:
    row, _ = deployment.world.keeper[target_key]
    record = decode(row)
    assert isinstance(record, ExternalAuthorityRecord)
    return record


def _when(day: int) -> datetime:
    return datetime(2026, 3, day, tzinfo=UTC)


def test_every_task_of_a_run_drives_one_and_the_same_request(
    example: ModuleType, manifest: ClusterPublicationManifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One request per operation: fence, stage, publish and cleanup each hand their service the same request (no task
    builds it around a stand-in table); the typed columns travel with the stage's source."""
    from airflow_provider_dpone.operators import full_refresh

    requests: list[PublicationRequest] = []
    build = full_refresh.publication_service

    def recorded(ports: Any, request: PublicationRequest, *args: Any, **kwargs: Any) -> Any:
        requests.append(request)
        return build(ports, request, *args, **kwargs)

    monkeypatch.setattr(full_refresh, "publication_service", recorded)
    deployment = FakeDeployment.build(manifest, rows=ROWS, baseline=BASELINE)
    configure(example, deployment.factory())
    outcome = run_example(example, logical_date=_when(1))
    assert outcome.succeeded, outcome.states
    assert len(requests) >= 4 and all(request == requests[0] for request in requests), requests
    assert deployment.content("target_table") == [sorted(ROWS, key=repr)] * 2


def test_full_run_completes_and_every_member_holds_the_generation(
    example: ModuleType, manifest: ClusterPublicationManifest
) -> None:
    deployment = FakeDeployment.build(manifest, rows=ROWS, baseline=BASELINE)
    configure(example, deployment.factory())
    outcome = run_example(example, logical_date=_when(1))
    assert outcome.succeeded, outcome.states
    assert outcome.tries == {"fence": 1, "stage": 1, "publish": 1, "cleanup": 1}
    assert (deployment.environments, deployment.table_calls) == (4, 1), "only staging reads the source's schema"
    calls = deployment.world.calls  # each task admits and reads the authority once (stage: before its schema read)
    assert (calls["catalog.inventory"], calls["authority.read"]) == (4, 4), calls
    expected = sorted(ROWS, key=repr)
    assert deployment.content("target_table") == [expected, expected]
    receipt = outcome.xcom["cleanup"]
    assert receipt["phase"] == "COMPLETED"
    assert receipt["row_count"] == len(ROWS)
    assert outcome.xcom["publish"]["phase"] == "COMMITTED"
    assert outcome.xcom["publish"]["generation_id"] == receipt["generation_id"]
    record = _record(deployment, receipt["target_key"])
    assert record.operation_id == receipt["operation_id"] == outcome.xcom["fence"]["operation_id"]
    events = asset_events(outcome.run, ASSET)
    assert events == [
        {
            "task": "publish",
            "operation_id": receipt["operation_id"],
            "generation_id": receipt["generation_id"],
            "row_count": len(ROWS),
            "members": 2,
        }
    ]
    # the predecessor generation is gone everywhere; nothing else was touched
    assert all(len(member.tables) == 1 for member in deployment.world.members)
    assert Counter(effect.op for effect in staged(deployment))["drop"] == 2


def staged(deployment: FakeDeployment) -> list[Effect]:
    """The physical effects apart from the fence's exchange probe (its scratch tables, dropped again)."""
    return [effect for effect in deployment.world.effects if not effect.name.startswith(SCRATCH_INFIX)]


def _exact_everywhere(deployment: FakeDeployment, rows: tuple[tuple[object, ...], ...]) -> None:
    expected = sorted(rows, key=repr)
    assert deployment.content("target_table") == [expected] * len(deployment.world.members)


def _queue_kinds(deployment: FakeDeployment) -> list[str]:
    return [entry.intent.kind for entry in deployment.world.queue]


def test_lost_load_response_on_member_one_never_duplicates(
    example: ModuleType, manifest: ClusterPublicationManifest
) -> None:
    deployment = FakeDeployment.build(manifest, rows=ROWS, baseline=BASELINE)
    deployment.world.faults = NamedFaults({("member.load", 1): FaultKind.LOSE_RESPONSE})
    configure(example, deployment.factory())
    outcome = run_example(example, logical_date=_when(2))
    assert outcome.succeeded, outcome.states
    assert deployment.world.faults.fired, "the fault must have fired"
    _exact_everywhere(deployment, ROWS)
    assert deployment.source is not None and deployment.source.seals == 1


def test_crash_after_create_before_the_candidate_cas_is_retried_by_airflow(
    example: ModuleType, manifest: ClusterPublicationManifest
) -> None:
    deployment = FakeDeployment.build(manifest, rows=ROWS, baseline=BASELINE)
    # the fifth CREATE: the fence's exchange probe creates two scratch tables on each of the two members first
    deployment.world.faults = NamedFaults({("member.create", 5): FaultKind.CRASH_AFTER})
    configure(example, deployment.factory())
    outcome = run_example(example, logical_date=_when(3))
    assert outcome.succeeded, outcome.states
    assert outcome.tries["stage"] == 2
    _exact_everywhere(deployment, ROWS)
    # the retry adopted the exact intended candidate: one CREATE per member, no foreign table, nothing left behind
    creates = [e for e in staged(deployment) if e.op == "create"]
    assert len(creates) == 2
    assert all(len(member.tables) == 1 for member in deployment.world.members)


def test_member_paused_during_the_exchange_defers_then_completes_after_resume(
    example: ModuleType, manifest: ClusterPublicationManifest
) -> None:
    deployment = FakeDeployment.build(manifest, rows=ROWS, baseline=BASELINE)
    paused = deployment.world.members[1]

    def pause() -> None:
        paused.paused = True

    def resume_on_second_poll(poll: int) -> None:
        if poll == 2:
            deployment.world.resume(paused)

    deployment.world.faults = NamedFaults(callbacks={("ddl.dispatch", 1): pause})
    deployment.on_poll = resume_on_second_poll
    configure(example, deployment.factory())
    outcome = run_example(example, logical_date=_when(4))
    assert outcome.succeeded, outcome.states
    assert outcome.tries["publish"] == 1, "the wait is a deferral, not a retry"
    assert deployment.polls >= 2, "the trigger polled the bound entry"
    assert _queue_kinds(deployment) == ["exchange", "drop"], "one publication DDL, one cleanup DDL"
    _exact_everywhere(deployment, ROWS)


def test_non_deferrable_publish_polls_in_process_until_the_paused_member_resumes(
    example: ModuleType, manifest: ClusterPublicationManifest
) -> None:
    deployment = FakeDeployment.build(manifest, rows=ROWS, baseline=BASELINE)
    paused = deployment.world.members[0]

    def pause() -> None:
        paused.paused = True

    def resume() -> None:
        deployment.world.resume(paused)

    deployment.world.faults = NamedFaults(
        callbacks={("ddl.dispatch", 1): pause, ("ddl.queue_status", 3): resume},
    )
    configure(example, deployment.factory(), deferrable=False)
    outcome = run_example(example, logical_date=_when(5))
    assert outcome.succeeded, outcome.states
    assert outcome.tries["publish"] == 1
    assert deployment.polls == 0, "no trigger ran"
    assert _queue_kinds(deployment) == ["exchange", "drop"]
    _exact_everywhere(deployment, ROWS)


@pytest.mark.parametrize(("dispatch", "kind"), [(1, "exchange"), (2, "drop")], ids=["exchange", "cleanup"])
def test_lost_ddl_response_is_resolved_by_observation_without_redispatch(
    example: ModuleType, manifest: ClusterPublicationManifest, dispatch: int, kind: str
) -> None:
    deployment = FakeDeployment.build(manifest, rows=ROWS, baseline=BASELINE)
    deployment.world.faults = NamedFaults({("ddl.dispatch", dispatch): FaultKind.LOSE_RESPONSE})
    configure(example, deployment.factory())
    outcome = run_example(example, logical_date=_when(6 + dispatch))
    assert outcome.succeeded, outcome.states
    assert deployment.world.faults.fired
    assert _queue_kinds(deployment) == ["exchange", "drop"], f"the lost {kind} was never sent again"
    _exact_everywhere(deployment, ROWS)
    assert all(len(member.tables) == 1 for member in deployment.world.members)


def test_absent_target_is_published_by_rename_and_empty_input_is_a_generation(
    example: ModuleType, manifest: ClusterPublicationManifest
) -> None:
    deployment = FakeDeployment.build(manifest, rows=(), baseline=None)
    configure(example, deployment.factory())
    outcome = run_example(example, logical_date=_when(10))
    assert outcome.succeeded, outcome.states
    receipt = outcome.xcom["cleanup"]
    assert (receipt["baseline"], receipt["publication_kind"], receipt["row_count"]) == ("absent", "rename", 0)
    assert deployment.content("target_table") == [[], []]


def test_second_run_racing_an_unresolved_one_is_fenced_then_both_complete_in_order(
    example: ModuleType, manifest: ClusterPublicationManifest, capfd: pytest.CaptureFixture[str]
) -> None:
    deployment = FakeDeployment.build(manifest, rows=ROWS, baseline=BASELINE)
    deployment.world.faults = NamedFaults({("member.load", 1): FaultKind.CRASH_BEFORE})
    configure(example, deployment.factory(), retries=0)
    first = run_example(example, logical_date=_when(11))
    assert first.states["stage"] == "failed"
    assert first.xcom.get("publish") is None

    configure(example, deployment.factory(), retries=3)
    capfd.readouterr()
    second = run_example(example, logical_date=_when(12))
    log = capfd.readouterr()
    assert second.states["fence"] == "failed"
    assert second.tries["fence"] == 1, "a fenced operation is terminal: Airflow must not spend retries"
    assert "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED" in log.out + log.err
    assert deployment.content("target_table") == [list(BASELINE)] * 2, "the fenced run touched nothing"

    resumed = run_example(example, logical_date=_when(11))  # a clear of the whole first run: same operation
    assert resumed.succeeded, resumed.states
    assert resumed.xcom["cleanup"]["operation_id"] == first.xcom["fence"]["operation_id"]
    _exact_everywhere(deployment, ROWS)

    again = run_example(example, logical_date=_when(12))  # the second run, cleared, now takes the free target
    assert again.succeeded, again.states
    assert again.xcom["cleanup"]["operation_id"] != resumed.xcom["cleanup"]["operation_id"]
    assert again.xcom["cleanup"]["baseline"] == "existing"


def test_inventory_drift_fences_the_operation(example: ModuleType, manifest: ClusterPublicationManifest) -> None:
    deployment = FakeDeployment.build(manifest, rows=ROWS, baseline=BASELINE)
    deployment.world.faults = NamedFaults({("member.load", 1): FaultKind.CRASH_BEFORE})
    configure(example, deployment.factory(), retries=0)
    first = run_example(example, logical_date=_when(13))
    assert first.states["fence"] == "success" and first.states["stage"] == "failed"

    deployment.world.add_member(3)
    configure(example, deployment.factory(), retries=3)
    cleared = run_example(example, logical_date=_when(13))
    assert cleared.states["fence"] == "failed" and cleared.tries["fence"] == 1
    assert deployment.content("target_table")[:2] == [list(BASELINE)] * 2, "no target was touched"
    assert not deployment.world.queue, "nothing was dispatched"


def test_alerts_reach_the_task_log_and_airflow_metrics_once_per_decision_and_never_on_success(
    example: ModuleType,
    manifest: ClusterPublicationManifest,
    alert_metrics: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    counted = alert_metrics
    deployment = FakeDeployment.build(manifest, rows=ROWS, baseline=BASELINE)
    configure(example, deployment.factory())
    assert run_example(example, logical_date=_when(20)).succeeded
    assert counted == [] and deployment.world.alerts == [], "a successful run raises no alert"

    deployment.world.faults = NamedFaults({("member.load", 1): FaultKind.CRASH_BEFORE})
    configure(example, deployment.factory(), retries=0)
    assert run_example(example, logical_date=_when(21)).states["stage"] == "failed"
    assert counted == [], "a crashed load is not an alert: a retry resumes it"
    configure(example, deployment.factory(), retries=3)
    caplog.clear()
    fenced = run_example(example, logical_date=_when(22))
    assert fenced.states["fence"] == "failed" and fenced.tries["fence"] == 1
    assert counted == ["dpone.alert.cluster.fenced_foreign_operation"]
    [event] = deployment.world.alerts
    assert event.as_dict()["holder_operation_id"] != event.as_dict()["operation_id"]
    [record] = [r for r in caplog.records if r.name == "airflow_provider_dpone.alerts"]
    assert record.getMessage().startswith("dpone alert dpone.alert.cluster.fenced_foreign_operation: ")
    assert record.dpone_alert == event.as_dict()  # type: ignore[attr-defined]

    deployment.world.add_member(3)
    cleared = run_example(example, logical_date=_when(21))  # the unresolved run, cleared, on a changed topology
    assert cleared.states["fence"] == "failed" and cleared.tries["fence"] == 1
    assert counted[1:] == ["dpone.alert.cluster.topology_drift"]


def test_two_runs_publish_twice_and_the_second_replaces_the_first(
    example: ModuleType, manifest: ClusterPublicationManifest
) -> None:
    deployment = FakeDeployment.build(manifest, rows=ROWS, baseline=None)
    configure(example, deployment.factory())
    first = run_example(example, logical_date=_when(14))
    assert first.succeeded, first.states
    deployment.source = deployment.world.source(deployment.columns, ((4, "d", 40),))
    second = run_example(example, logical_date=_when(15))
    assert second.succeeded, second.states
    assert second.xcom["cleanup"]["generation_id"] != first.xcom["cleanup"]["generation_id"]
    assert second.xcom["cleanup"]["baseline"] == "existing"
    _exact_everywhere(deployment, ((4, "d", 40),))
    assert all(len(member.tables) == 1 for member in deployment.world.members)


def test_logs_xcom_receipts_and_errors_never_show_hosts_uuids_or_row_values(
    example: ModuleType, manifest: ClusterPublicationManifest, capfd: pytest.CaptureFixture[str]
) -> None:
    secret_rows = ((101, "ROWVALUE-alpha-7d1e", 424242),)
    deployment = FakeDeployment.build(manifest, rows=secret_rows, baseline=((9, "ROWVALUE-old-3c9b", 777777),))
    configure(example, deployment.factory())
    capfd.readouterr()
    completed = run_example(example, logical_date=_when(16))
    assert completed.succeeded, completed.states
    deployment.world.faults = NamedFaults({("member.load", 1): FaultKind.CRASH_BEFORE})
    configure(example, deployment.factory(), retries=0)
    unresolved = run_example(example, logical_date=_when(17))
    configure(example, deployment.factory())
    fenced = run_example(example, logical_date=_when(18))
    assert unresolved.states["stage"] == "failed" and fenced.states["fence"] == "failed"
    captured = capfd.readouterr()
    texts = [captured.out, captured.err, repr(completed.xcom), repr(unresolved.xcom), repr(fenced.xcom)]
    assert "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED" in captured.out + captured.err, "the failure was logged"
    forbidden = [member.host for member in deployment.world.members]
    forbidden += ["ROWVALUE", "424242", "777777"]
    forbidden += [table.uuid for member in deployment.world.members for table in member.tables.values()]
    forbidden += [e.uuid for e in deployment.world.effects]
    for text in texts:
        for value in forbidden:
            assert value not in text, f"{value!r} leaked"


def test_exhausted_deferrals_fail_retryably_and_a_clear_resumes_the_same_entry(
    example: ModuleType, manifest: ClusterPublicationManifest
) -> None:
    deployment = FakeDeployment.build(manifest, rows=ROWS, baseline=BASELINE)
    stuck = deployment.world.members[1]

    def pause() -> None:
        stuck.paused = True

    deployment.world.faults = NamedFaults(callbacks={("ddl.dispatch", 1): pause})
    configure(example, deployment.factory(), retries=0)
    waited = run_example(example, logical_date=_when(19))
    assert (waited.states["stage"], waited.states["publish"]) == ("success", "failed")
    assert deployment.polls == 3, "one poll per deferral, max_deferrals deferrals"
    assert deployment.content("target_table")[0] == sorted(ROWS, key=repr), "member 1 already swapped"
    assert deployment.content("target_table")[1] == list(BASELINE), "member 2 still waits for the entry"
    assert asset_events(waited.run, ASSET) == [], "a publication that is not committed emits no Asset event"

    deployment.world.resume(stuck)
    configure(example, deployment.factory())
    cleared = run_example(example, logical_date=_when(19))
    assert cleared.succeeded, cleared.states
    assert _queue_kinds(deployment) == ["exchange", "drop"], "the bound exchange was never dispatched again"
    _exact_everywhere(deployment, ROWS)
    assert [event["task"] for event in asset_events(cleared.run, ASSET)] == ["publish"]


def test_a_stage_retry_recreates_candidates_from_the_bound_schema_not_the_live_source(
    example: ModuleType, manifest: ClusterPublicationManifest
) -> None:
    deployment = FakeDeployment.build(manifest, rows=ROWS, baseline=BASELINE)

    def source_schema_changes() -> None:
        deployment.columns = (("id", "UInt64"), ("renamed", "String"), ("amount", "Nullable(Int64)"))

    deployment.world.faults = NamedFaults(
        {("member.load", 1): FaultKind.CRASH_BEFORE}, callbacks={("member.load", 1): source_schema_changes}
    )
    configure(example, deployment.factory())
    outcome = run_example(example, logical_date=_when(20))
    assert outcome.succeeded, outcome.states
    assert outcome.tries["stage"] == 2
    assert deployment.table_calls == 1, "the retry took the schema from the authority, not from the source"
    _exact_everywhere(deployment, ROWS)
    for member in deployment.world.members:
        target = deployment.world.table(member, "target_table")
        assert target is not None and [name for name, _ in target.columns] == ["id", "name", "amount"]


def test_a_publish_cleared_while_committed_announces_its_generation_once(
    example: ModuleType, manifest: ClusterPublicationManifest
) -> None:
    deployment = FakeDeployment.build(manifest, rows=ROWS, baseline=BASELINE)
    configure(example, deployment.factory())
    committed = run_example(example, logical_date=_when(27), mark_success=("cleanup",))
    generation = committed.xcom["publish"]["generation_id"]
    assert (committed.xcom["publish"]["phase"], _record(deployment, committed.xcom["fence"]["target_key"]).phase) == (
        "COMMITTED",
        "COMMITTED",
    ), "cleanup never ran: the authority stays COMMITTED"
    assert [event["generation_id"] for event in asset_events(committed.run, ASSET)] == [generation]

    # a clear of the run while the authority is still COMMITTED: publish succeeds again, Airflow's own records of
    # this run already hold the generation's event, so this try emits none
    cleared = run_example(example, logical_date=_when(27), mark_success=("cleanup",))
    assert cleared.run.run_id == committed.run.run_id and cleared.xcom["publish"]["generation_id"] == generation
    assert [event["generation_id"] for event in asset_events(cleared.run, ASSET)] == [generation]

    # the next clear lets cleanup run; the generation is still announced once, and a new run announces its own
    completed = run_example(example, logical_date=_when(27))
    assert completed.succeeded and completed.xcom["cleanup"]["phase"] == "COMPLETED"
    assert [event["generation_id"] for event in asset_events(completed.run, ASSET)] == [generation]
    later = run_example(example, logical_date=_when(28))
    assert later.succeeded
    assert [event["generation_id"] for event in asset_events(later.run, ASSET)] == [
        later.xcom["publish"]["generation_id"]
    ]
