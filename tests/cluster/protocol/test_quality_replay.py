"""Durable quality replay (seed 002) on the fake world: gates, the capsule's states, and every crash point.

Each test drives the four tasks like Airflow does (fresh service per attempt, retries), asserts the physical state of
the fake replicas and the capsule read back from the authority, and counts target content scans to prove a COMPLETE
capsule is replayed by checks, never by a rescan. The recovery table of the seed has one test per row (named
``test_recovery_*``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
from airflow_provider_dpone.cluster.protocol.results import Committed, Completed
from airflow_provider_dpone.cluster.values.authority.codec import decode, encode
from airflow_provider_dpone.cluster.values.authority.internal import (
    InternalAuthorityRecordV1,
    InternalAuthorityRecordV2,
)
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.cluster.values.inventory import AdmittedMember
from airflow_provider_dpone.cluster.values.publication_receipts import InternalPublicationReceiptV2
from airflow_provider_dpone.cluster.values.quality_capsule import QualityBinding
from airflow_provider_dpone.cluster.values.quality_read import TargetReadPlan
from airflow_provider_dpone.core.manifest.cluster import QualityPolicy
from tests.support.cluster.sim import BASELINE_ROWS, NEW_ROWS, Sim, error_code, rows_of
from tests.support.fakes.acceptance import FakeAcceptanceReader
from tests.support.fakes.faults import FaultKind
from tests.support.fakes.ports import FakeAuthorityStore
from tests.support.fakes.world import exact_authority_facts

pytestmark = pytest.mark.protocol

REQUIRED = "DPONE_REPLAY_QUALITY_EVIDENCE_REQUIRED"
MISMATCH = "DPONE_REPLAY_QUALITY_EVIDENCE_MISMATCH"
INVALID = "DPONE_REPLAY_QUALITY_EVIDENCE_INVALID"
FAILED = "DPONE_REPLAY_QUALITY_EVIDENCE_FAILED"
INCOMPLETE = "DPONE_REPLAY_QUALITY_EVIDENCE_INCOMPLETE"
UNSUPPORTED = "DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED"


def durable(members: int = 2, policy: QualityPolicy | None = None) -> Sim:
    sim = Sim.build(members=members, mode="internal")
    sim.request = sim.request.model_copy(update={"quality": policy or QualityPolicy(min_rows=1)})
    return sim


def v2(sim: Sim) -> InternalAuthorityRecordV2:
    record = sim.record()
    assert isinstance(record, InternalAuthorityRecordV2)
    return record


def capsule(sim: Sim) -> QualityBinding:
    quality = v2(sim).quality
    assert quality is not None
    return quality


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Bounded target reads of the published generation under the target name, per member (the aggregate read of a
    target observation; the staged observation reads the candidate and is not counted)."""
    counted: Counter[str] = Counter()
    original = FakeAcceptanceReader.observe

    def observe(
        self: FakeAcceptanceReader, members: tuple[AdmittedMember, ...], plan: TargetReadPlan, *, budget_ms: int
    ) -> Any:
        observation = original(self, members, plan, budget_ms=budget_ms)
        if plan.table == "target_table" and plan.scan is not None:
            counted[plan.scan] += 1
        return observation

    monkeypatch.setattr(FakeAcceptanceReader, "observe", observe)
    return counted


def capsule_writes(monkeypatch: pytest.MonkeyPatch, policy: QualityPolicy | None = None) -> dict[str, int]:
    """Fault point of the authority write that first records each capsule state, in a fault-free durable run."""
    clean = durable(policy=policy)
    points: dict[str, int] = {}
    original = FakeAuthorityStore.compare_and_set

    def record(self: FakeAuthorityStore, row: object, expected_version: int) -> None:
        written = decode(row)  # type: ignore[arg-type]
        quality = getattr(written, "quality", None)
        if quality is not None:
            points.setdefault(quality.state, self.world.faults.counter)
        original(self, row, expected_version)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(FakeAuthorityStore, "compare_and_set", record)
        assert clean.run_dag() == "completed"
    return points


