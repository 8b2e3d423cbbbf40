"""Least privilege of the internal (replicated) publication route: the internal example DAG with accounts holding
exactly the documented grants (seed 003, SE4), on a 3-replica embedded cluster with ``internal_replication=true``.

The grants are the one block of ``docs/limitations.md`` (the same list as the external route's). Every process is
restarted with its engine's account holding exactly those grants (see ``restricted_account.py``); the replicated
candidate is created ``ON CLUSTER``, loaded on one replica, waited for with ``SYSTEM SYNC REPLICA`` on every replica and
exchanged or renamed into place, each statement run by the restricted account. With one grant taken away, the run ends
in that grant's stable code and every replica still holds exactly the target published before (content digests read
from each replica, compared with the source as it was then).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from dpone_embedded import EmbeddedCluster

from tests.support.airflow.dag_runner import INTERNAL_EXAMPLE_FILE, RunOutcome, load_example, run_example
from tests.support.airflow.embedded_example import add_source_row
from tests.support.cluster.replica_checks import replica_contents, source_content
from tests.support.cluster.restricted_account import held_grants, privileges, restrict, restricted_example, without

REPLICAS = 3
pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=REPLICAS, internal_replication=True)]

SOURCE_ROWS = 30


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder, INTERNAL_EXAMPLE_FILE)


@pytest.fixture
def restricted(
    example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """Every process restarted with exactly the documented grants, the DAG pointed at a fresh demo database."""
    with restricted_example(example, embedded_cluster, fresh_database, monkeypatch, rows=SOURCE_ROWS) as grants:
        yield {"database": fresh_database, "grants": grants}


def _run(example: ModuleType, day: int) -> RunOutcome:
    return run_example(example, logical_date=datetime(2026, 7, day, tzinfo=UTC))


def test_the_documented_grants_suffice_for_an_internal_publication(
    example: ModuleType, embedded_cluster: EmbeddedCluster, restricted: dict[str, Any]
) -> None:
    database = restricted["database"]
    held = held_grants(embedded_cluster)
    assert held == [privileges(restricted["grants"])] * (REPLICAS + 1), "exactly the documented grants"
    first = _run(example, 1)
    assert first.succeeded, first.states
    assert first.xcom["cleanup"]["replication_mode"] == "internal"
    assert replica_contents(embedded_cluster, database) == [source_content(embedded_cluster, database)] * REPLICAS
    add_source_row(embedded_cluster, database, 9001)
    second = _run(example, 2)  # an existing target: EXCHANGE, then the predecessor's drop ON CLUSTER
    assert second.succeeded, second.states
    assert second.xcom["cleanup"]["publication_kind"] == "exchange"
    source = source_content(embedded_cluster, database)
    assert source.rows == SOURCE_ROWS + 1
    assert replica_contents(embedded_cluster, database) == [source] * REPLICAS


@pytest.mark.parametrize(
    ("missing", "code"),
    [
        ("GRANT SYSTEM SYNC REPLICA ON {database}.*", "MEMBER_ACCESS_DENIED"),
        ("GRANT INSERT ON {database}.*", "MEMBER_MUTATION_REJECTED"),
    ],
    ids=["no-sync-replica", "no-insert"],
)
def test_a_missing_grant_ends_in_its_code_with_every_replica_unchanged(
    example: ModuleType,
    embedded_cluster: EmbeddedCluster,
    restricted: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
    missing: str,
    code: str,
) -> None:
    database = restricted["database"]
    first = _run(example, 3)
    assert first.succeeded, first.states
    published = source_content(embedded_cluster, database)
    assert replica_contents(embedded_cluster, database) == [published] * REPLICAS
    add_source_row(embedded_cluster, database, 9002)  # a second run that succeeded would change every replica
    restrict(embedded_cluster, database, without(restricted["grants"], missing, database))
    capfd.readouterr()
    second = _run(example, 4)
    logged = "\n".join(capfd.readouterr())
    assert not second.succeeded and "failed" in second.states.values(), second.states
    assert f"DPONE_CLICKHOUSE_CLUSTER_{code}" in logged, sorted(set(re.findall(r"DPONE_[A-Z_]+", logged)))
    assert replica_contents(embedded_cluster, database) == [published] * REPLICAS, "every replica is unchanged"
