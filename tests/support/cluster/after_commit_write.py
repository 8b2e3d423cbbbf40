"""A write into one member's published target between the publication's check and its COMMITTED write, on real
engines under real Airflow: the scenario both replication modes' DAG tests run (``test_dag_embedded*.py``).

The write is injected at the authority port: the real adapter's CAS that writes COMMITTED first runs one real
``INSERT`` into the member's target (a row it already holds, once more), then sends the CAS. Everything is read back
from the engines and the authority row, never from the service.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from types import ModuleType
from typing import Any

from dpone_embedded import EmbeddedCluster

from airflow_provider_dpone.cluster.values.authority.row import AuthorityRow
from airflow_provider_dpone.cluster.values.identities import member_id
from airflow_provider_dpone.core.manifest import ClusterPublicationManifest as Manifest
from airflow_provider_dpone.hooks.clickhouse import hook_environment
from airflow_provider_dpone.hooks.publication import PublicationEnvironment
from tests.support.airflow.dag_runner import configure, run_example
from tests.support.cluster.replica_checks import authority_record, queue_entries

CHANGED = "DPONE_CLICKHOUSE_CLUSTER_PUBLISHED_CHANGED_AFTER_COMMIT"
ALERT = "dpone.alert.cluster.published_changed_after_commit"


@dataclasses.dataclass
class WriteBeforeCommitted:
    """Arms one INSERT into ``member``'s target before the next COMMITTED CAS (``written`` counts them)."""

    cluster: EmbeddedCluster
    database: str
    member: str
    written: int = 0

    def write(self) -> None:
        client = self.cluster.client(self.member)
        try:
            table = f"`{self.database}`.`target_table`"
            client.command(f"INSERT INTO {table} SELECT * FROM {table} LIMIT 1")
        finally:
            client.close()
        self.written += 1

    def environment(
        self, manifest: Manifest, conn_id: str, *, ddl_task_timeout_seconds: int | None = None
    ) -> PublicationEnvironment:
        environment = hook_environment(manifest, conn_id, ddl_task_timeout_seconds=ddl_task_timeout_seconds)
        authority = environment.ports.authority
        arm = self

        class Writing:
            """The real authority adapter; its COMMITTED CAS preceded (once) by the write."""

            def __getattr__(self, name: str) -> Any:
                return getattr(authority, name)

            def compare_and_set(self, row: AuthorityRow, expected_version: int) -> None:
                if row.phase == "COMMITTED" and arm.written == 0:
                    arm.write()
                authority.compare_and_set(row, expected_version)

        ports = dataclasses.replace(environment.ports, authority=Writing())
        return dataclasses.replace(environment, ports=ports)


def run_with_a_write_before_committed(
    example: ModuleType,
    cluster: EmbeddedCluster,
    database: str,
    manifest: Any,
    logical_date: datetime,
    alert_metrics: list[str],
    output: Callable[[], str],
) -> None:
    """Run the example with the write armed; assert the look after COMMITTED and its coded failure, a retry that only
    looks again, then the runbook's acceptance (publish marked successful, cleanup COMPLETED). ``output`` returns what
    the runs logged since the last call."""
    member = cluster.members[0].name
    arm = WriteBeforeCommitted(cluster, database, member)
    configure(example, arm.environment, manifest=manifest, poll_interval=0.2)
    output()
    failed = run_example(example, logical_date=logical_date)
    assert arm.written == 1
    assert failed.states["publish"] == "failed" and failed.tries["publish"] == 1, failed.states  # terminal
    logged = output()
    assert f"dpone publish: {CHANGED}: " in logged and "(terminal: no retry)" in logged, "the coded failure"
    assert "looked again after COMMITTED: CHANGED" in logged
    assert failed.states["cleanup"] == "upstream_failed", failed.states
    record = authority_record(cluster, database)
    assert record is not None and record.phase.value == "COMMITTED"  # the publication stands
    receipt = failed.xcom["publish"]
    look = receipt["after_commit"]
    assert receipt["phase"] == "COMMITTED" and look["matched"] is False
    looks = {entry["member_id"]: entry for entry in look["members"]}
    written = _member_id(cluster, member, record)
    assert not looks[written]["matched"] and looks[written]["same_table"] and looks[written]["schema_matched"]
    assert looks[written]["row_count"] == receipt["row_count"] + 1 == _rows_on(cluster, database, member)
    assert looks[written]["content_digest"] != receipt["content_digest"]
    changed = sorted(member_id for member_id, entry in looks.items() if not entry["matched"])
    assert alert_metrics == [ALERT] * len(changed)
    exchanges = _publication_entries(cluster, database)

    again = run_example(example, logical_date=logical_date)  # a clear of the run: the same operation
    assert again.states["publish"] == "failed" and again.xcom["publish"]["after_commit"]["matched"] is False
    assert f"dpone publish: {CHANGED}: " in output()
    assert arm.written == 1 and _publication_entries(cluster, database) == exchanges  # never published again
    assert authority_record(cluster, database).phase.value == "COMMITTED"  # type: ignore[union-attr]

    accepted = run_example(example, logical_date=logical_date, mark_success=("publish",))  # the runbook's "accept"
    assert accepted.states["cleanup"] == "success", accepted.states
    assert authority_record(cluster, database).phase.value == "COMPLETED"  # type: ignore[union-attr]
    assert _rows_on(cluster, database, member) == receipt["row_count"] + 1, "accepted as it is"


def _rows_on(cluster: EmbeddedCluster, database: str, member: str) -> int:
    client = cluster.client(member)
    try:
        return int(client.command(f"SELECT count() FROM `{database}`.`target_table`"))
    finally:
        client.close()


def _member_id(cluster: EmbeddedCluster, name: str, record: Any) -> str:
    process = next(member for member in cluster.members if member.name == name)
    found = member_id(process.shard_num, process.replica_num)
    assert found in record.member_ids()
    return found


def _publication_entries(cluster: EmbeddedCluster, database: str) -> int:
    return queue_entries(cluster, database, "EXCHANGE TABLES") + queue_entries(cluster, database, "RENAME TABLE")