def test_a_durable_run_ends_v2_with_a_complete_capsule_and_target_counts_equal_to_the_source(
    scans: Counter[str],
) -> None:
    sim = durable(members=3)
    assert sim.run_dag() == "completed"
    sim.check_converged()
    record = v2(sim)
    quality = capsule(sim)
    assert record.phase is Phase.COMPLETED and quality.state == "COMPLETE"
    core = quality.core
    assert core.schema_ == "dpone.quality.replay.v2" and core.passed
    assert core.source_rows == len(NEW_ROWS)
    assert [count for _, count in core.staged_rows] == [len(NEW_ROWS)] * 3  # per replica, never summed
    assert core.target_plan is not None and core.target_plan.replicas == tuple(sorted(record.member_ids()))
    assert quality.target is not None and quality.target.row_count == len(NEW_ROWS)
    assert quality.target.member_id == min(record.member_ids())
    assert set(scans) == {min(record.member_ids())} and scans[min(record.member_ids())] == 1  # one replica, once
    assert quality.pending_version is not None and quality.completion_version == quality.pending_version + 1
    receipt = sim.service().cleanup()
    assert isinstance(receipt, Completed) and isinstance(receipt.receipt, InternalPublicationReceiptV2)
    assert receipt.receipt.schema_ == "dpone.clickhouse.cluster-full-refresh-receipt.v2"
    assert receipt.receipt.quality is not None and receipt.receipt.quality.state == "COMPLETE"
    assert receipt.receipt.quality.target_row_count == len(NEW_ROWS)
    assert scans[min(record.member_ids())] == 1  # the replayed cleanup validated, it did not rescan


def test_a_failed_min_rows_gate_blocks_publication_and_stays_failed() -> None:
    sim = durable(policy=QualityPolicy(min_rows=len(NEW_ROWS) + 1))
    assert sim.run_dag(tries=2) == f"stopped at stage: {FAILED}"
    record = v2(sim)
    quality = capsule(sim)
    assert record.phase is Phase.STAGED and quality.state == "FAILED" and quality.failure == "min_rows"
    assert {gate.name: gate.passed for gate in quality.core.report}["min_rows"] is False
    assert error_code(lambda: sim.service().publish()) == FAILED
    assert [entry.intent.kind for entry in sim.world.queue] == ["create"]  # no publication DDL was dispatched
    for index in range(len(sim.world.members)):
        assert rows_of(sim, index, "target_table") == Counter(BASELINE_ROWS)
    assert capsule(sim) == quality  # nothing relabelled


@pytest.mark.parametrize("state", ["PREPARED", "TARGET_PENDING", "COMPLETE"])
@pytest.mark.parametrize("kind", [FaultKind.CRASH_AFTER, FaultKind.LOSE_RESPONSE])
def test_a_crash_after_each_capsule_write_resumes_on_retry(
    monkeypatch: pytest.MonkeyPatch, scans: Counter[str], state: str, kind: FaultKind
) -> None:
    points = capsule_writes(monkeypatch)
    scans.clear()
    sim = durable()
    sim.world.faults.schedule([(points[state], kind)])
    assert sim.run_dag() == "completed"
    sim.check_converged()
    assert sim.world.faults.fired and sim.world.faults.fired[0][1] == "authority.cas"
    quality = capsule(sim)
    assert quality.state == "COMPLETE" and quality.target is not None
    assert quality.target.row_count == len(NEW_ROWS)
    assert sum(scans.values()) == 1  # observed once; after COMPLETE never again


def test_a_crash_during_the_target_observation_observes_again_on_retry(
    monkeypatch: pytest.MonkeyPatch, scans: Counter[str]
) -> None:
    points = capsule_writes(monkeypatch)
    scans.clear()
    sim = durable()
    guard_read = points["TARGET_PENDING"] + 2  # the CAS, then the generation guard's replica reads
    sim.world.faults.schedule([(guard_read, FaultKind.CRASH_BEFORE), (guard_read + 4, FaultKind.LOSE_RESPONSE)])
    assert sim.run_dag(tries=3) == "completed"
    assert [name for _, name, _ in sim.world.faults.fired] == ["member.replica_status"] * 2
    assert INCOMPLETE in sim.errors  # an unanswered read is never success
    quality = capsule(sim)
    assert quality.state == "COMPLETE" and quality.target is not None and quality.target.row_count == len(NEW_ROWS)
    sim.check_converged()


def test_recovery_inert_historical_policy_keeps_the_v1_record_and_receipt() -> None:
    sim = Sim.build(members=2, mode="internal")
    assert sim.request.quality is None
    assert sim.run_dag() == "completed"
    assert isinstance(sim.record(), InternalAuthorityRecordV1)
    receipt = sim.service().cleanup()
    assert isinstance(receipt, Completed)
    assert receipt.receipt.schema_ == "dpone.clickhouse.cluster-full-refresh-receipt.v1"


