"""The fakes behave like ClickHouse where the protocol depends on it.

These tests speak only through the ports (plus world setup), so the same assertions can later run against the real
adapters on the embedded cluster (the contract suite); the fault-injector tests pin what each fault kind means.
"""

from __future__ import annotations

from collections import Counter

import pytest

from airflow_provider_dpone.cluster.ports import (
    ColumnSpec,
    DispatchSettings,
    DropTable,
    ExchangeTables,
    HostDdlState,
    RenameTable,
    TableRead,
    TableSpec,
)
from airflow_provider_dpone.cluster.protocol.runtime_admission import admit_inventory
from airflow_provider_dpone.cluster.values.authority.codec import encode
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.cluster.values.inventory import AdmittedInventory
from airflow_provider_dpone.core.errors import (
    ArtifactInvalidError,
    AuthorityConflictError,
    MutationRejectedError,
    OutcomeUnknownError,
    ReadBackOlderError,
    UnavailableError,
)
from tests.support.cluster.sim import COLUMNS, NEW_ROWS
from tests.support.fakes.faults import FaultKind, SimulatedCrash
from tests.support.fakes.publication import FakeMemberSession, FakeWorld, content_digest
from tests.support.fakes.records import external_record

pytestmark = pytest.mark.protocol

SPEC = TableSpec(columns=tuple(ColumnSpec(name=n, type=t) for n, t in COLUMNS), order_by=("id",))
DB = "analytics_db"


def _token(n: int) -> str:
    return f"{n:032x}"


def _settings(n: int) -> DispatchSettings:
    return DispatchSettings(correlation_token=_token(n), query_digest="d" * 64, log_comment="{}")


def _setup(members: int = 2) -> tuple[FakeWorld, AdmittedInventory, list[FakeMemberSession]]:
    world = FakeWorld(members=members)
    ports = world.ports()
    inventory = admit_inventory(ports.catalog.inventory(world.cluster), cluster=world.cluster, mode="external")
    sessions = [ports.sessions.session(member) for member in inventory.members]
    return world, inventory, sessions


def test_keeper_map_strict_insert_and_versioned_cas() -> None:
    world = FakeWorld()
    store = world.ports().authority
    first, second = encode(external_record(Phase.LOCKED)), encode(external_record(Phase.LOCKED, version_seed=2))
    assert store.read(first.target_key) is None
    store.create(first)
    assert store.read(first.target_key).version == 0
    with pytest.raises(AuthorityConflictError):
        store.create(second)
    with pytest.raises(ReadBackOlderError):  # a version ahead of the key: nothing matched, not yet known
        store.compare_and_set(second, expected_version=5)
    assert store.read(first.target_key).row == first
    store.compare_and_set(second, expected_version=0)
    observed = store.read(first.target_key)
    assert observed is not None and observed.row == second and observed.version == 1


def test_create_with_exact_uuid_observe_and_refusals() -> None:
    world, _, (session, other) = _setup()
    uuid = world.entropy.uuid()
    session.create_table(DB, "cand", uuid, SPEC)
    obs = session.observe_table(TableRead(DB, "cand", with_content=True))
    assert (obs.exists, obs.uuid, obs.engine, obs.columns, obs.row_count) == (True, uuid, "MergeTree", COLUMNS, 0)
    assert obs.content_digest == content_digest(COLUMNS, ())
    with pytest.raises(MutationRejectedError):
        session.create_table(DB, "cand", world.entropy.uuid(), SPEC)
    with pytest.raises(MutationRejectedError):
        session.create_table(DB, "other_name", uuid, SPEC)
    other.create_table(DB, "cand", world.entropy.uuid(), SPEC)
    assert other.observe_table(TableRead(DB, "cand", with_content=False)).uuid != uuid
    assert session.observe_table(TableRead(DB, "absent", with_content=True)).exists is False


def test_load_appends_without_deduplication_and_checks_the_uuid() -> None:
    world, _, (session, _) = _setup()
    receipt = world.source(COLUMNS, NEW_ROWS).seal()
    handle = world.ports().artifacts.open(receipt)
    uuid = world.entropy.uuid()
    session.create_table(DB, "cand", uuid, SPEC)
    session.load(DB, "cand", uuid, handle, query_id="q1", dedup_token="t")
    assert session.observe_table(TableRead(DB, "cand", with_content=True)).content_digest == receipt.content_digest
    session.load(DB, "cand", uuid, handle, query_id="q2", dedup_token="t")
    obs = session.observe_table(TableRead(DB, "cand", with_content=True))
    assert obs.row_count == 2 * len(NEW_ROWS) and obs.content_digest != receipt.content_digest
    with pytest.raises(MutationRejectedError):
        session.load(DB, "cand", world.entropy.uuid(), handle, query_id="q3", dedup_token="t")
    assert session.observe_table(TableRead(DB, "cand", with_content=False)).row_count == 2 * len(NEW_ROWS)


def test_drop_is_exact_by_uuid() -> None:
    world, _, (session, _) = _setup()
    uuid = world.entropy.uuid()
    session.create_table(DB, "cand", uuid, SPEC)
    with pytest.raises(MutationRejectedError):
        session.drop_table(DB, "cand", world.entropy.uuid())
    session.drop_table(DB, "cand", uuid)
    assert not session.observe_table(TableRead(DB, "cand", with_content=False)).exists
    with pytest.raises(MutationRejectedError):
        session.drop_table(DB, "cand", uuid)


