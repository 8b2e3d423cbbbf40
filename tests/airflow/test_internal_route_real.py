"""The internal route's example DAG against the real docker-compose cluster (opt-in: ``pytest -m real_cluster``).

Start it with ``docker compose up -d --wait`` in the repository root: two ClickHouse servers in one shard on ClickHouse
Keeper, whose ``dpone_cluster_replicated`` definition reports ``internal_replication=true``; real
``ReplicatedMergeTree`` replication, real ``ON CLUSTER`` DDL and a real KeeperMap authority. When a server does not
answer a socket probe, every test here is skipped and says so (failed under ``make test-real``); a skipped test is
not a pass.

The same verdicts as on the embedded cluster (``test_dag_embedded_internal.py``), read from every server directly.
The real servers have no fault controls, so the lost response is made at the adapter boundary: the member's real
INSERT runs to completion and its acknowledgement is then dropped (the protocol sees ``OutcomeUnknownError``). The
other faults are the external route's (``test_dag_real.py``), with its helpers: a worker process killed mid-stage and
retried on another worker (``workers.py``, also run on the embedded cluster by ``test_dag_embedded_internal.py``),
and a whole server frozen with ``docker compose pause`` while the EXCHANGE is dispatched (``real_faults.py``).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from airflow_provider_dpone.cluster.values.authority.internal import INTERNAL_SCHEMA_V1
from airflow_provider_dpone.core.errors import OutcomeUnknownError
from airflow_provider_dpone.core.manifest import ClusterPublicationManifest as Manifest
from airflow_provider_dpone.hooks.clickhouse import hook_environment
from airflow_provider_dpone.hooks.publication import PublicationEnvironment
from tests.support.airflow.dag_runner import (
    INTERNAL_EXAMPLE_FILE,
    RunOutcome,
    configure,
    load_example,
    provision_example,
    retargeted_manifest,
    run_example,
)
from tests.support.airflow.workers import kill_mid_stage_then_retry_elsewhere
from tests.support.cluster.real_faults import (
    DISPATCHED,
    assert_one_timed_out_dispatch,
    pausing_environment,
    unpause_all,
)
from tests.support.cluster.replica_checks import authority_record, replica_contents, source_content
from tests.support.fixtures.real_cluster import RealCluster, compose_cluster

pytestmark = [pytest.mark.integration, pytest.mark.real_cluster]

SOURCE_ROWS = 200


@pytest.fixture(scope="module")
def real_cluster() -> RealCluster:
    return compose_cluster(internal_replication=True)


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder, INTERNAL_EXAMPLE_FILE)


@pytest.fixture
def published(
    example: ModuleType, real_cluster: RealCluster, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, dict[str, Any]]]:
    database = f"real_{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(real_cluster.connection_json()))
    provision_example(example, real_cluster, database, rows=SOURCE_ROWS)
    content = retargeted_manifest(example, cluster=real_cluster.cluster_name, database=database)
    configure(example, None, manifest=content, poll_interval=0.5)
    try:
        yield database, content
    finally:
        configure(example, None)
        unpause_all()
        client = real_cluster.client()
        try:
            client.command(f"DROP DATABASE IF EXISTS `{database}` ON CLUSTER {real_cluster.cluster_name} SYNC")
        finally:
            client.close()


def _run(example: ModuleType, day: int) -> RunOutcome:
    return run_example(example, logical_date=datetime(2026, 6, day, tzinfo=UTC))


def _assert_exact(cluster: RealCluster, database: str, outcome: RunOutcome) -> dict[str, Any]:
    assert outcome.succeeded, outcome.states
    source = source_content(cluster, database)
    assert replica_contents(cluster, database) == [source] * len(cluster.members)
    record = authority_record(cluster, database)
    assert record is not None and record.phase.value == "COMPLETED" and record.schema_ == INTERNAL_SCHEMA_V1
    receipt: dict[str, Any] = outcome.xcom["cleanup"]
    assert (receipt["replication_mode"], receipt["row_count"]) == ("internal", source.rows)
    return receipt


def test_two_runs_publish_exactly_the_source_on_every_replica(
    example: ModuleType, real_cluster: RealCluster, published: tuple[str, dict[str, Any]]
) -> None:
    database, _ = published
    first = _assert_exact(real_cluster, database, _run(example, 1))
    assert (first["baseline"], first["publication_kind"]) == ("absent", "rename")
    second = _assert_exact(real_cluster, database, _run(example, 2))
    assert (second["baseline"], second["publication_kind"]) == ("existing", "exchange")


LOST: list[str] = []
"""Query ids of the loads whose acknowledgement was dropped (the first load only)."""


class LostLoadAck:
    """A member session whose first load runs for real and then loses its acknowledgement."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def load(self, *args: Any, **kwargs: Any) -> None:
        self._session.load(*args, **kwargs)
        if not LOST:
            LOST.append(kwargs["query_id"])
            raise OutcomeUnknownError("the load's response was lost")


