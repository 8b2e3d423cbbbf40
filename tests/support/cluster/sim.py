"""Simulation harness: one external full refresh on a fake world, driven like Airflow drives the DAG.

``run_dag`` runs ``fence >> stage >> publish >> cleanup``; each task gets ``tries`` attempts (a fresh service object per
attempt, as a fresh worker process would build), a failed attempt (simulated crash or ``DponeError``) is retried after
a retry delay, and a deferred publish/cleanup polls the read-only reconcile entry point. The invariants are checked
against the fake world's physical state, never against what the protocol says about itself.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import pytest

from airflow_provider_dpone.cluster.ports import DeclaredTable
from airflow_provider_dpone.cluster.protocol.context import ProtocolSettings
from airflow_provider_dpone.cluster.protocol.exchange_probe import scratch_names
from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
from airflow_provider_dpone.cluster.protocol.results import Committed, Completed, InProgress
from airflow_provider_dpone.cluster.protocol.service import PublicationService
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord, decode
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.core.canonical import canonical_json, sha256_hex
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode
from tests.support.fakes.publication import Effect, FakeSource, FakeWorld, FaultKind, Row, SimulatedCrash

COLUMNS: tuple[tuple[str, str], ...] = (("id", "UInt64"), ("name", "String"))
BASELINE_ROWS: tuple[Row, ...] = ((1, "old-1"), (2, "old-2"))
NEW_ROWS: tuple[Row, ...] = ((10, "new-10"), (11, "new-11"), (12, "new-12"))
UNRELATED_ROWS: tuple[Row, ...] = ((99, "keep"),)
RETRY_DELAY_MS = 300_000
POLL_MS = 30_000
SETTINGS = ProtocolSettings(dispatch_quiet_ms=120_000, member_parallelism=1)
"""Members' independent work in member order: fault points are numbered by call order, which threads would shuffle
(the concurrent schedule runs in ``test_scenarios_staging``)."""
PLAN_DIGEST = "5" * 64
CREATE_WINDOW_MS = SETTINGS.dispatch_deadline_ms + SETTINGS.send_timeout_ms + SETTINGS.void_skew_margin_ms + 1
"""After the last candidate intent, no member-local CREATE it allowed can still arrive (external abort waits it out)."""


PROBE_POINTS: Final[frozenset[str]] = frozenset({"member.create", "member.exchange", "member.drop"})
"""The fault points of the fence's exchange probe (``cluster/protocol/exchange_probe.py``): the first of a run."""


def probe_end(trace: list[str]) -> int:
    """Index of the first fault point after the fence's exchange probe (the probe's creates, exchanges and drops
    come before any other point of a run)."""
    return next((index for index, name in enumerate(trace) if name not in PROBE_POINTS), len(trace))


def point_of(sim: Sim, name: str, occurrence: int = 0) -> int:
    """Index of the ``occurrence``-th fault point called ``name`` in a fault-free run of the same scenario, after
    the fence's exchange probe (whose own points ``tests/cluster/protocol/test_exchange_probe.py`` enumerates)."""
    clean = Sim.build(members=len(sim.world.members), baseline=sim.baseline, rows=sim.rows, mode=sim.mode)
    assert clean.run_dag() == "completed"
    trace = clean.world.faults.trace
    start = probe_end(trace)
    return [i for i, n in enumerate(trace) if n == name and i >= start][occurrence]


def probe_calls(sim: Sim, fences: int = 1) -> Counter[str]:
    """The member calls of ``fences`` fault-free exchange probes (a fence that writes a new record runs one)."""
    members = len(sim.world.members)
    per_fence = {"member.create": 2 * members, "member.exchange": members, "member.drop": 2 * members}
    return Counter({name: count * fences for name, count in per_fence.items()})


def staged_effects(sim: Sim) -> list[Effect]:
    """The world's physical effects apart from the fence's exchange probe (its scratch tables)."""
    scratch = scratch_names(sim.request.operation_id)
    return [effect for effect in sim.world.effects if effect.name not in scratch]


UNPROVEN = "DPONE_CLICKHOUSE_CLUSTER_DISPATCH_UNPROVEN"


def permit_without_dispatch(trace: list[str], point: int, kind: FaultKind) -> bool:
    """Whether a single fault at ``point`` leaves a recorded dispatch that was never sent: the process died just
    before the dispatch, or died / lost the acknowledgement right after the write that records it (the next point
    is the dispatch). Nothing tells those from a request in flight, so they are the runs that must fail closed with
    ``DISPATCH_UNPROVEN`` instead of converging (a permit whose dispatch was never recorded is replaced instead)."""
    if trace[point] == "ddl.dispatch":
        return kind is FaultKind.CRASH_BEFORE
    follows = point + 1 < len(trace) and trace[point + 1] == "ddl.dispatch"
    return trace[point] == "authority.cas" and follows and kind in (FaultKind.CRASH_AFTER, FaultKind.LOSE_RESPONSE)


def error_code(call: Callable[[], object]) -> str:
    """The stable code ``call`` fails with (it must fail with a ``DponeError``)."""
    with pytest.raises(DponeError) as raised:
        call()
    return raised.value.code


