"""Least privilege of the publication route: the example DAG with accounts holding exactly the documented grants
(seed 003, SE4), on the embedded cluster.

The grants come from the block in ``docs/limitations.md`` (the one list users read). Every process of the cluster is
restarted with its engine's account holding exactly those grants; the engine enforces them on every statement (chdb
has one account per engine, so the coordinator and the members hold the same list, as the docs prescribe one user).
A restart loses the process's KeeperMap state, so the authority table is recreated by the restricted account itself
(``CREATE TABLE``/``DROP TABLE`` on the database are among the grants). With one grant taken away, the run ends in a
stable code and the target published before is intact on every member.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from dpone_embedded import EmbeddedCluster

from tests.support.airflow.dag_runner import RunOutcome, load_example, run_example
from tests.support.airflow.embedded_example import member_rows
from tests.support.cluster.restricted_account import held_grants, privileges, restrict, restricted_example, without

pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2)]

SOURCE_ROWS = 30


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder)


@pytest.fixture
def restricted(
    example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """Every process restarted with exactly the documented grants, the DAG pointed at a fresh demo database."""
    with restricted_example(example, embedded_cluster, fresh_database, monkeypatch, rows=SOURCE_ROWS) as grants:
        yield {"database": fresh_database, "grants": grants}


def _run(example: ModuleType, day: int) -> RunOutcome:
    return run_example(example, logical_date=datetime(2026, 6, day, tzinfo=UTC))


def test_the_documented_grants_suffice_for_a_publication(
    example: ModuleType, embedded_cluster: EmbeddedCluster, restricted: dict[str, Any]
) -> None:
    assert held_grants(embedded_cluster) == [privileges(restricted["grants"])] * 3, "exactly the documented grants"
    first = _run(example, 1)
    assert first.succeeded, first.states
    assert member_rows(embedded_cluster, restricted["database"]) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2
    second = _run(example, 2)  # an existing target: the exchange, and the predecessor's drop ON CLUSTER
    assert second.succeeded, second.states
    assert second.xcom["cleanup"]["publication_kind"] == "exchange"
    assert member_rows(embedded_cluster, restricted["database"]) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2


@pytest.mark.parametrize(
    ("missing", "code"),
    [
        ("GRANT ALTER UPDATE ON {database}.__dpone_cluster_publication_authority", "AUTHORITY_WRITE_REFUSED"),
        ("GRANT INSERT ON {database}.*", "MEMBER_MUTATION_REJECTED"),  # the fence's EXCHANGE probe needs INSERT
    ],
    ids=["no-authority-update", "no-insert"],
)
def test_a_missing_grant_ends_in_its_code_with_the_old_target_intact(
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
    assert member_rows(embedded_cluster, database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2
    restrict(embedded_cluster, database, without(restricted["grants"], missing, database))
    capfd.readouterr()
    second = _run(example, 4)
    logged = "\n".join(capfd.readouterr())
    assert not second.succeeded and "failed" in second.states.values(), second.states
    assert f"DPONE_CLICKHOUSE_CLUSTER_{code}" in logged, "the refusal carries its stable code"
    assert member_rows(embedded_cluster, database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2, "the old target is intact"
