"""A content read the server stops at the verification budget: the try fails retryably, nothing is decided from it,
the published target is untouched, and a retry verifies again and publishes."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from airflow_provider_dpone.cluster.ports import TableRead
from airflow_provider_dpone.core.errors import DponeError, VerificationBudgetExceededError
from tests.support.cluster.sim import BASELINE_ROWS, NEW_ROWS, Sim, rows_of
from tests.support.fakes.ports import FakeMemberSession

pytestmark = pytest.mark.protocol


def test_a_candidate_digest_stopped_at_the_budget_fails_the_try_and_the_retry_publishes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim = Sim.build(members=2, baseline=BASELINE_ROWS, mode="internal")
    observe = FakeMemberSession.observe_table

    def stopped(self: FakeMemberSession, read: TableRead) -> Any:
        if read.with_content and read.table == sim.request.candidate_name:
            raise VerificationBudgetExceededError("DPONE_CLICKHOUSE_CLUSTER_VERIFICATION_BUDGET_EXCEEDED: stopped")
        return observe(self, read)

    sim.service().fence()
    monkeypatch.setattr(FakeMemberSession, "observe_table", stopped)
    with pytest.raises(DponeError) as failed:
        sim.service().stage(sim.source)
    assert failed.value.code == "DPONE_CLICKHOUSE_CLUSTER_VERIFICATION_BUDGET_EXCEEDED"
    assert failed.value.error.retryable
    for member in range(len(sim.world.members)):
        assert rows_of(sim, member, sim.request.target) == Counter(BASELINE_ROWS)
    monkeypatch.setattr(FakeMemberSession, "observe_table", observe)
    assert sim.run_dag() == "completed"
    for member in range(len(sim.world.members)):
        assert rows_of(sim, member, sim.request.target) == Counter(NEW_ROWS)
    sim.check_invariants()
