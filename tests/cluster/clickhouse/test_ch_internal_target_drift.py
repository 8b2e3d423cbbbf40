"""Internal mode on the real engines: a write into the replicated live target between stage and publish stops the
publication with ``TARGET_DRIFT`` before any permit, the write kept (seed 000 E6).

The embedded cluster runs with ``internal_replication=true``: the target and the candidate are ``ReplicatedMergeTree``
tables whose rows the cluster replicates between the member engines. The external route's cases, with a paused DDL
worker and every write kind, are in ``test_ch_publication.py``; this module holds the internal route to the same
verdict. Outcomes are read from the engines and the authority row, never from the service.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_dpone.cluster.clickhouse.adapter_set import PublicationAdapters
from airflow_provider_dpone.cluster.ports import DeclaredTable
from airflow_provider_dpone.cluster.protocol.results import Committed, Completed
from airflow_provider_dpone.cluster.protocol.service import publication_service
from tests.cluster.clickhouse.test_ch_publication import (
    COLUMNS,
    adapters,
    digest_on,
    drift_stops_publish_twice,
    run_on,
    source_query,
)

__all__ = ["adapters"]  # the fixture, shared with the external route's module

pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2, internal_replication=True)]


WRITE = "INSERT INTO `{db}`.`target_table` SELECT * FROM `{db}`.`target_table` LIMIT 1"


def request(cluster: str, database: str, run_id: str) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "database": database,
        "target": "target_table",
        "dag_id": "it_dag",
        "run_id": run_id,
        "normalized_plan_digest": "5" * 64,
        "replication_mode": "internal",
        "table": DeclaredTable(order_by=("id",), engine="ReplicatedMergeTree"),
        "max_source_bytes": 1 << 26,
    }


def staged(
    adapters: PublicationAdapters, cluster: Any, database: str, run_id: str, rows: int, salt: int
) -> tuple[Any, Any]:
    from airflow_provider_dpone.cluster.protocol.request import PublicationRequest

    parsed = PublicationRequest.parse(request(cluster.cluster_name, database, run_id))
    service = publication_service(adapters.ports, parsed)
    service.fence()
    stage = service.stage(
        adapters.query_source(query=source_query(rows, salt), columns=COLUMNS, max_source_bytes=1 << 26)
    )
    assert stage.phase == "STAGED"
    return parsed, service


def test_a_replicated_live_target_written_between_stage_and_publish_stops_the_publication_with_the_write_kept(
    adapters: PublicationAdapters, embedded_cluster: Any, fresh_database: str
) -> None:
    """One replica's live target receives an INSERT (the cluster replicates it) after the stage observed every
    baseline: the barrier stops with TARGET_DRIFT before the publication permit, a retry stops again, and the
    replicated target, with the write, stays the target on every replica. (An ALTER of a replicated table is not
    emulated by the embedded cluster, Code 48: the ALTER cases run on the fakes and on the external route.)"""
    _first, service = staged(adapters, embedded_cluster, fresh_database, "run-1", 2_000, 1)
    assert isinstance(service.publish(), Committed)
    assert isinstance(service.cleanup(), Completed)
    parsed, service = staged(adapters, embedded_cluster, fresh_database, "run-2", 3_000, 3)
    written = embedded_cluster.members[-1]
    before = digest_on(embedded_cluster, written, fresh_database, "target_table")
    run_on(embedded_cluster, written, WRITE.format(db=fresh_database))
    after = digest_on(embedded_cluster, written, fresh_database, "target_table")
    assert after != before
    record = drift_stops_publish_twice(adapters, parsed, service)
    assert digest_on(embedded_cluster, written, fresh_database, "target_table") == after  # the write kept
    targets = {member.target_uuid for member in record.members}
    for member in embedded_cluster.members:  # every replica's target is still the baseline table
        client = embedded_cluster.client(member)
        try:
            held = client.query(
                f"SELECT toString(uuid) FROM system.tables WHERE database = '{fresh_database}'"
                " AND name = 'target_table'"
            ).result_rows
        finally:
            client.close()
        assert held and held[0][0] in targets, held