def store_as_written(sim: Sim, change: Callable[[dict[str, Any]], None]) -> None:
    """Store the record's payload as ``change`` rewrites its JSON (what another build would have written), with a
    matching digest: the next read decodes these bytes, never a record this process built."""
    key = sim.request.target_key
    row, version = sim.world.keeper[key]
    value = json.loads(row.payload)
    change(value)
    payload = canonical_json(value)
    sim.world.keeper[key] = (
        row.model_copy(update={"payload": payload, "payload_sha256": sha256_hex(payload)}),
        version,
    )


def rows_of(sim: Sim, member: int, name: str) -> Counter[Row] | None:
    table = sim.world.table(sim.world.members[member], name)
    return None if table is None else Counter(table.rows)


class Deferred(Exception):  # noqa: N818
    """A deferred task ran out of polls (the trigger timed out): the attempt fails and Airflow retries it."""


ENGINES: dict[ReplicationMode, str] = {"external": "MergeTree", "internal": "ReplicatedMergeTree"}


def make_request(
    world: FakeWorld,
    *,
    target: str = "target_table",
    run_id: str = "scheduled__2026-09-18",
    mode: ReplicationMode = "external",
) -> PublicationRequest:
    return PublicationRequest(
        cluster=world.cluster,
        database=world.database,
        target=target,
        dag_id="external_refresh",
        run_id=run_id,
        normalized_plan_digest=PLAN_DIGEST,
        replication_mode=mode,
        table=DeclaredTable(engine=ENGINES[mode], order_by=("id",)),
        max_source_bytes=1_000_000,
    )


