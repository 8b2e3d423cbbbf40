"""The external publication service on the real adapters, built by the hook from an Airflow connection, on the
embedded cluster: absent target (RENAME), then a second generation over the existing target (EXCHANGE + cleanup),
then a same-operation retry after a lost load response. Outcomes are read from the engines, never from the service.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.cluster.clickhouse.adapter_set import PublicationAdapters
from airflow_provider_dpone.cluster.ports import ColumnSpec, TableSpec
from airflow_provider_dpone.cluster.protocol.results import Committed, Completed
from airflow_provider_dpone.cluster.protocol.service import publication_service
from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_COLUMNS, AUTHORITY_TABLE
from airflow_provider_dpone.core.clickhouse.clients import Purpose, build_client, close_client
from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

pytestmark = pytest.mark.embedded_cluster(members=2)

COLUMNS = (("id", "UInt64"), ("name", "String"), ("amount", "Nullable(Decimal(18, 4))"), ("at", "DateTime64(3, 'UTC')"))
SPEC = TableSpec(columns=tuple(ColumnSpec(name=n, type=t) for n, t in COLUMNS), order_by=("id",))


def source_query(rows: int, salt: int) -> str:
    return (
        f"SELECT number AS id, toString(number * {salt}) AS name,"
        " if(number % 5 = 0, NULL, toDecimal64(number, 4) / 7) AS amount,"
        " toDateTime64('2026-01-01 00:00:00', 3, 'UTC') + number AS at"
        f" FROM numbers({rows})"
    )


@pytest.fixture
def adapters(
    embedded_cluster: Any, fresh_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[PublicationAdapters]:
    columns = ", ".join(f"`{n}` {t}" for n, t in AUTHORITY_COLUMNS)
    path = f"/dpone/it/{uuid.uuid4().hex}"
    for endpoint in embedded_cluster.endpoints:
        client = embedded_cluster.client(endpoint)
        try:
            client.command(
                f"CREATE TABLE `{fresh_database}`.`{AUTHORITY_TABLE}` ({columns})"
                f" ENGINE = KeeperMap('{path}') PRIMARY KEY target_key"
            )
        finally:
            client.close()
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_IT", embedded_cluster.connection_uri(fresh_database))
    hook = DponeClickHouseHook("dpone_it")
    built = hook.publication_adapters(
        database=fresh_database, artifact_base=f"file://{tmp_path}/artifacts", ddl_task_timeout_seconds=10
    )
    try:
        yield built
    finally:
        built.close()


def request(database: str, run_id: str) -> dict[str, Any]:
    return {
        "cluster": "dpone_cluster",
        "database": database,
        "target": "target_table",
        "dag_id": "it_dag",
        "run_id": run_id,
        "normalized_plan_digest": "5" * 64,
        "replication_mode": "external",
        "table": SPEC,
        "max_source_bytes": 1 << 26,
    }


def member_tables(embedded_cluster: Any, database: str) -> dict[str, dict[str, tuple[str, int]]]:
    """name -> (uuid, rows) per member, read directly from each engine."""
    seen = {}
    for member in embedded_cluster.members:
        client = embedded_cluster.client(member)
        try:
            rows = client.query(
                f"SELECT name, toString(uuid), total_rows FROM system.tables WHERE database = '{database}'"
                " AND engine = 'MergeTree'"
            ).result_rows
        finally:
            client.close()
        seen[member.name] = {name: (table_uuid, int(total or 0)) for name, table_uuid, total in rows}
    return seen


def digest_on(embedded_cluster: Any, member: Any, database: str, table: str) -> tuple[int, int]:
    client = embedded_cluster.client(member)
    try:
        count, total = client.query(
            f"SELECT count(), sum(reinterpretAsUInt128(sipHash128(tuple(*)))) FROM `{database}`.`{table}`"
        ).result_rows[0]
    finally:
        client.close()
    return int(count), int(total)


def publish(adapters: PublicationAdapters, database: str, run_id: str, rows: int, salt: int) -> Completed:
    from airflow_provider_dpone.cluster.protocol.request import PublicationRequest

    service = publication_service(adapters.ports, PublicationRequest.parse(request(database, run_id)))
    service.fence()
    stage = service.stage(
        adapters.query_source(query=source_query(rows, salt), columns=COLUMNS, max_source_bytes=1 << 26)
    )
    assert stage.phase == "STAGED" and stage.ready_members == 2
    assert isinstance(service.publish(), Committed)
    done = service.cleanup()
    assert isinstance(done, Completed)
    assert isinstance(service.cleanup(), Completed)  # idempotent: answers again without mutating
    return done


def test_absent_target_then_exchange_then_cleanup_on_real_engines(
    adapters: PublicationAdapters, embedded_cluster: Any, fresh_database: str
) -> None:
    reference = build_client(adapters_connection(embedded_cluster, fresh_database), Purpose.READ)
    try:
        expected_first = reference.query(
            f"SELECT count(), sum(reinterpretAsUInt128(sipHash128(tuple(*)))) FROM ({source_query(20_000, 1)})"
        ).result_rows[0]
        expected_second = reference.query(
            f"SELECT count(), sum(reinterpretAsUInt128(sipHash128(tuple(*)))) FROM ({source_query(30_000, 3)})"
        ).result_rows[0]
    finally:
        close_client(reference)

    publish(adapters, fresh_database, "run-1", 20_000, 1)
    first = member_tables(embedded_cluster, fresh_database)
    assert all(set(names) == {"target_table"} for names in first.values())  # the candidate was renamed
    for member in embedded_cluster.members:
        assert digest_on(embedded_cluster, member, fresh_database, "target_table") == tuple(map(int, expected_first))

    publish(adapters, fresh_database, "run-2", 30_000, 3)
    second = member_tables(embedded_cluster, fresh_database)
    for member in embedded_cluster.members:
        assert set(second[member.name]) == {"target_table"}  # predecessor dropped, no candidate left
        assert second[member.name]["target_table"][0] != first[member.name]["target_table"][0]
        assert digest_on(embedded_cluster, member, fresh_database, "target_table") == tuple(map(int, expected_second))


def optimize_final(embedded_cluster: Any, database: str, table: str) -> None:
    """``OPTIMIZE TABLE ... FINAL`` on every member: the table's parts are replaced by a merged one (new names)."""
    listing = f"SELECT name FROM system.parts WHERE database = '{database}' AND table = '{table}' AND active"
    for member in embedded_cluster.members:
        client = embedded_cluster.client(member)
        try:
            before = set(client.query(listing).result_rows)
            client.command(f"OPTIMIZE TABLE `{database}`.`{table}` FINAL")
            assert set(client.query(listing).result_rows).isdisjoint(before)
        finally:
            client.close()


