"""The authority write helper trusts a write only when the port acknowledged it (the port proves its acknowledgement)."""

from __future__ import annotations

import pytest

from airflow_provider_dpone.cluster.ports import AuthorityStore
from airflow_provider_dpone.cluster.protocol.authority_io import (
    Current,
    Held,
    ReadBackBound,
    read_current,
    write_record,
)
from airflow_provider_dpone.cluster.values.authority.codec import encode
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.cluster.values.authority.row import AuthorityRow, VersionedAuthorityRow
from airflow_provider_dpone.core.errors import (
    DponeError,
    MutationRejectedError,
    OutcomeUnknownError,
    ReadBackOlderError,
    UnavailableError,
)
from tests.support.fakes.publication import FakeWorld
from tests.support.fakes.records import external_record

pytestmark = pytest.mark.protocol


class _Store:
    """A store whose behaviour each test scripts: what a write does and what the read-back returns."""

    def __init__(self, *, on_write: str, readback: VersionedAuthorityRow | None = None) -> None:
        self.on_write = on_write
        self.readback = readback
        self.written: AuthorityRow | None = None

    def read(self, target_key: str) -> VersionedAuthorityRow | None:
        if self.on_write == "unreadable":
            raise UnavailableError("down")
        if self.readback is not None:
            return self.readback
        return None if self.written is None else VersionedAuthorityRow(row=self.written, version=0)

    def create(self, row: AuthorityRow) -> None:
        if self.on_write in ("apply", "lose", "unreadable"):
            self.written = row
        if self.on_write == "lose":
            raise OutcomeUnknownError("lost")
        if self.on_write == "refuse":
            raise MutationRejectedError("Code: 497. ACCESS_DENIED")

    def compare_and_set(self, row: AuthorityRow, expected_version: int) -> None:
        self.create(row)


def _code(call: object) -> str:
    with pytest.raises(DponeError) as raised:
        call()  # type: ignore[operator]
    return raised.value.code


def test_an_acknowledged_write_is_held_at_its_version_without_another_read() -> None:
    """The port proves its acknowledgement (strict insert; CAS with its own read-back: see the adapter's tests in
    tests/cluster/clickhouse/test_failure_mapping.py), so the helper adds no Keeper round trip."""
    world = FakeWorld()
    store = world.ports().authority
    locked = external_record(Phase.LOCKED)
    held = write_record(store, locked, previous_phase=None, previous_version=None)
    staging = external_record(Phase.STAGING)
    moved = write_record(store, staging, previous_phase=Phase.LOCKED, previous_version=held.version)
    assert (held.version, held.record, moved.version, moved.record) == (0, locked, 1, staging)
    assert world.calls["authority.read"] == 0
    assert read_current(store, locked.target_key) == Current(staging, 1)


@pytest.mark.parametrize("previous_version", [None, 3])
def test_lost_acknowledgement_grants_nothing_even_if_the_write_landed(previous_version: int | None) -> None:
    store = _Store(on_write="lose")
    record = external_record(Phase.LOCKED if previous_version is None else Phase.STAGING)
    previous = None if previous_version is None else Phase.LOCKED
    assert _code(
        lambda: write_record(store, record, previous_phase=previous, previous_version=previous_version)  # type: ignore[arg-type]
    ) == ("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_OUTCOME_UNKNOWN")
    assert store.written == encode(record)


def test_transition_table_is_enforced_before_any_write() -> None:
    store = _Store(on_write="apply")
    record = external_record(Phase.COMMITTED)
    assert _code(lambda: write_record(store, record, previous_phase=Phase.STAGING, previous_version=4)) == (  # type: ignore[arg-type]
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TRANSITION_INVALID"
    )
    assert store.written is None


def test_version_conflict_and_unreadable_authority_have_stable_codes() -> None:
    world = FakeWorld()
    store = world.ports().authority
    locked = external_record(Phase.LOCKED)
    write_record(store, locked, previous_phase=None, previous_version=None)
    staging = external_record(Phase.STAGING)
    write_record(store, staging, previous_phase=Phase.LOCKED, previous_version=0)
    rival = external_record(Phase.STAGING, version_seed=2)
    assert _code(lambda: write_record(store, rival, previous_phase=Phase.LOCKED, previous_version=0)) == (
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_CONFLICT"  # version 1 holds another write
    )
    assert _code(lambda: write_record(store, locked, previous_phase=None, previous_version=None)) == (
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_CONFLICT"
    )
    assert read_current(store, locked.target_key) == Current(staging, 1)
    assert _code(lambda: read_current(_Store(on_write="unreadable"), locked.target_key)) == (  # type: ignore[arg-type]
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_UNAVAILABLE"
    )


def test_a_row_under_another_key_is_refused() -> None:
    record = external_record(Phase.LOCKED)
    store = _Store(on_write="apply", readback=VersionedAuthorityRow(row=encode(record), version=0))
    assert _code(lambda: read_current(store, "0" * 64)) == "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_RECORD_INVALID"  # type: ignore[arg-type]


