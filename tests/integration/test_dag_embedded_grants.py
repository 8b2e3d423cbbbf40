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

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from dpone_embedded import EmbeddedCluster

from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_COLUMNS, AUTHORITY_TABLE
from tests.integration.dag_runner import RunOutcome, configure, export_connection, load_example, run_example
from tests.integration.documented_grants import documented_grants
from tests.integration.embedded_example import embedded_manifest, member_rows

pytestmark = pytest.mark.embedded_cluster(members=2)

MARKER = "-- dpone: publication grants"
SOURCE_ROWS = 30


def publication_grants(database: str) -> list[str]:
    return documented_grants("limitations.md", MARKER, database=database)


def recreate_authority(cluster: EmbeddedCluster, database: str) -> None:
    """The KeeperMap authority table again on every process, by the restricted account (its Keeper state died with
    the restart)."""
    columns = ", ".join(f"`{name}` {type_}" for name, type_ in AUTHORITY_COLUMNS)
    for endpoint in cluster.endpoints:
        client = cluster.client(endpoint)
        try:
            client.command(f"DROP TABLE IF EXISTS `{database}`.`{AUTHORITY_TABLE}` SYNC")
            client.command(
                f"CREATE TABLE `{database}`.`{AUTHORITY_TABLE}` ({columns}) "
                f"ENGINE = KeeperMap('/dpone/authority/{database}') PRIMARY KEY target_key"
            )
        finally:
            client.close()


def privileges(grants: list[str]) -> set[tuple[str, str]]:
    """``(privilege, object)`` pairs of ``GRANT a, b ON object`` lines (``SHOW GRANTS`` merges lines per object)."""
    pairs = set()
    for grant in grants:
        matched = re.fullmatch(r"GRANT (.+) ON (\S+)(?: TO default)?", grant)
        assert matched is not None, grant
        pairs |= {(name.strip(), matched.group(2)) for name in matched.group(1).split(",")}
    return pairs


def held_grants(cluster: EmbeddedCluster) -> list[set[tuple[str, str]]]:
    held = []
    for endpoint in cluster.endpoints:
        client = cluster.client(endpoint)
        try:
            held.append(privileges([str(line) for (line,) in client.query("SHOW GRANTS").result_rows]))
        finally:
            client.close()
    return held


def restrict(cluster: EmbeddedCluster, database: str, grants: list[str]) -> None:
    cluster.restrict_account(grants)
    recreate_authority(cluster, database)


@pytest.fixture(scope="module")
def example(dags_folder: Path) -> ModuleType:
    return load_example(dags_folder)


@pytest.fixture
def restricted(
    example: ModuleType, embedded_cluster: EmbeddedCluster, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """The demo objects created by the full account, then every process restarted with the documented grants."""
    export_connection(monkeypatch, embedded_cluster)
    content = embedded_manifest(example, embedded_cluster, fresh_database, rows=SOURCE_ROWS)
    configure(example, None, manifest=content, poll_interval=0.2, retries=0)
    grants = publication_grants(fresh_database)
    restrict(embedded_cluster, fresh_database, grants)
    try:
        yield {"database": fresh_database, "grants": grants}
    finally:
        configure(example, None)
        embedded_cluster.restrict_account(None)  # the fixture drops the database with the full account


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
    grants = [grant for grant in restricted["grants"] if grant != missing.format(database=database)]
    assert len(grants) == len(restricted["grants"]) - 1
    restrict(embedded_cluster, database, grants)
    capfd.readouterr()
    second = _run(example, 4)
    logged = "\n".join(capfd.readouterr())
    assert not second.succeeded and "failed" in second.states.values(), second.states
    assert f"DPONE_CLICKHOUSE_CLUSTER_{code}" in logged, "the refusal carries its stable code"
    assert member_rows(embedded_cluster, database) == [(SOURCE_ROWS, SOURCE_ROWS)] * 2, "the old target is intact"
