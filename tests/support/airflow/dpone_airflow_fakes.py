"""The in-memory fake cluster behind the operators' ``ports_factory`` seam, for ``dag.test()`` runs.

:class:`FakeDeployment` owns one :class:`FakeWorld` (members, Keeper, DDL queue, artifact store, fault injector) and
hands the operators a factory closure: every task try gets fresh port objects over the same world, as a fresh worker
would get fresh clients over the same cluster. Building an environment advances the fake clock by a retry delay, so
time-based rules (the dispatch quiet period) behave as between real tries.

The deferral trigger is rebuilt from its serialized kwargs, so it cannot receive a closure: :func:`serve_queue`
patches the hook it polls through to read the *current* deployment's queue. ``on_poll`` lets a test act between
polls (for example, resume a paused member), like an operator fixing a member while the task waits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from airflow_provider_dpone.cluster.ports import QueueEntry, QueueHost
from airflow_provider_dpone.cluster.protocol.context import ProtocolSettings
from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
from airflow_provider_dpone.core.manifest import ClusterPublicationManifest
from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook
from airflow_provider_dpone.hooks.publication import PortsFactory, PublicationEnvironment
from tests.support.fakes.faults import FaultInjector, FaultKind
from tests.support.fakes.publication import FakeSource, FakeWorld, Row

COLUMNS: tuple[tuple[str, str], ...] = (("id", "UInt64"), ("name", "String"), ("amount", "Nullable(Int64)"))
RETRY_DELAY_MS = 300_000


@dataclass
class FakeDeployment:
    world: FakeWorld
    rows: tuple[Row, ...]
    columns: tuple[tuple[str, str], ...] = COLUMNS
    environments: int = 0
    table_calls: int = 0
    polls: int = 0
    on_poll: Callable[[int], None] | None = None
    seen_requests: list[PublicationRequest] = field(default_factory=list)
    source: FakeSource | None = None

    @classmethod
    def build(
        cls,
        manifest: ClusterPublicationManifest,
        *,
        rows: Sequence[Row],
        members: int = 2,
        baseline: Sequence[Row] | None = None,
    ) -> FakeDeployment:
        cluster = manifest.cluster
        assert cluster is not None
        world = FakeWorld(members=members, cluster=cluster.name, database=manifest.sink.database)
        deployment = cls(world=world, rows=tuple(rows))
        if baseline is not None:
            for member in world.members:
                world.put_table(member, manifest.sink.table, deployment.columns, tuple(baseline))
        deployment.source = world.source(deployment.columns, deployment.rows)
        return deployment

    def describe(self) -> tuple[tuple[str, str], ...]:
        """The source's typed columns, as the hook describes them (counted: only staging reads the schema)."""
        self.table_calls += 1
        return self.columns

    def factory(self) -> PortsFactory:
        """A closure (not a bound method: Airflow copies operators, and a copied method would copy the world)."""
        deployment = self

        def build(
            manifest: ClusterPublicationManifest, conn_id: str, *, ddl_task_timeout_seconds: int | None = None
        ) -> PublicationEnvironment:
            global CURRENT
            CURRENT = deployment
            deployment.environments += 1
            deployment.world.clock.advance(RETRY_DELAY_MS)

            def source(request: PublicationRequest, columns: tuple[tuple[str, str], ...]) -> FakeSource:
                deployment.seen_requests.append(request)
                assert deployment.source is not None
                return deployment.source

            return PublicationEnvironment(
                ports=deployment.world.ports(),
                columns=deployment.describe,
                source=source,
                settings=ProtocolSettings(dispatch_quiet_ms=120_000),
            )

        return build

    def content(self, table: str) -> list[list[Row] | None]:
        """Each member's rows under ``table`` (sorted), or ``None`` where absent."""
        result: list[list[Row] | None] = []
        for member in self.world.members:
            found = self.world.table(member, table)
            result.append(None if found is None else sorted(found.rows, key=repr))
        return result


CURRENT: FakeDeployment | None = None


async def fake_queue_entries(
    hook: DponeClickHouseHook, cluster: str, correlation_token: str, entry: str | None = None
) -> tuple[QueueEntry, ...]:
    """The current deployment's DDL queue, read as the hook reads ``system.distributed_ddl_queue``."""
    deployment = CURRENT
    assert deployment is not None, "no fake deployment is active"
    deployment.polls += 1
    if deployment.on_poll is not None:
        deployment.on_poll(deployment.polls)
    matches = [e for e in deployment.world.queue if e.token == correlation_token and entry in (None, e.name)]
    return tuple(
        QueueEntry(entry=found.name, hosts=tuple(QueueHost(state, code) for state, code in found.hosts.values()))
        for found in matches
    )


async def _no_client(hook: DponeClickHouseHook) -> None:
    return None


def serve_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trigger's hook reads the current deployment's queue (the trigger is rebuilt from its serialized kwargs, so
    the deployment reaches it only through the hook it builds)."""
    monkeypatch.setattr(DponeClickHouseHook, "aqueue_entries", fake_queue_entries)
    monkeypatch.setattr(DponeClickHouseHook, "aclose", _no_client)


class NamedFaults(FaultInjector):
    """Faults by name and occurrence ("the first ``member.load``"), plus callbacks at named points.

    The protocol suite numbers fault points globally; a DAG-level scenario names the boundary it means instead.
    """

    def __init__(
        self,
        faults: dict[tuple[str, int], FaultKind] | None = None,
        callbacks: dict[tuple[str, int], Callable[[], None]] | None = None,
    ) -> None:
        super().__init__()
        self.named = dict(faults or {})
        self.callbacks = dict(callbacks or {})
        self.seen: Counter[str] = Counter()

    def _next(self, name: str) -> FaultKind | None:
        index = self.counter
        self.counter += 1
        self.trace.append(name)
        self.seen[name] += 1
        occurrence = (name, self.seen[name])
        callback = self.callbacks.get(occurrence)
        if callback is not None:
            callback()
        kind = self.named.get(occurrence)
        if kind is not None:
            self.fired.append((index, name, kind))
        return kind
