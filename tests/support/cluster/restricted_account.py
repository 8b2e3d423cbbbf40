"""The embedded cluster with every process's account holding exactly the documented publication grants (a helper
module of the least-privilege tests, seed 003, SE4).

``restrict`` restarts every process with those grants and recreates the KeeperMap authority table by the restricted
account itself (its Keeper state died with the restart; ``CREATE TABLE``/``DROP TABLE`` on the database are among
the grants); ``held_grants`` reads what each process's account holds (``SHOW GRANTS``), for comparison with the list.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from types import ModuleType

import pytest
from dpone_embedded import EmbeddedCluster

from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_COLUMNS, AUTHORITY_TABLE
from tests.support.airflow.dag_runner import configure, export_connection
from tests.support.airflow.embedded_example import embedded_manifest
from tests.support.cluster.documented_grants import documented_grants

MARKER = "-- dpone: publication grants"


def publication_grants(database: str) -> list[str]:
    """The publication route's GRANT block of ``docs/limitations.md`` (both replication modes)."""
    return documented_grants("limitations.md", MARKER, database=database)


def recreate_authority(cluster: EmbeddedCluster, database: str) -> None:
    """The KeeperMap authority table again on every process, by the restricted account."""
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
    """What each process's account holds, coordinator first."""
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


def without(grants: list[str], missing: str, database: str) -> list[str]:
    """``grants`` less the one line ``missing`` (formatted with ``database``), which must be among them."""
    kept = [grant for grant in grants if grant != missing.format(database=database)]
    assert len(kept) == len(grants) - 1, f"{missing} is one of the documented grants"
    return kept


@contextlib.contextmanager
def restricted_example(
    example: ModuleType, cluster: EmbeddedCluster, database: str, monkeypatch: pytest.MonkeyPatch, *, rows: int
) -> Iterator[list[str]]:
    """The example's demo objects created by the full account, the DAG pointed at them (no retries), then every
    process restarted with the documented grants (yielded); afterwards the full account again (the database fixture
    drops the database with it)."""
    export_connection(monkeypatch, cluster)
    content = embedded_manifest(example, cluster, database, rows=rows)
    configure(example, None, manifest=content, poll_interval=0.2, retries=0)
    grants = publication_grants(database)
    restrict(cluster, database, grants)
    try:
        yield grants
    finally:
        configure(example, None)
        cluster.restrict_account(None)