class LosingSessions:
    def __init__(self, sessions: Any) -> None:
        self._sessions = sessions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sessions, name)

    def session(self, member: Any) -> Any:
        return LostLoadAck(self._sessions.session(member))


def losing_environment(
    manifest: Manifest, conn_id: str, *, ddl_task_timeout_seconds: int | None = None
) -> PublicationEnvironment:
    environment = hook_environment(manifest, conn_id, ddl_task_timeout_seconds=ddl_task_timeout_seconds)
    ports = dataclasses.replace(environment.ports, sessions=LosingSessions(environment.ports.sessions))
    return dataclasses.replace(environment, ports=ports)


def test_a_lost_load_response_is_resolved_by_observation_without_a_resend(
    example: ModuleType, real_cluster: RealCluster, published: tuple[str, dict[str, Any]]
) -> None:
    database, content = published
    LOST.clear()
    configure(example, losing_environment, manifest=content, poll_interval=0.5)
    outcome = _run(example, 3)
    assert len(LOST) == 1, "one load was sent and its response lost"
    receipt = _assert_exact(real_cluster, database, outcome)
    assert (outcome.tries["stage"], receipt["rebuilds"]) == (1, 0), "resolved by observation, not by a resend"


def test_a_task_killed_mid_stage_is_retried_on_another_worker_and_completes(
    example: ModuleType, real_cluster: RealCluster, published: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    """The worker dies as its load into the writing replica is about to be sent; the retry on another worker resumes
    from the authority and publishes exactly the source on every replica."""
    database, content = published
    kill_mid_stage_then_retry_elsewhere(tmp_path, real_cluster, content)
    source = source_content(real_cluster, database)
    assert replica_contents(real_cluster, database) == [source] * len(real_cluster.members)
    record = authority_record(real_cluster, database)
    assert record is not None and record.phase.value == "COMMITTED" and record.schema_ == INTERNAL_SCHEMA_V1


def test_a_member_paused_during_publish_times_the_dispatch_out_and_the_run_converges_on_one_exchange(
    example: ModuleType,
    real_cluster: RealCluster,
    published: tuple[str, dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The second run's EXCHANGE of the replicated tables reaches a frozen server: the initiator answers after its
    DDL timeout with that host unfinished; once unpaused, the server's DDL worker runs the queued entry and the run
    converges on that one dispatch."""
    database, content = published
    monkeypatch.setenv("AIRFLOW__DPONE__DDL_TASK_TIMEOUT_SECONDS", "5")
    _assert_exact(real_cluster, database, _run(example, 4))
    client = real_cluster.client()
    try:
        client.command(
            f"INSERT INTO `{database}`.source_table (id, name, amount, updated_at) VALUES (9003, 'x', NULL, 0)"
        )
    finally:
        client.close()
    DISPATCHED.clear()
    configure(example, pausing_environment, manifest=content, poll_interval=0.5)
    outcome = _run(example, 5)
    assert_one_timed_out_dispatch(len(real_cluster.members))
    receipt = _assert_exact(real_cluster, database, outcome)
    assert (receipt["baseline"], receipt["publication_kind"]) == ("existing", "exchange")
    assert receipt["dispatch_epoch"] == 2, "two permits: the candidate CREATE and the one EXCHANGE"
    assert receipt["row_count"] == SOURCE_ROWS + 1
