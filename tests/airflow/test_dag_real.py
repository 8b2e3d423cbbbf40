"""The example DAGs end to end on the docker-compose cluster (opt-in: ``make test-real``, marker ``real_cluster``).

Real ClickHouse servers of the release the embedded cluster embeds, a three-server Keeper ensemble, real ``ON CLUSTER``
DDL through the real DDLWorker, real KeeperMap and real replication. The runs, harness and verdicts are the embedded
ones (``dag_runner``, ``embedded_example``, ``replica_checks``, the quality module's assertions, the worker processes
of ``test_multi_worker_store``) handed the compose cluster instead of the embedded one; every verdict is read from each
server directly. The faults are the ones a real harness can make: a worker process killed mid-task
(``os._exit``), and a whole server frozen with ``docker compose pause`` while the EXCHANGE is dispatched.

When a server does not accept a connection every test here is skipped with the reason (failed under
``make test-real``); a skipped test is not a pass.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.airflow.test_dag_embedded_quality import (
    EXAMPLE_FILE as QUALITY_EXAMPLE_FILE,
)
from tests.airflow.test_dag_embedded_quality import (
    SOURCE_ROWS as QUALITY_ROWS,
)
from tests.airflow.test_dag_embedded_quality import (
    assert_complete_capsule,
    assert_min_rows_gate_blocked,
)
from tests.support.airflow.dag_runner import RunOutcome, configure, export_connection, load_example, run_example
from tests.support.airflow.embedded_example import embedded_manifest, member_rows, member_tables
from tests.support.airflow.workers import kill_mid_stage_then_retry_elsewhere
from tests.support.cluster.real_faults import (
    DISPATCHED,
    assert_one_timed_out_dispatch,
    pausing_environment,
    unpause_all,
)
from tests.support.cluster.replica_checks import authority_record, replica_contents, source_content
from tests.support.fixtures import real_cluster
from tests.support.fixtures.real_cluster import RealCluster

pytestmark = [pytest.mark.integration, pytest.mark.real_cluster]

SOURCE_ROWS = 40
DDL_TASK_TIMEOUT_SECONDS = 5
AUTHORITY = "__dpone_cluster_publication_authority"


@pytest.fixture(scope="module")
def external() -> RealCluster:
    return real_cluster.compose_cluster(internal_replication=False)


@pytest.fixture(scope="module")
def internal() -> RealCluster:
    return real_cluster.compose_cluster(internal_replication=True)


def _database(cluster: RealCluster) -> Iterator[str]:
    name = f"real_{uuid.uuid4().hex[:12]}"
    yield name
    unpause_all()
    client = cluster.client()
    try:
        client.command(f"DROP DATABASE IF EXISTS `{name}` ON CLUSTER `{cluster.cluster_name}` SYNC")
    finally:
        client.close()


@pytest.fixture
def external_database(external: RealCluster) -> Iterator[str]:
    yield from _database(external)


@pytest.fixture
def internal_database(internal: RealCluster) -> Iterator[str]:
    yield from _database(internal)


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder)


@pytest.fixture
def published(
    external: RealCluster, external_database: str, example: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """The external example pointed at a fresh database of the compose cluster, its connection exported."""
    export_connection(monkeypatch, external, ddl_task_timeout_seconds=DDL_TASK_TIMEOUT_SECONDS)
    content = embedded_manifest(example, external, external_database, rows=SOURCE_ROWS)
    configure(example, None, manifest=content, poll_interval=0.5)
    yield content
    configure(example, None)


def _run(example: ModuleType, day: int) -> RunOutcome:
    return run_example(example, logical_date=datetime(2026, 8, day, tzinfo=UTC))


def _add_source_row(cluster: RealCluster, database: str, row_id: int) -> None:
    client = cluster.client()
    try:
        client.command(
            f"INSERT INTO `{database}`.source_table (id, name, amount, updated_at) VALUES ({row_id}, 'x', NULL, 0)"
        )
    finally:
        client.close()


def _assert_published(cluster: RealCluster, database: str, outcome: RunOutcome) -> dict[str, Any]:
    """Exactly the source on every server, the record COMPLETED, nothing but the target and the authority left."""
    assert outcome.succeeded, outcome.states
    source = source_content(cluster, database)
    assert replica_contents(cluster, database) == [source] * len(cluster.members)
    record = authority_record(cluster, database)
    assert record is not None and record.phase.value == "COMPLETED"
    assert member_tables(cluster, database) == [[AUTHORITY, "target_table"]] * len(cluster.members)
    receipt: dict[str, Any] = outcome.xcom["cleanup"]
    assert (receipt["replication_mode"], receipt["row_count"]) == ("external", source.rows)
    return receipt


# --- the external route ------------------------------------------------------------------------------------------


def test_external_route_fence_stage_publish_cleanup_twice(
    external: RealCluster, external_database: str, published: dict[str, Any], example: ModuleType
) -> None:
    """Absent target (RENAME ON CLUSTER), then an existing one (EXCHANGE ON CLUSTER): each entry found by the
    product's own queue lookup on a real server, which keeps the token in the entry's settings."""
    first = _assert_published(external, external_database, _run(example, 1))
    assert (first["baseline"], first["publication_kind"]) == ("absent", "rename")
    _add_source_row(external, external_database, 9001)
    second = _assert_published(external, external_database, _run(example, 2))
    assert (second["baseline"], second["publication_kind"]) == ("existing", "exchange")
    assert second["generation_id"] != first["generation_id"]
    assert member_rows(external, external_database) == [(SOURCE_ROWS + 1, SOURCE_ROWS + 1)] * len(external.members)


def test_a_member_paused_during_publish_times_the_dispatch_out_and_the_run_converges_on_one_exchange(
    external: RealCluster,
    external_database: str,
    published: dict[str, Any],
    example: ModuleType,
) -> None:
    """The second run's EXCHANGE reaches a frozen server: the real initiator answers after its DDL timeout with that
    host unfinished; the server is unpaused, its DDL worker runs the queued entry, and the run converges, exactly
    once, without a second dispatch."""
    _assert_published(external, external_database, _run(example, 3))
    _add_source_row(external, external_database, 9002)
    DISPATCHED.clear()
    configure(example, pausing_environment, manifest=published, poll_interval=0.5)
    outcome = _run(example, 4)
    assert_one_timed_out_dispatch(len(external.members))
    receipt = _assert_published(external, external_database, outcome)
    assert (receipt["baseline"], receipt["publication_kind"]) == ("existing", "exchange")
    assert receipt["dispatch_epoch"] == 1, "one publication permit: the exchange was sent once"
    assert member_rows(external, external_database) == [(SOURCE_ROWS + 1, SOURCE_ROWS + 1)] * len(external.members)


def test_a_task_killed_mid_stage_is_retried_and_completes(
    external: RealCluster, external_database: str, example: ModuleType, tmp_path: Path
) -> None:
    """A worker process dies (``os._exit``) as its first member load is about to be sent; the retry on another
    worker (one shared artifact store) resumes from the authority and publishes exactly the source."""
    content = embedded_manifest(example, external, external_database, rows=SOURCE_ROWS)
    kill_mid_stage_then_retry_elsewhere(tmp_path, external, content)
    source = source_content(external, external_database)
    assert replica_contents(external, external_database) == [source] * len(external.members)


# --- the internal route with durable quality replay --------------------------------------------------------------


@pytest.fixture(scope="module")
def quality_example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder, QUALITY_EXAMPLE_FILE)


@pytest.fixture
def quality_manifest(
    internal: RealCluster, internal_database: str, quality_example: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    export_connection(monkeypatch, internal, ddl_task_timeout_seconds=DDL_TASK_TIMEOUT_SECONDS)
    content = embedded_manifest(quality_example, internal, internal_database, rows=QUALITY_ROWS)
    assert content["sink"]["options"] == {"durable_quality_replay": True}
    yield content
    configure(quality_example, None)


def test_quality_replay_ends_with_a_complete_capsule_on_every_replica(
    internal: RealCluster,
    internal_database: str,
    quality_manifest: dict[str, Any],
    quality_example: ModuleType,
    capfd: pytest.CaptureFixture[str],
) -> None:
    configure(quality_example, None, manifest=quality_manifest, poll_interval=0.5)
    capfd.readouterr()
    outcome = run_example(quality_example, logical_date=datetime(2026, 8, 11, tzinfo=UTC))
    log = capfd.readouterr().out
    assert outcome.succeeded, (outcome.states, [line for line in log.splitlines() if "DPONE_" in line])
    assert_complete_capsule(internal, internal_database, outcome, log, password=internal.password)


def test_quality_replay_min_rows_gate_blocks_publication(
    internal: RealCluster,
    internal_database: str,
    quality_manifest: dict[str, Any],
    quality_example: ModuleType,
    capfd: pytest.CaptureFixture[str],
) -> None:
    manifest = {**quality_manifest, "quality": {"min_rows": QUALITY_ROWS + 1, "target_metrics": ["row_count"]}}
    configure(quality_example, None, manifest=manifest, poll_interval=0.5, retries=1)
    capfd.readouterr()
    outcome = run_example(quality_example, logical_date=datetime(2026, 8, 12, tzinfo=UTC))
    assert_min_rows_gate_blocked(internal, internal_database, outcome, capfd.readouterr().out)
