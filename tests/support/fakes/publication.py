"""In-memory fakes of every publication port, with deterministic fault injection (the importable entry point).

See :mod:`tests.support.fakes.world` for the simulated ClickHouse semantics, :mod:`tests.support.fakes.ports` for the port
implementations and :mod:`tests.support.fakes.faults` for the fault kinds. Other test suites import from here.
"""

from __future__ import annotations

from tests.support.fakes.faults import SINGLE_FAULT_KINDS, FaultInjector, FaultKind, SimulatedCrash
from tests.support.fakes.ports import (
    FakeArtifactStore,
    FakeAuthorityStore,
    FakeCatalog,
    FakeClusterDDL,
    FakeHandle,
    FakeMemberSession,
    FakeSessions,
    FakeSource,
)
from tests.support.fakes.world import (
    Effect,
    FakeClock,
    FakeEntropy,
    FakeMember,
    FakeTable,
    FakeWorld,
    Row,
    content_digest,
    exact_authority_facts,
)

__all__ = [
    "SINGLE_FAULT_KINDS",
    "Effect",
    "FakeArtifactStore",
    "FakeAuthorityStore",
    "FakeCatalog",
    "FakeClock",
    "FakeClusterDDL",
    "FakeEntropy",
    "FakeHandle",
    "FakeMember",
    "FakeMemberSession",
    "FakeSessions",
    "FakeSource",
    "FakeTable",
    "FakeWorld",
    "FaultInjector",
    "FaultKind",
    "SimulatedCrash",
    "Row",
    "content_digest",
    "exact_authority_facts",
]