def test_recovery_source_staged_only_evidence_is_v1_and_completes_without_a_target_scan(
    scans: Counter[str],
) -> None:
    sim = durable(policy=QualityPolicy(min_rows=1, target_metrics=()))
    assert sim.run_dag() == "completed"
    quality = capsule(sim)
    assert quality.core.schema_ == "dpone.quality.replay.v1" and quality.core.target_plan is None
    assert quality.state == "COMPLETE" and quality.target is None and quality.pending_version is None
    assert not scans
    assert isinstance(sim.service().publish(), Committed)  # a replay reads it under unchanged semantics


def test_recovery_target_pending_observes_after_the_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    points = capsule_writes(monkeypatch)
    sim = durable()
    sim.world.faults.schedule([(points["TARGET_PENDING"], FaultKind.CRASH_AFTER)])
    assert sim.run_dag(tries=1) == "stopped at publish: crash"
    assert capsule(sim).state == "TARGET_PENDING"
    result = sim.service().publish()
    assert isinstance(result, Committed) and capsule(sim).state == "COMPLETE"


def test_recovery_complete_validates_the_generation_and_never_rescans(scans: Counter[str]) -> None:
    sim = durable()
    assert sim.run_dag() == "completed"
    before = sum(scans.values())
    assert isinstance(sim.service().publish(), Committed) and isinstance(sim.service().cleanup(), Completed)
    assert sum(scans.values()) == before == 1
    sim.world.table(sim.world.members[1], "target_table").uuid = "00000000-0000-4000-8000-00000000dead"  # type: ignore[union-attr]
    assert error_code(lambda: sim.service().cleanup()) == MISMATCH
    assert sum(scans.values()) == 1


def _rewrite(sim: Sim, quality: QualityBinding | None) -> None:
    key = sim.request.target_key
    record = v2(sim)
    changed = InternalAuthorityRecordV2.model_validate(
        {**{name: getattr(record, name) for name in type(record).model_fields}, "quality": quality}
    )
    sim.world.keeper[key] = (encode(changed), sim.world.keeper[key][1] + 1)


def _hold_staged(sim: Sim) -> None:
    assert sim.service().fence() and sim.service().stage(sim.source)
    assert sim.record().phase is Phase.STAGED


def test_recovery_a_corrupt_capsule_blocks_with_invalid_before_publication() -> None:
    sim = durable()
    _hold_staged(sim)
    quality = capsule(sim)
    tampered = quality.core.model_copy(update={"source_rows": quality.core.source_rows + 1})
    _rewrite(sim, quality.model_copy(update={"core": tampered}))
    assert error_code(lambda: sim.service().publish()) == INVALID
    assert [entry.intent.kind for entry in sim.world.queue] == ["create"]


def test_recovery_a_corrupt_complete_capsule_blocks_cleanup_with_invalid() -> None:
    sim = durable()
    _hold_staged(sim)
    assert isinstance(sim.service().publish(), Committed)
    quality = capsule(sim)
    _rewrite(sim, quality.model_copy(update={"core_digest": "0" * 64}))
    assert error_code(lambda: sim.service().cleanup()) == INVALID
    assert sim.record().phase is Phase.COMMITTED  # nothing dispatched, nothing rebuilt


def test_recovery_a_missing_core_blocks_with_required() -> None:
    sim = durable()
    _hold_staged(sim)
    _rewrite(sim, None)
    assert error_code(lambda: sim.service().publish()) == REQUIRED
    assert [entry.intent.kind for entry in sim.world.queue] == ["create"]


def test_recovery_a_target_whose_content_drifted_after_commit_blocks_without_a_relabel(
    monkeypatch: pytest.MonkeyPatch, scans: Counter[str]
) -> None:
    """An unmanaged write under the same generation (same UUID) changes the replica's parts: the guard digests it
    again, finds other content and blocks with ``..._MISMATCH``; the capsule stays TARGET_PENDING with no target
    observation (nothing is reconstructed from current counts), and undoing the write lets the retry complete."""
    points = capsule_writes(monkeypatch)
    scans.clear()
    sim = durable()
    sim.world.faults.schedule([(points["TARGET_PENDING"], FaultKind.CRASH_AFTER)])
    assert sim.run_dag(tries=1) == "stopped at publish: crash"
    drifted = sim.world.table(sim.world.members[1], "target_table")  # not even the scanned replica
    assert drifted is not None
    drifted.rows.append((77, "unmanaged"))
    assert error_code(lambda: sim.service().publish()) == MISMATCH
    assert error_code(lambda: sim.service().cleanup()) == MISMATCH
    assert capsule(sim).state == "TARGET_PENDING" and capsule(sim).target is None
    assert sum(scans.values()) == 2  # the publish and the cleanup observation, both refused by their guards
    drifted.rows.pop()
    assert isinstance(sim.service().publish(), Committed)
    quality = capsule(sim)
    assert quality.state == "COMPLETE" and quality.target is not None and sum(scans.values()) == 3