@dataclass
class Sim:
    world: FakeWorld
    request: PublicationRequest
    source: FakeSource
    rows: tuple[Row, ...]
    baseline: tuple[Row, ...] | None
    initial: dict[tuple[str, str], tuple[str, tuple[Row, ...]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    successes: int = 0
    issued_from: int = 0
    effects_from: int = 0
    settings: ProtocolSettings = SETTINGS

    @classmethod
    def build(
        cls,
        *,
        members: int = 2,
        baseline: tuple[Row, ...] | None = BASELINE_ROWS,
        rows: tuple[Row, ...] = NEW_ROWS,
        seed: int = 0,
        run_id: str = "scheduled__2026-09-18",
        mode: ReplicationMode = "external",
    ) -> Sim:
        """A fresh world of ``members`` members in ``mode`` (internal: ``internal_replication=true`` and a replicated
        baseline target created as if ON CLUSTER), an unrelated table everywhere, and the request of one run."""
        world = FakeWorld(members=members, seed=seed, internal_replication=mode == "internal")
        for member in world.members:
            world.put_table(member, "unrelated", COLUMNS, UNRELATED_ROWS)
            if baseline is not None and mode == "external":
                world.put_table(member, "target_table", COLUMNS, baseline)
        if baseline is not None and mode == "internal":
            world.put_replicated_table("target_table", COLUMNS, baseline)
        request = make_request(world, run_id=run_id, mode=mode)
        sim = cls(world, request, world.source(COLUMNS, rows), rows, baseline)
        sim.snapshot()
        return sim

    @classmethod
    def successor(
        cls, previous: Sim, *, run_id: str, rows: tuple[Row, ...], mode: ReplicationMode | None = None
    ) -> Sim:
        """A later operation (new DAG run) on the same world, its invariants relative to the world as it is now.
        Another ``mode`` is a mode migration: the cluster's ``internal_replication`` flag flips with it."""
        mode = mode or previous.mode
        previous.world.internal_replication = mode == "internal"
        request = make_request(previous.world, run_id=run_id, mode=mode)
        sim = cls(previous.world, request, previous.world.source(COLUMNS, rows), rows, previous.rows)
        sim.snapshot()
        return sim

    @property
    def mode(self) -> ReplicationMode:
        return self.request.replication_mode

    def snapshot(self) -> None:
        """Record every existing table as pre-existing (foreign, or the predecessor) and where our UUIDs start."""
        self.initial = {}
        for member in self.world.members:
            for (_, name), table in member.tables.items():
                self.initial[(member.member_id, name)] = (table.uuid, tuple(table.rows))
        self.issued_from = len(self.world.entropy.issued_uuids)
        self.effects_from = len(self.world.effects)

    def service(self, request: PublicationRequest | None = None) -> PublicationService:
        return PublicationService(self.world.ports(), request or self.request, self.settings)

    # --- driving --------------------------------------------------------------------------------------------------

    def run_dag(self, *, tries: int = 3, polls: int = 3) -> str:
        """Run the four tasks with Airflow-like retries; "completed" or "stopped at <task>: <reason>"."""
        tasks = (
            ("fence", lambda: self.service().fence(self.source.columns)),
            ("stage", lambda: self.service().stage(self.source)),
            ("publish", lambda: self._deferrable("publish", polls)),
            ("cleanup", lambda: self._deferrable("cleanup", polls)),
        )
        for name, task in tasks:
            reason = ""
            for _ in range(tries):
                try:
                    task()
                    break
                except SimulatedCrash:
                    reason = "crash"
                except Deferred:
                    reason = "deferred"
                except DponeError as error:
                    reason = error.code
                    self.errors.append(error.code)
                self.world.clock.advance(RETRY_DELAY_MS)
            else:
                return f"stopped at {name}: {reason}"
        return "completed"

    def _deferrable(self, task: str, polls: int) -> None:
        result = self.service().publish() if task == "publish" else self.service().cleanup()
        self.check_success(result)
        for _ in range(polls):
            if not isinstance(result, InProgress):
                return
            self.world.clock.advance(POLL_MS)
            service = self.service()
            result = service.reconcile_publication() if task == "publish" else service.reconcile_cleanup()
            self.check_success(result)
        if isinstance(result, InProgress):
            raise Deferred(task)

    # --- observation ----------------------------------------------------------------------------------------------

    def record(self) -> AuthorityRecord:
        row, _ = self.world.keeper[self.request.target_key]
        record = decode(row)
        assert record.replication_mode == self.mode
        return record

    def check_success(self, result: object) -> None:
        """No success while any member lacks the generation."""
        if not isinstance(result, Committed | Completed):
            return
        self.successes += 1
        expected = Counter(self.rows)
        for member in self.world.members:
            target = self.world.table(member, self.request.target)
            assert target is not None, f"success reported while {member.member_id} has no target"
            assert Counter(target.rows) == expected, f"success reported while {member.member_id} differs"
        assert result.receipt.row_count == len(self.rows)
        if isinstance(result, Completed):
            self.check_converged()

    def check_invariants(self) -> None:
        """No duplicate row anywhere, and no object touched that the operation does not own."""
        issued = set(self.world.entropy.issued_uuids[self.issued_from :])
        artifact = Counter(self.rows)
        predecessors = {mid: uuid for (mid, name), (uuid, _) in self.initial.items() if name == self.request.target}
        foreign = {uuid for (uuid, _) in self.initial.values()} - set(predecessors.values())
        for member in self.world.members:
            for (_, name), table in member.tables.items():
                if table.uuid in issued:
                    extra = Counter(table.rows) - artifact
                    assert not extra, f"duplicate or foreign rows in {name} on {member.member_id}"
                else:
                    _, rows = next(  # by member: the replicas of one replicated table share its UUID
                        v for (mid, _), v in self.initial.items() if mid == member.member_id and v[0] == table.uuid
                    )
                    assert tuple(table.rows) == rows, f"pre-existing table {name} changed on {member.member_id}"
        for effect in self.world.effects[self.effects_from :]:
            assert effect.uuid not in foreign, f"foreign object touched: {effect}"
            if effect.via == "member":
                names = (self.request.candidate_name, *scratch_names(self.request.operation_id))  # + the fence's probe
                assert effect.uuid in issued and effect.name in names, effect
            elif effect.op == "drop":
                assert effect.name == self.request.candidate_name, effect
                rebuild = self.mode == "internal" and effect.uuid in issued  # the owned replicated candidate
                assert rebuild or effect.uuid == predecessors.get(effect.member_id), (
                    f"dropped a non-predecessor: {effect}"
                )
            elif effect.op == "create":
                assert effect.name == self.request.candidate_name and effect.uuid in issued, effect
            else:
                assert effect.name in (self.request.target, self.request.candidate_name), effect

    def check_fail_closed(self, outcome: str, code: str) -> None:
        """A fail-closed stop: the stable code, the record still unresolved with the code recorded, no success
        reported unless the stop came after a real commit, the invariants hold, and nothing was removed (the name
        under the candidate name, candidate or predecessor, is retained on every member)."""
        assert outcome.endswith(f": {code}"), (outcome, self.errors)
        record = self.record()
        assert record.phase not in (Phase.COMMITTED, Phase.COMPLETED, Phase.ABORTED), record.phase
        assert record.last_error is not None and record.last_error.code == code
        if record.phase is not Phase.CLEANUP_DISPATCHING:
            assert self.successes == 0
        self.check_invariants()
        for member in self.world.members:
            if record.member(member.member_id).candidate_uuid is not None:  # a bound candidate, or the predecessor
                assert self.world.table(member, self.request.candidate_name) is not None, "not retained"

    def check_converged(self) -> None:
        """COMPLETED, every member's target equals the artifact, nothing else of ours is left behind."""
        record = self.record()
        assert record.phase is Phase.COMPLETED
        expected = Counter(self.rows)
        for member in self.world.members:
            target = self.world.table(member, self.request.target)
            assert target is not None and Counter(target.rows) == expected
            names = {name for (_, name) in member.tables}
            before = {name for (mid, name) in self.initial if mid == member.member_id}
            assert names == before | {self.request.target}, f"left behind on {member.member_id}: {names}"
            assert target.uuid == record.member(member.member_id).candidate_uuid
        self.check_invariants()


def candidate_calls(sim: Sim, name: str, fences: int = 1) -> int:
    """``sim.world.calls[name]`` without the calls of ``fences`` fault-free exchange probes."""
    return sim.world.calls[name] - probe_calls(sim, fences)[name]