def test_on_cluster_exchange_rename_and_drop_with_queue_status() -> None:
    world, inventory, sessions = _setup(3)
    ddl = world.ports().ddl
    before = {}
    for index, session in enumerate(sessions):
        a, b = world.entropy.uuid(), world.entropy.uuid()
        session.create_table(DB, "t", a, SPEC)
        session.create_table(DB, "c", b, SPEC)
        before[index] = (a, b)
    outcome = ddl.dispatch(
        inventory,
        ExchangeTables(cluster="analytics", database=DB, left="t", right="c"),
        _settings(1),
    )
    assert outcome.entry == "query-0000000000" and not outcome.timed_out and len(outcome.finished) == 3
    for index, session in enumerate(sessions):
        assert session.observe_table(TableRead(DB, "t", with_content=False)).uuid == before[index][1]
        assert session.observe_table(TableRead(DB, "c", with_content=False)).uuid == before[index][0]
    status = ddl.queue_status(inventory, _token(1))
    assert status is not None and all(host.succeeded for host in status.hosts)
    assert ddl.queue_status(inventory, "unknown") is None
    ddl.dispatch(
        inventory,
        DropTable(cluster="analytics", database=DB, table="c"),
        _settings(2),
    )
    ddl.dispatch(
        inventory,
        RenameTable(cluster="analytics", database=DB, source="t", target="u"),
        _settings(3),
    )
    for index, session in enumerate(sessions):
        assert not session.observe_table(TableRead(DB, "c", with_content=False)).exists
        assert session.observe_table(TableRead(DB, "u", with_content=False)).uuid == before[index][1]
    with pytest.raises(OutcomeUnknownError):  # throw mode: a host's error is the initiator's answer
        ddl.dispatch(
            inventory,
            DropTable(cluster="analytics", database=DB, table="c"),
            _settings(4),
        )
    assert all(host.failed for host in ddl.queue_status(inventory, _token(4)).hosts)


def test_a_paused_member_keeps_its_entry_inactive_until_resumed() -> None:
    world, inventory, sessions = _setup(2)
    for session in sessions:
        session.create_table(DB, "c", world.entropy.uuid(), SPEC)
    world.members[1].paused = True
    outcome = world.ports().ddl.dispatch(
        inventory,
        RenameTable(cluster="analytics", database=DB, source="c", target="t"),
        _settings(5),
    )
    assert outcome.timed_out
    states = {h.member_id: h.state for h in world.ports().ddl.queue_status(inventory, _token(5)).hosts}
    assert states[world.members[1].member_id] is HostDdlState.INACTIVE
    world.resume(world.members[1])
    assert all(h.succeeded for h in world.ports().ddl.queue_status(inventory, _token(5)).hosts)


def test_artifact_store_verifies_bytes() -> None:
    world = FakeWorld()
    receipt = world.source(COLUMNS, NEW_ROWS).seal()
    assert Counter(world.ports().artifacts.open(receipt).rows) == Counter(NEW_ROWS)
    world.artifacts[receipt.sha256].data += b"x"
    with pytest.raises(ArtifactInvalidError):
        world.ports().artifacts.open(receipt)
    with pytest.raises(ArtifactInvalidError):
        world.ports().artifacts.open(receipt.model_copy(update={"sha256": "0" * 64}))


@pytest.mark.parametrize(
    ("kind", "raised", "applied"),
    [
        (FaultKind.CRASH_BEFORE, SimulatedCrash, False),
        (FaultKind.CRASH_AFTER, SimulatedCrash, True),
        (FaultKind.LOSE_RESPONSE, OutcomeUnknownError, True),
    ],
)
def test_fault_kinds_on_a_mutation(kind: FaultKind, raised: type[BaseException], applied: bool) -> None:
    world, _, (session, _) = _setup()
    world.faults.schedule([(0, kind)])
    with pytest.raises(raised):
        session.create_table(DB, "cand", world.entropy.uuid(), SPEC)
    assert session.observe_table(TableRead(DB, "cand", with_content=False)).exists is applied
    assert world.faults.fired == [(0, "member.create", kind)]


def test_partial_fault_applies_half_a_load() -> None:
    world, _, (session, _) = _setup()
    rows = tuple((i, str(i)) for i in range(10))
    handle = world.ports().artifacts.open(world.source(COLUMNS, rows).seal())
    uuid = world.entropy.uuid()
    session.create_table(DB, "cand", uuid, SPEC)
    world.faults.schedule([(1, FaultKind.PARTIAL)])
    with pytest.raises(OutcomeUnknownError):
        session.load(DB, "cand", uuid, handle, query_id="q", dedup_token="t")
    assert session.observe_table(TableRead(DB, "cand", with_content=False)).row_count == 5


def test_lost_queue_read_is_an_unanswered_read() -> None:
    world, inventory, _ = _setup()
    world.faults.schedule([(0, FaultKind.LOSE_RESPONSE)])
    with pytest.raises(UnavailableError):
        world.ports().ddl.queue_status(inventory, _token(5))