def test_store_preflight_refuses_a_legacy_store_before_any_authority_write() -> None:
    sim = durable()
    legacy = exact_authority_facts().model_copy(update={"primary_key": "operation_id"})
    sim.world.authority_facts = {member.member_id: legacy for member in sim.world.members}
    assert error_code(lambda: sim.service().fence()) == UNSUPPORTED
    assert sim.request.target_key not in sim.world.keeper
    sim.request = sim.request.model_copy(update={"quality": None})
    assert error_code(lambda: sim.service().fence()) == "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TABLE_UNSUPPORTED"


def test_a_durable_request_on_the_external_route_is_refused_before_any_io() -> None:
    sim = Sim.build(members=2, mode="external")
    values = {**sim.request.model_dump(), "quality": QualityPolicy().model_dump()}
    assert error_code(lambda: PublicationRequest.parse(values)) == UNSUPPORTED
    assert sum(sim.world.calls.values()) == 0


def test_every_configuration_field_is_classified_for_the_capsule_identity() -> None:
    from airflow_provider_dpone.cluster.ports import TableSpec
    from airflow_provider_dpone.cluster.protocol.quality_evidence import IDENTITY_REGISTRY

    models = {"PublicationRequest": PublicationRequest, "TableSpec": TableSpec, "QualityPolicy": QualityPolicy}
    assert set(IDENTITY_REGISTRY) == set(models)
    for name, model in models.items():
        assert set(IDENTITY_REGISTRY[name]) == set(model.model_fields), f"unclassified field of {name}"


def _leaf_paths(model: Any, prefix: str = "") -> set[str]:
    """Every leaf field of a pydantic model, by dotted path, through unions of models."""
    import typing

    from pydantic import BaseModel

    paths: set[str] = set()
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        options = typing.get_args(field.annotation) or (field.annotation,)
        models = [option for option in options if isinstance(option, type) and issubclass(option, BaseModel)]
        if not models:
            paths.add(path)
        for option in models:
            paths |= _leaf_paths(option, f"{path}.")
    return paths


def test_every_manifest_field_is_classified_for_the_capsule_identity() -> None:
    """Seed 002: adding a manifest field requires an explicit classification; nothing is excluded recursively."""
    from airflow_provider_dpone.cluster.protocol.quality_evidence import MANIFEST_IDENTITY
    from airflow_provider_dpone.core.manifest.cluster import ClusterPublicationManifest

    assert set(MANIFEST_IDENTITY) == _leaf_paths(ClusterPublicationManifest)
    assert all(value.startswith(("bound: ", "excluded: ")) for value in MANIFEST_IDENTITY.values())


IDENTITY_GOLDEN = {1: "393c06bdb1ecd74c06ec31d1820662431242b2517f1e8f1616e2f7c29fa5c032"}
"""The configuration digest of the internal sim's request with the default policy, per identity version."""


def test_the_configuration_identity_is_pinned_per_identity_version() -> None:
    """A change to what the configuration digest binds must raise ``IDENTITY_VERSION`` (and add its golden here)."""
    from types import SimpleNamespace

    from airflow_provider_dpone.cluster.protocol.quality_evidence import IDENTITY_VERSION, config_digest

    request = Sim.build(members=2, mode="internal").request
    durable = PublicationRequest.parse({**request.model_dump(), "quality": QualityPolicy().model_dump()})
    assert config_digest(SimpleNamespace(request=durable)) == IDENTITY_GOLDEN[IDENTITY_VERSION]