@pytest.mark.parametrize("previous_version", [None, 3])
def test_a_refused_write_is_a_coded_retryable_failure_and_nothing_is_granted(previous_version: int | None) -> None:
    store = _Store(on_write="refuse")
    record = external_record(Phase.LOCKED if previous_version is None else Phase.STAGING)
    previous = None if previous_version is None else Phase.LOCKED
    with pytest.raises(DponeError) as raised:
        write_record(store, record, previous_phase=previous, previous_version=previous_version)  # type: ignore[arg-type]
    assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_WRITE_REFUSED" and raised.value.retryable
    assert "ACCESS_DENIED" in str(raised.value) and store.written is None


# --- a read-back older than the write: Keeper reads are not linearizable across servers -----------------------------

OUTCOME_UNKNOWN = "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_OUTCOME_UNKNOWN"


def _bound(world: FakeWorld, rereads: int, budget_ms: int = 5_000) -> ReadBackBound:
    return ReadBackBound(
        rereads=rereads, budget_ms=budget_ms, sleep=world.clock.sleep_ms, monotonic_ms=world.clock.monotonic_ms
    )


def _locked(world: FakeWorld) -> tuple[AuthorityStore, Held]:
    store = world.ports().authority
    return store, write_record(store, external_record(Phase.LOCKED), previous_phase=None, previous_version=None)


@pytest.mark.parametrize("lagging_reads", [1, 2, 4])
def test_a_read_back_older_than_the_write_is_read_again_until_the_write_shows(lagging_reads: int) -> None:
    """A lagging Keeper server answers the CAS's read-back (and maybe a few more reads) with the previous version:
    not a conflict. The helper reads again with growing pauses and holds the write once a read shows it; the write
    was sent once."""
    world = FakeWorld()
    store, held = _locked(world)
    world.lag_keeper(lagging_reads)
    started = world.clock.now_ms()
    staging = external_record(Phase.STAGING)
    moved = write_record(
        store, staging, previous_phase=Phase.LOCKED, previous_version=held.version, read_back=_bound(world, 4)
    )
    assert (moved.version, moved.record) == (1, staging)
    assert world.calls["authority.cas"] == 1 and world.calls["authority.read"] == lagging_reads
    assert world.clock.now_ms() - started == sum(50 * 2**i for i in range(lagging_reads))  # 50, 100, 200... ms


def test_a_read_back_that_stays_older_past_the_bound_is_an_unknown_outcome_never_a_second_write() -> None:
    world = FakeWorld()
    store, held = _locked(world)
    world.lag_keeper(100)
    staging = external_record(Phase.STAGING)
    assert (
        _code(
            lambda: write_record(
                store, staging, previous_phase=Phase.LOCKED, previous_version=held.version, read_back=_bound(world, 3)
            )
        )
        == OUTCOME_UNKNOWN
    )
    assert world.calls["authority.cas"] == 1 and world.calls["authority.read"] == 3
    assert world.keeper[staging.target_key] == (encode(staging), 1)  # it had landed: the next attempt observes it


def test_the_time_budget_bounds_the_reads_too() -> None:
    world = FakeWorld()
    store, held = _locked(world)
    world.lag_keeper(100)
    bound = _bound(world, 50, budget_ms=1_000)  # pauses 50 + 100 + 200 + 400 + 800: the sixth read never starts
    staging = external_record(Phase.STAGING)
    assert (
        _code(
            lambda: write_record(
                store, staging, previous_phase=Phase.LOCKED, previous_version=held.version, read_back=bound
            )
        )
        == OUTCOME_UNKNOWN
    )
    assert world.calls["authority.read"] == 5


def test_without_a_bound_an_older_read_back_is_unknown_at_once() -> None:
    world = FakeWorld()
    store, held = _locked(world)
    world.lag_keeper(1)
    staging = external_record(Phase.STAGING)
    assert (
        _code(lambda: write_record(store, staging, previous_phase=Phase.LOCKED, previous_version=held.version))
        == OUTCOME_UNKNOWN
    )
    assert world.calls["authority.read"] == 0


class _Older:
    """A store whose CAS read-back was older than the write, and whose later reads answer from ``reads``."""

    def __init__(self, *reads: VersionedAuthorityRow | None) -> None:
        self.reads = list(reads)
        self.writes = 0

    def read(self, target_key: str) -> VersionedAuthorityRow | None:
        return self.reads.pop(0)

    def create(self, row: AuthorityRow) -> None:
        raise AssertionError("not used")

    def compare_and_set(self, row: AuthorityRow, expected_version: int) -> None:
        self.writes += 1
        raise ReadBackOlderError("older")


def test_after_an_older_read_back_only_the_next_version_decides_and_a_later_one_is_unknown() -> None:
    staging = external_record(Phase.STAGING)
    other = encode(external_record(Phase.ABORTED))
    older = VersionedAuthorityRow(row=encode(external_record(Phase.LOCKED)), version=3)
    world = FakeWorld()
    cases = {
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_CONFLICT": _Older(older, VersionedAuthorityRow(row=other, version=4)),
        OUTCOME_UNKNOWN: _Older(None, VersionedAuthorityRow(row=other, version=5)),
    }
    for code, store in cases.items():
        assert (
            _code(
                lambda store=store: write_record(  # type: ignore[misc]
                    store, staging, previous_phase=Phase.LOCKED, previous_version=3, read_back=_bound(world, 5)
                )
            )
            == code
        )
        assert store.writes == 1 and store.reads == []