@pytest.mark.parametrize("facts", ["recorded", "stripped"])
def test_forced_merges_before_the_barrier_and_of_the_old_target_publish_exactly(
    adapters: PublicationAdapters, embedded_cluster: Any, fresh_database: str, facts: str
) -> None:
    """A merge between a member's verification and the barrier changes the candidate's parts: the barrier reads the
    changed parts again and still publishes (their sum is exactly the verified digest). A merge of the published
    target before the next operation: the successor's baseline reads it again. ``stripped``: the record is rewritten
    without part facts, as an older writer left it, and the barrier reads every part, as before."""
    from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
    from airflow_provider_dpone.cluster.values.authority.codec import decode, encode

    publish(adapters, fresh_database, "run-1", 20_000, 1)
    optimize_final(embedded_cluster, fresh_database, "target_table")
    parsed = PublicationRequest.parse(request(fresh_database, "run-2"))
    service = publication_service(adapters.ports, parsed)
    service.fence()
    stage = service.stage(
        adapters.query_source(query=source_query(30_000, 3), columns=COLUMNS, max_source_bytes=1 << 26)
    )
    assert stage.phase == "STAGED"
    stored = adapters.ports.authority.read(parsed.target_key)
    assert stored is not None
    record = decode(stored.row)
    assert all(member.part_digests for member in record.members)
    if facts == "stripped":
        members = tuple(member.model_copy(update={"part_digests": None}) for member in record.members)
        adapters.ports.authority.compare_and_set(encode(record.evolve(members=members)), stored.version)
    optimize_final(embedded_cluster, fresh_database, parsed.candidate_name)
    assert isinstance(service.publish(), Committed)
    assert isinstance(service.cleanup(), Completed)
    reference = build_client(adapters_connection(embedded_cluster, fresh_database), Purpose.READ)
    try:
        expected = reference.query(
            f"SELECT count(), sum(reinterpretAsUInt128(sipHash128(tuple(*)))) FROM ({source_query(30_000, 3)})"
        ).result_rows[0]
    finally:
        close_client(reference)
    for member in embedded_cluster.members:
        assert digest_on(embedded_cluster, member, fresh_database, "target_table") == tuple(map(int, expected))


def adapters_connection(embedded_cluster: Any, database: str) -> Any:
    from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection

    coordinator = embedded_cluster.coordinator
    return ResolvedConnection(
        host=coordinator.host, port=coordinator.port, username=embedded_cluster.user, password="", database=database
    )


def test_a_lost_load_response_is_resolved_by_observation_without_duplicate_rows(
    adapters: PublicationAdapters, embedded_cluster: Any, fresh_database: str
) -> None:
    from airflow_provider_dpone.cluster.protocol.request import PublicationRequest

    embedded_cluster.faults.lose_response("member2", match="^INSERT INTO")
    service = publication_service(adapters.ports, PublicationRequest.parse(request(fresh_database, "run-loss")))
    service.fence()
    stage = service.stage(
        adapters.query_source(query=source_query(5_000, 2), columns=COLUMNS, max_source_bytes=1 << 26)
    )
    assert stage.phase == "STAGED"
    assert embedded_cluster.faults.armed() == []  # the response of member2's load was lost
    assert isinstance(service.publish(), Committed)
    assert isinstance(service.cleanup(), Completed)
    for member in embedded_cluster.members:
        count, _ = digest_on(embedded_cluster, member, fresh_database, "target_table")
        assert count == 5_000