def test_tasks_that_do_not_resolve_the_columns_validate_the_same_capsule() -> None:
    """Publish and cleanup know no typed columns (the request carries none; only the stage's source has them): the
    capsule identity does not depend on them."""
    sim = durable()
    _hold_staged(sim)
    request = sim.request
    assert isinstance(sim.service(request).publish(), Committed)
    assert isinstance(sim.service(request).cleanup(), Completed)
    assert capsule(sim).state == "COMPLETE"
    other = request.model_copy(update={"quality": QualityPolicy(min_rows=2)})
    assert error_code(lambda: sim.service(other).cleanup()) == MISMATCH


def test_a_failed_gate_is_resolved_by_abort_which_keeps_the_capsule_and_frees_the_target() -> None:
    sim = durable(policy=QualityPolicy(min_rows=len(NEW_ROWS) + 1))
    assert sim.run_dag(tries=1) == f"stopped at stage: {FAILED}"
    failed = capsule(sim)
    assert sim.service().abort().phase == "ABORTED"
    assert v2(sim).phase is Phase.ABORTED and capsule(sim) == failed  # the evidence of the failure is kept
    assert all(sim.world.table(member, sim.request.candidate_name) is None for member in sim.world.members)
    successor = Sim.successor(sim, run_id="scheduled__2026-09-19", rows=(*NEW_ROWS, (13, "new-13")))
    successor.request = successor.request.model_copy(update={"quality": QualityPolicy(min_rows=1)})
    assert successor.run_dag() == "completed"
    assert capsule(successor).state == "COMPLETE"


def test_committed_loops_only_for_the_capsule_writes() -> None:
    """Any other write in COMMITTED (a recorded error) would break the completion-version continuity; it is refused
    (and fail_closed's best-effort error record is skipped)."""
    from airflow_provider_dpone.cluster.protocol.authority_io import Held
    from airflow_provider_dpone.cluster.values.authority.generation import ErrorClassification

    sim = durable()
    _hold_staged(sim)
    assert isinstance(sim.service().publish(), Committed)
    ctx, current = sim.service()._begin()
    assert current is not None and current.record.phase is Phase.COMMITTED
    held = Held(current.record, current.version)
    error = ErrorClassification(code=MISMATCH, phase=Phase.COMMITTED, at_ms=ctx.now())
    assert (
        error_code(lambda: ctx.commit(held, last_error=error))
        == "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TRANSITION_INVALID"
    )
    assert ctx.fail_closed(held, MISMATCH, "x").code == MISMATCH
    assert sim.world.keeper[sim.request.target_key][1] == current.version  # nothing written
    assert isinstance(sim.service().cleanup(), Completed)


