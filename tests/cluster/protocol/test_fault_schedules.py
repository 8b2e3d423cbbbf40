"""10,000 derandomized multi-fault schedules with retries per replication mode (hypothesis).

Each example draws a topology (2 or 3 members), a baseline (existing or absent target), an input (rows or empty), an
Airflow retry budget, and a schedule of 2 to 6 faults (point index, kind) over the run's fault points. After the faulty
run the invariants must hold; a later retry with faults off must then converge to COMPLETED with every member equal to
the artifact, or -- only when a permit's DDL was never sent -- stop fail-closed with ``DISPATCH_UNPROVEN``.
``derandomize=True`` and no example database make the run reproducible and CI-stable.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.cluster.sim import BASELINE_ROWS, NEW_ROWS, UNPROVEN, Sim
from tests.support.fakes.faults import FaultKind

pytestmark = [pytest.mark.protocol, pytest.mark.slow]  # minutes: collected first (tests/conftest.py)

SCHEDULES = int(__import__("os").environ.get("DPONE_SCHEDULES", "10000"))
MAX_POINT = 40  # a fault-free run has 19-26 points; retries add more

fault_lists = st.lists(
    st.tuples(st.integers(0, MAX_POINT), st.sampled_from(list(FaultKind))),
    min_size=2,
    max_size=6,
    unique_by=lambda fault: fault[0],
)


SETTINGS = settings(
    max_examples=SCHEDULES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def _run_schedule(sim: Sim, faults: list[tuple[int, FaultKind]], tries: int, heal: Callable[[], None]) -> None:
    """The faulty run, the invariants, then (faults off, ``heal`` applied) retries: COMPLETED with every member equal
    to the artifact, or -- only for a permit whose DDL was never sent -- a fail-closed stop retaining everything."""
    sim.world.faults.schedule(faults)
    outcome = sim.run_dag(tries=tries)
    sim.check_invariants()
    sim.world.faults.disable()
    heal()
    if outcome != "completed":
        outcome = sim.run_dag()
    if outcome.endswith(UNPROVEN):
        sim.check_fail_closed(outcome, UNPROVEN)
        return
    assert outcome == "completed", (outcome, sim.errors, sim.world.faults.fired)
    sim.check_converged()


@SETTINGS
@given(
    members=st.sampled_from([2, 3]),
    existing=st.booleans(),
    empty=st.booleans(),
    tries=st.integers(1, 3),
    faults=fault_lists,
)
def test_multi_fault_schedules_never_duplicate_never_lie_and_converge(
    members: int, existing: bool, empty: bool, tries: int, faults: list[tuple[int, FaultKind]]
) -> None:
    sim = Sim.build(members=members, baseline=BASELINE_ROWS if existing else None, rows=() if empty else NEW_ROWS)
    _run_schedule(sim, faults, tries, heal=lambda: None)


@SETTINGS
@given(
    members=st.sampled_from([2, 3]),
    existing=st.booleans(),
    empty=st.booleans(),
    tries=st.integers(1, 3),
    faults=fault_lists,
    lagging=st.sampled_from([None, 0, 1, 2]),
    diverging=st.sampled_from([None, 0, 1, 2]),
    block_rows=st.integers(1, 3),
)
def test_internal_multi_fault_schedules_never_duplicate_never_lie_and_converge(
    members: int,
    existing: bool,
    empty: bool,
    tries: int,
    faults: list[tuple[int, FaultKind]],
    lagging: int | None,
    diverging: int | None,
    block_rows: int,
) -> None:
    """The internal route under the same schedules, plus replication adversity during the faulty run: a replica that
    fetches nothing until healed, a replica whose first fetched part diverges, and the insert block size."""
    sim = Sim.build(
        members=members, baseline=BASELINE_ROWS if existing else None, rows=() if empty else NEW_ROWS, mode="internal"
    )
    sim.world.insert_block_rows = block_rows
    if lagging is not None and lagging < members:
        sim.world.members[lagging].fetch_paused = True
    if diverging is not None and diverging < members:
        sim.world.members[diverging].fetch_corrupt = 1

    def heal() -> None:
        for member in sim.world.members:
            member.fetch_paused = False

    _run_schedule(sim, faults, tries, heal)