def test_a_capsule_whose_completion_would_not_fit_is_refused_before_it_is_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The completion-size reservation: the record with the largest completion plus the margin must fit 256 KiB."""
    from airflow_provider_dpone.cluster.protocol import quality_evidence

    sim = durable()
    monkeypatch.setattr(quality_evidence, "COMPLETION_MARGIN_BYTES", 256 * 1024 - 1024)
    assert sim.service().fence()
    assert error_code(lambda: sim.service().stage(sim.source)) == INVALID
    assert sim.record().phase is Phase.STAGING and not [e for e in sim.world.queue if e.intent.kind != "create"]
    monkeypatch.undo()
    assert isinstance(sim.service().stage(sim.source).phase, str) and capsule(sim).state == "PREPARED"


def test_a_voided_cleanup_permit_keeps_the_complete_capsule_valid_and_cleanup_completes() -> None:
    """The void returns the record to COMMITTED after the capsule's completion write: the capsule stays COMPLETE, its
    completion version precedes the void, and the cleanup retry validates it instead of refusing a MISMATCH."""
    sim = durable()
    sim.service().fence()
    sim.service().stage(sim.source)
    assert isinstance(sim.service().publish(), Committed)
    assert capsule(sim).state == "COMPLETE"
    completion = capsule(sim).completion_version
    sim.world.stall_coordinator()
    sim.service().cleanup()
    sim.world.clock.advance(600_000)
    assert error_code(lambda: sim.service().cleanup()) == "DPONE_CLICKHOUSE_CLUSTER_DISPATCH_UNPROVEN"
    sim.world.clock.advance(600_000)
    sim.world.restart_coordinator()
    assert sim.service().void_permit().phase == "COMMITTED"
    assert capsule(sim).completion_version == completion and capsule(sim).state == "COMPLETE"
    assert isinstance(sim.service().publish(), Committed)  # replays validate the capsule
    assert isinstance(sim.service().cleanup(), Completed)
    sim.check_converged()


@pytest.mark.parametrize("task", ["publish", "cleanup"])
@pytest.mark.parametrize("tamper", ["stored observation", "completion version", "sealed replicas"])
def test_a_replay_refused_by_the_stored_evidence_leaves_the_row_byte_identical(task: str, tamper: str) -> None:
    """The error tells the operator to preserve the record: the refused replay writes nothing (no reader fence,
    no version, ``updated_at_ms`` or ``write_id`` change) and reads nothing on the target."""
    sim = durable()
    assert sim.run_dag() == "completed"
    quality = capsule(sim)
    assert quality.target is not None and quality.core.target_plan is not None
    if tamper == "stored observation":
        changed = quality.model_copy(update={"target": quality.target.model_copy(update={"row_count": 0})})
    elif tamper == "completion version":
        changed = quality.model_copy(update={"completion_version": sim.world.keeper[sim.request.target_key][1] + 9})
    else:
        plan = quality.core.target_plan.model_copy(update={"replicas": quality.core.target_plan.replicas[:1]})
        core = quality.core.model_copy(update={"target_plan": plan})
        changed = quality.model_copy(update={"core": core, "core_digest": core.digest()})
    _rewrite(sim, changed)
    stored = sim.world.keeper[sim.request.target_key]
    acceptance, writes = sim.world.faults.trace.count("member.acceptance"), sim.world.calls["authority.cas"]
    service = sim.service()
    assert error_code(service.publish if task == "publish" else service.cleanup) in (INVALID, MISMATCH)
    assert sim.world.keeper[sim.request.target_key] == stored  # the same row bytes at the same version
    assert encode(decode(stored[0])).payload == stored[0].payload
    assert sim.world.calls["authority.cas"] == writes
    assert sim.world.faults.trace.count("member.acceptance") == acceptance


@pytest.mark.parametrize("task", ["publish", "cleanup"])
def test_a_replay_refused_by_the_live_guard_moves_the_version_by_the_fence_only_and_keeps_the_capsule_bytes(
    task: str,
) -> None:
    """The stored evidence passes, so the reader fence is written, the live guard finds the target moved, and the
    fence is written away: the version moves by two, and the capsule (the evidence) is the same bytes."""
    sim = durable()
    assert sim.run_dag() == "completed"
    key = sim.request.target_key
    version = sim.world.keeper[key][1]
    before = capsule(sim)
    moved = sim.world.table(sim.world.members[1], "target_table")
    assert moved is not None
    moved.rows.append((99, "unmanaged"))
    writes = sim.world.calls["authority.cas"]
    service = sim.service()
    assert error_code(service.publish if task == "publish" else service.cleanup) == MISMATCH
    assert sim.world.keeper[key][1] == version + 2 and sim.world.calls["authority.cas"] == writes + 2
    after = capsule(sim)
    assert after.model_dump_json() == before.model_dump_json() and v2(sim).reader is None
    assert sim.record().phase is Phase.COMPLETED


@pytest.mark.parametrize(
    ("damage", "code"),
    [
        ("core missing", REQUIRED),  # seed 002: exact durable evidence is absent
        ("state unknown", INVALID),  # malformed or impossible evidence
        ("digest not hex", INVALID),
    ],
)
def test_a_capsule_damaged_in_the_stored_bytes_blocks_with_the_quality_code(damage: str, code: str) -> None:
    """The row is rewritten byte-wise, as a foreign writer would: not a record the models could build. Every entry
    point that reads it blocks with the seed's quality code, and nothing is dispatched."""
    import json

    from airflow_provider_dpone.cluster.values.authority.row import AuthorityRow
    from airflow_provider_dpone.core.canonical import canonical_json, sha256_hex

    sim = durable()
    _hold_staged(sim)
    key = sim.request.target_key
    row, version = sim.world.keeper[key]
    payload = json.loads(row.payload)
    if damage == "core missing":
        del payload["quality"]["core"]
    elif damage == "state unknown":
        payload["quality"]["state"] = "RELABELLED"
    else:
        payload["quality"]["core_digest"] = "not a digest"
    text = canonical_json(payload)
    sim.world.keeper[key] = (row.model_copy(update={"payload": text, "payload_sha256": sha256_hex(text)}), version + 1)
    assert isinstance(sim.world.keeper[key][0], AuthorityRow)
    for call in (sim.service().publish, sim.service().cleanup, lambda: sim.service().stage(sim.source)):
        assert error_code(call) == code
    assert [entry.intent.kind for entry in sim.world.queue] == ["create"]
