"""Adapter behaviour only a real engine behind HTTP can show: one-shot mutations under a lost response (with the
stock client as the control), the process guard, extraction bounds and schema checks, adoption, and the clients'
refusal of redirects. Runs on the embedded cluster."""

from __future__ import annotations

import asyncio
import io
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import clickhouse_connect
import pytest
from airflow.sdk import ObjectStoragePath

from airflow_provider_dpone.cluster.clickhouse.artifact_source import FileArtifactSource, QueryArtifactSource
from airflow_provider_dpone.cluster.clickhouse.artifact_store import ObjectStorageArtifactStore
from airflow_provider_dpone.cluster.clickhouse.endpoint import Endpoint
from airflow_provider_dpone.cluster.clickhouse.member_session import ClickHouseMemberSession
from airflow_provider_dpone.cluster.clickhouse.oneshot import MutationGuard, MutationReplayRefusedError
from airflow_provider_dpone.cluster.ports import ColumnSpec, TableRead, TableSpec
from airflow_provider_dpone.core.clickhouse.clients import Purpose, build_async_client, build_client, close_client
from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection
from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
from airflow_provider_dpone.core.errors import ArtifactInvalidError, DponeError
from tests.support.http_servers import redirect_reply, serve

pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2)]

COLUMNS = (("id", "UInt64"), ("name", "String"))
SPEC = TableSpec(columns=tuple(ColumnSpec(name=n, type=t) for n, t in COLUMNS), order_by=("id",))
QUERY = "SELECT number AS id, toString(number) AS name FROM numbers(10000)"


def connection_to(embedded_cluster: Any, target: Any, database: str = "") -> ResolvedConnection:
    endpoint = embedded_cluster.endpoint(target)
    return ResolvedConnection(
        host=endpoint.host, port=endpoint.port, username=embedded_cluster.user, password="", database=database
    )


@pytest.fixture
def store(tmp_path: Path) -> ObjectStorageArtifactStore:
    return ObjectStorageArtifactStore(ObjectStoragePath(f"file://{tmp_path}/artifacts"))


def query_extraction(
    coordinator: Endpoint, store: ObjectStorageArtifactStore, query: str, max_source_bytes: int, **kwargs: Any
) -> QueryArtifactSource:
    """The extraction of ``query`` (:data:`COLUMNS`) from (and digested on) ``coordinator`` into ``store``."""
    return QueryArtifactSource(
        source=coordinator,
        query=query,
        columns=COLUMNS,
        store=store,
        reference=coordinator,
        max_source_bytes=max_source_bytes,
        **kwargs,
    )


def seal_query(
    coordinator: Endpoint, store: ObjectStorageArtifactStore, query: str = QUERY, max_source_bytes: int = 1 << 24
) -> Any:
    """The receipt of ``query`` (:data:`QUERY` by default) extracted from (and digested on) ``coordinator`` into
    ``store``."""
    return query_extraction(coordinator, store, query, max_source_bytes).seal()


def load_once(session: ClickHouseMemberSession, database: str, uuid_value: str, handle: Any) -> None:
    """One load of ``handle`` into ``database.cand`` (holding ``uuid_value``) under a fresh query id."""
    session.load(database, "cand", uuid_value, handle, query_id=f"dpone-load-{uuid.uuid4().hex}", dedup_token="t")


def count_rows(embedded_cluster: Any, target: Any, database: str, table: str) -> int:
    client = embedded_cluster.client(target)
    try:
        return int(client.command(f"SELECT count() FROM `{database}`.`{table}`"))
    finally:
        client.close()


def create(embedded_cluster: Any, target: Any, database: str, table: str) -> None:
    client = embedded_cluster.client(target)
    try:
        client.command(f"CREATE TABLE `{database}`.`{table}` (id UInt64, name String) ENGINE = MergeTree ORDER BY id")
    finally:
        client.close()


def native_bytes(embedded_cluster: Any, query: str = QUERY) -> bytes:
    client = embedded_cluster.client("coordinator")
    try:
        return bytes(client.raw_query(query, fmt="Native"))
    finally:
        client.close()


# --- one-shot mutations ----------------------------------------------------------------------------------------


def test_stock_client_duplicates_an_insert_whose_response_was_lost(embedded_cluster: Any, fresh_database: str) -> None:
    create(embedded_cluster, "member1", fresh_database, "t")
    data = native_bytes(embedded_cluster)
    embedded_cluster.faults.lose_response("member1", match="^INSERT INTO")
    client = embedded_cluster.client("member1")
    try:
        client.raw_insert(f"`{fresh_database}`.`t`", ["id", "name"], data, fmt="Native")  # silently replayed
    finally:
        client.close()
    assert count_rows(embedded_cluster, "member1", fresh_database, "t") == 20_000


def test_mutation_client_sends_an_insert_once_when_its_response_is_lost(
    embedded_cluster: Any, fresh_database: str
) -> None:
    create(embedded_cluster, "member1", fresh_database, "t")
    data = native_bytes(embedded_cluster)
    embedded_cluster.faults.lose_response("member1", match="^INSERT INTO")
    client = build_client(connection_to(embedded_cluster, "member1"), Purpose.MUTATION)
    try:
        with pytest.raises(clickhouse_connect.driver.exceptions.OperationalError):
            client.raw_insert(f"`{fresh_database}`.`t`", ["id", "name"], data, fmt="Native")
    finally:
        close_client(client)
    assert count_rows(embedded_cluster, "member1", fresh_database, "t") == 10_000


def test_the_guard_refuses_a_second_load_with_the_same_query_id(
    embedded_cluster: Any, fresh_database: str, store: ObjectStorageArtifactStore
) -> None:
    coordinator = Endpoint.of(connection_to(embedded_cluster, "coordinator"))
    member = Endpoint.of(connection_to(embedded_cluster, "member1"))
    guard = MutationGuard()
    session = ClickHouseMemberSession(member, "m0000000000000001", guard=guard)
    try:
        receipt = seal_query(coordinator, store)
        value = str(uuid.uuid4())
        session.create_table(fresh_database, "cand", value, SPEC)
        query_id = f"dpone-load-{uuid.uuid4().hex}"
        session.load(fresh_database, "cand", value, store.open(receipt), query_id=query_id, dedup_token="t")
        with pytest.raises(MutationReplayRefusedError):
            session.load(fresh_database, "cand", value, store.open(receipt), query_id=query_id, dedup_token="t")
        assert count_rows(embedded_cluster, "member1", fresh_database, "cand") == 10_000
    finally:
        coordinator.close()
        member.close()


def test_a_load_of_more_than_a_million_rows_lands_in_one_part(
    embedded_cluster: Any, fresh_database: str, store: ObjectStorageArtifactStore
) -> None:
    """The server squashes a load by bytes only: 1.2M narrow rows (many Native blocks, about 12 MB) become one part,
    where the default row threshold (about 1M rows) would cut two, and a second part is what a merge replaces."""
    coordinator = Endpoint.of(connection_to(embedded_cluster, "coordinator"))
    member = Endpoint.of(connection_to(embedded_cluster, "member1"))
    session = ClickHouseMemberSession(member, "m0000000000000001", guard=MutationGuard())
    query = "SELECT number AS id, toString(number % 10) AS name FROM numbers(1200000)"
    try:
        receipt = seal_query(coordinator, store, query, max_source_bytes=1 << 25)
        value = str(uuid.uuid4())
        session.create_table(fresh_database, "cand", value, SPEC)
        load_once(session, fresh_database, value, store.open(receipt))
        client = embedded_cluster.client("member1")
        try:
            parts = client.query(
                "SELECT count(), sum(rows) FROM system.parts WHERE database = {d:String} AND table = 'cand' AND active",
                parameters={"d": fresh_database},
            ).result_rows
        finally:
            client.close()
        assert parts == [(1, 1_200_000)]
    finally:
        coordinator.close()
        member.close()


def test_a_load_whose_artifact_fails_verification_while_streaming_is_invalid_and_never_complete(
    embedded_cluster: Any, fresh_database: str, store: ObjectStorageArtifactStore, tmp_path: Path
) -> None:
    coordinator = Endpoint.of(connection_to(embedded_cluster, "coordinator"))
    member = Endpoint.of(connection_to(embedded_cluster, "member1"))
    try:
        small = ObjectStorageArtifactStore(store.base, chunk_bytes=4096)
        receipt = seal_query(coordinator, small)
        path = tmp_path / "artifacts" / "sha256" / receipt.sha256[:2] / f"{receipt.sha256}.native"
        path.write_bytes(path.read_bytes()[:-1] + b"\x00")  # the same size, other bytes: open checks only the size
        handle = small.open(receipt)
        session = ClickHouseMemberSession(member, "m0000000000000001")
        value = str(uuid.uuid4())
        session.create_table(fresh_database, "cand", value, SPEC)
        with pytest.raises(ArtifactInvalidError):  # verified while streamed: the protocol stops, never rebuilds
            load_once(session, fresh_database, value, handle)
        assert count_rows(embedded_cluster, "member1", fresh_database, "cand") < 10_000
    finally:
        coordinator.close()
        member.close()


# --- extraction and adoption -----------------------------------------------------------------------------------


def test_extraction_stops_at_the_byte_bound_while_streaming(
    embedded_cluster: Any, store: ObjectStorageArtifactStore, tmp_path: Path
) -> None:
    coordinator = Endpoint.of(connection_to(embedded_cluster, "coordinator"))
    try:
        large = "SELECT number AS id, toString(number) AS name FROM numbers(3000000)"  # ~45 MB as Native
        source = query_extraction(coordinator, store, large, 1 << 22)
        with pytest.raises(DponeError) as caught:
            source.seal()
        assert caught.value.code == "DPONE_ARTIFACT_SOURCE_BYTES_EXCEEDED"
        assert [p for p in (tmp_path / "artifacts").rglob("*") if p.is_file()] == []
        assert coordinator.reader().command("SELECT 1") == 1  # the connection pool is still usable
    finally:
        coordinator.close()


@pytest.mark.parametrize(
    "query",
    [
        "SELECT number AS id, toString(number) AS label FROM numbers(10)",  # a name differs
        "SELECT number AS id FROM numbers(10)",  # a declared column is missing
        "SELECT toUInt32(number) AS id, toString(number) AS name FROM numbers(10)",  # a type differs
        "SELECT number AS id, toString(number) AS name, 1 AS extra FROM numbers(10)",  # an unknown column
    ],
)
def test_an_artifact_whose_columns_differ_is_refused(
    embedded_cluster: Any, store: ObjectStorageArtifactStore, query: str
) -> None:
    coordinator = Endpoint.of(connection_to(embedded_cluster, "coordinator"))
    try:
        source = query_extraction(coordinator, store, query, 1 << 20)
        with pytest.raises(DponeError) as caught:
            source.seal()
        assert caught.value.code == "DPONE_ARTIFACT_SCHEMA_MISMATCH"
    finally:
        coordinator.close()


def test_one_byte_changed_in_the_extracted_stream_is_refused_before_a_receipt(
    embedded_cluster: Any, store: ObjectStorageArtifactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The extraction's stream in the worker changes one byte of one value (``"9999"`` -> ``"9989"``, still valid
    Native) before the artifact is hashed and stored: its SHA-256, rows and reference digest all agree with the
    changed bytes, and only the source engine's own digest of the query shows the difference."""
    from airflow_provider_dpone.cluster.clickhouse import artifact_source

    original = artifact_source.copy_bounded
    changed = []

    def corrupting(read: Any, writer: Any, chunk_bytes: int) -> None:
        def read_changed(size: int) -> bytes:
            chunk = read(size)
            if not changed and b"9999" in chunk:
                changed.append(True)
                return chunk.replace(b"9999", b"9989", 1)
            return chunk

        original(read_changed, writer, chunk_bytes)

    monkeypatch.setattr(artifact_source, "copy_bounded", corrupting)
    coordinator = Endpoint.of(connection_to(embedded_cluster, "coordinator"))
    try:
        with pytest.raises(DponeError) as caught:
            seal_query(coordinator, store)
        assert changed == [True]
        assert caught.value.code == "DPONE_ARTIFACT_SOURCE_DIGEST_MISMATCH"
        monkeypatch.setattr(artifact_source, "copy_bounded", original)
        assert seal_query(coordinator, store).row_count == 10_000  # the untouched stream seals
    finally:
        coordinator.close()


def test_adoption_of_a_native_file_seals_the_same_receipt_as_extraction(
    embedded_cluster: Any, store: ObjectStorageArtifactStore
) -> None:
    coordinator = Endpoint.of(connection_to(embedded_cluster, "coordinator"))
    try:
        extracted = seal_query(coordinator, store)
        data = native_bytes(embedded_cluster)
        adopted = FileArtifactSource(
            opener=lambda: io.BytesIO(data),
            columns=COLUMNS,
            store=store,
            reference=coordinator,
            max_source_bytes=1 << 24,
        ).seal()
        assert adopted == extracted
        assert (adopted.row_count, adopted.byte_size) == (10_000, len(data))
    finally:
        coordinator.close()


# --- clients ---------------------------------------------------------------------------------------------------


def test_sync_clients_refuse_a_redirect_that_the_stock_client_follows(embedded_cluster: Any) -> None:
    coordinator = embedded_cluster.coordinator
    with serve(reply=redirect_reply(coordinator.port)) as proxy:
        stock = clickhouse_connect.get_client(host="127.0.0.1", port=proxy.port, username=embedded_cluster.user)
        assert stock.command("SELECT 1") == 1
        stock.close()
        for purpose in Purpose.READ, Purpose.MUTATION:
            redirected = ResolvedConnection(
                host="127.0.0.1", port=proxy.port, username=embedded_cluster.user, password=""
            )
            with pytest.raises(clickhouse_connect.driver.exceptions.DatabaseError):
                build_client(redirected, purpose)


def test_async_client_reads_and_refuses_a_redirect(embedded_cluster: Any) -> None:
    async def scenario(port: int) -> int:
        client = await build_async_client(connection_to(embedded_cluster, "coordinator").at("127.0.0.1", port))
        try:
            return int(await client.command("SELECT 7"))
        finally:
            await client.close()

    assert asyncio.run(scenario(embedded_cluster.coordinator.port)) == 7
    with (
        serve(reply=redirect_reply(embedded_cluster.coordinator.port)) as proxy,
        pytest.raises(clickhouse_connect.driver.exceptions.DatabaseError),
    ):
        asyncio.run(scenario(proxy.port))


def test_a_member_without_the_target_database_answers_that_it_has_none(embedded_cluster: Any) -> None:
    from airflow_provider_dpone.cluster.clickhouse.adapter_set import MemberEndpoints
    from airflow_provider_dpone.cluster.clickhouse.catalog import ClickHouseCatalog
    from airflow_provider_dpone.cluster.protocol.runtime_admission import admit_inventory

    database = f"only_one_{uuid.uuid4().hex[:8]}"
    client = embedded_cluster.client("member1")
    try:
        client.command(f"CREATE DATABASE `{database}` ENGINE = Atomic")
    finally:
        client.close()
    raw = embedded_cluster.connection_json()
    coordinator_connection = ResolvedConnection(
        host=raw["host"],
        port=raw["port"],
        username=raw["login"],
        password="",
        database="",
        options=ClickHouseConnectionOptions.model_validate(raw["extra"]),
    )
    coordinator = Endpoint.of(coordinator_connection)
    members = MemberEndpoints.derived_from(replace(coordinator_connection, database=database))
    try:
        catalog = ClickHouseCatalog(coordinator, members)
        inventory = admit_inventory(
            catalog.inventory(embedded_cluster.cluster_name), cluster=embedded_cluster.cluster_name, mode="external"
        )
        name = embedded_cluster.cluster_name
        engines = [catalog.admission_facts(member, name, database, "t").database_engine for member in inventory.members]
        assert sorted(engines, key=str) == ["Atomic", None]
    finally:
        members.close()
        coordinator.close()


# --- authority -------------------------------------------------------------------------------------------------


def test_concurrent_compare_and_set_at_one_version_admits_exactly_one_writer(
    embedded_cluster: Any, fresh_database: str
) -> None:
    import threading

    from airflow_provider_dpone.cluster.clickhouse.authority_store import ClickHouseAuthorityStore
    from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_COLUMNS, AUTHORITY_TABLE, AuthorityRow
    from airflow_provider_dpone.core.errors import AuthorityConflictError

    client = embedded_cluster.client("coordinator")
    try:
        columns = ", ".join(f"`{n}` {t}" for n, t in AUTHORITY_COLUMNS)
        client.command(
            f"CREATE TABLE `{fresh_database}`.`{AUTHORITY_TABLE}` ({columns})"
            f" ENGINE = KeeperMap('/dpone/race/{uuid.uuid4().hex}') PRIMARY KEY target_key"
        )
    finally:
        client.close()

    def row(payload: str) -> AuthorityRow:
        return AuthorityRow(
            target_key="k" * 64,
            operation_id="op",
            fence_token="f",
            phase="LOCKED",
            dispatch_epoch=0,
            payload=payload,
            payload_sha256="a" * 64,
        )

    endpoints = [Endpoint.of(connection_to(embedded_cluster, "coordinator")) for _ in range(4)]
    stores = [ClickHouseAuthorityStore(endpoint, fresh_database, guard=MutationGuard()) for endpoint in endpoints]
    stores[0].create(row("v0"))
    start = threading.Barrier(len(stores))
    outcomes: dict[int, str] = {}

    def write(index: int) -> None:
        start.wait()
        try:
            stores[index].compare_and_set(row(f"writer {index}"), 0)
            outcomes[index] = "applied"
        except AuthorityConflictError:
            outcomes[index] = "conflict"

    threads = [threading.Thread(target=write, args=(index,)) for index in range(len(stores))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        winners = [index for index, outcome in outcomes.items() if outcome == "applied"]
        assert len(outcomes) == len(stores) and len(winners) == 1
        stored = stores[0].read("k" * 64)
        assert stored is not None and stored.version == 1 and stored.row == row(f"writer {winners[0]}")
    finally:
        for endpoint in endpoints:
            endpoint.close()


def test_clients_of_one_adapter_set_connect_once_per_server(embedded_cluster: Any) -> None:
    """The second client of a server replays the first one's connect exchange: no request, the same server facts,
    and it works; another server, or another adapter set, connects itself."""
    from airflow_provider_dpone.core.clickhouse import clients

    sent: list[str] = []
    original = clients.PinnedPoolManager.urlopen

    def urlopen(self: Any, method: str, url: str, redirect: bool = True, **kw: Any) -> Any:
        sent.append(url)
        return original(self, method, url, redirect, **kw)

    member1, member2 = (connection_to(embedded_cluster, name) for name in ("member1", "member2"))
    shared = clients.Handshakes()
    opened = []
    clients.PinnedPoolManager.urlopen = urlopen  # type: ignore[method-assign]
    try:
        counts = []
        for connection, purpose, handshakes in (
            (member1, Purpose.READ, shared),
            (member1, Purpose.MUTATION, shared),
            (member2, Purpose.READ, shared),
            (member1, Purpose.READ, clients.Handshakes()),
        ):
            before = len(sent)
            opened.append(build_client(connection, purpose, handshakes=handshakes))
            counts.append(len(sent) - before)
        assert counts[1] == 0 and counts[0] == counts[2] == counts[3] >= 1
        first, replayed = opened[0], opened[1]
        facts = ("server_version", "server_tz", "protocol_version", "server_settings", "params")
        assert [getattr(replayed, name) for name in facts] == [getattr(first, name) for name in facts]
        assert [int(client.command("SELECT 41 + 1")) for client in opened] == [42] * 4
    finally:
        clients.PinnedPoolManager.urlopen = original  # type: ignore[method-assign]
        for client in opened:
            close_client(client)


def test_an_observation_with_parts_of_a_mergetree_table_reads_no_count(
    embedded_cluster: Any, fresh_database: str, store: ObjectStorageArtifactStore
) -> None:
    """A MergeTree table's rows are its active parts' rows: its observation with parts (and no content) is one
    request, no count read. Without active parts it says 0 rows and the empty artifact's content digest; with parts,
    what ``count()`` says. A lightweight delete replaces the parts it masks rows in, so a part set recorded with a
    count never matches the table after it."""
    member = Endpoint.of(connection_to(embedded_cluster, "member1"))
    session = ClickHouseMemberSession(member, "m0000000000000001", guard=MutationGuard())
    coordinator = Endpoint.of(connection_to(embedded_cluster, "coordinator"))
    statements: list[str] = []
    reader = member.reader()
    query = reader.query

    def counted(statement: str, *args: Any, **kwargs: Any) -> Any:
        statements.append(statement)
        return query(statement, *args, **kwargs)

    reader.query = counted
    try:
        value = str(uuid.uuid4())
        session.create_table(fresh_database, "cand", value, SPEC)
        empty = session.observe_table(TableRead(fresh_database, "cand", with_content=False, with_parts=True))
        assert (empty.exists, empty.uuid, empty.engine, empty.row_count) == (True, value, "MergeTree", 0)
        assert empty.columns == COLUMNS and empty.parts_digest is not None and len(statements) == 1
        # the parts are read with the content
        digested = session.observe_table(TableRead(fresh_database, "cand", with_content=True))
        assert (digested.row_count, digested.parts_digest) == (0, empty.parts_digest) and len(statements) == 2
        nothing = seal_query(coordinator, store, f"{QUERY} LIMIT 0")
        assert digested.content_digest == nothing.content_digest
        receipt = seal_query(coordinator, store)
        load_once(session, fresh_database, value, store.open(receipt))
        statements.clear()
        loaded = session.observe_table(TableRead(fresh_database, "cand", with_content=False, with_parts=True))
        assert loaded.row_count == count_rows(embedded_cluster, "member1", fresh_database, "cand") == 10_000
        assert loaded.parts_digest != empty.parts_digest and len(statements) == 1
        client = embedded_cluster.client("member1")
        try:
            client.command(f"DELETE FROM `{fresh_database}`.`cand` WHERE id < 10", settings={"mutations_sync": 2})
        finally:
            client.close()
        masked = session.observe_table(TableRead(fresh_database, "cand", with_content=False, with_parts=True))
        assert masked.uuid == value and masked.parts_digest != loaded.parts_digest
        assert count_rows(embedded_cluster, "member1", fresh_database, "cand") == 9_990
    finally:
        reader.query = query
        coordinator.close()
        member.close()


# --- verification budget ---------------------------------------------------------------------------------------


def test_the_server_stops_a_content_digest_at_the_verification_budget(
    embedded_cluster: Any, fresh_database: str
) -> None:
    """The real digest SQL over 40M rows runs longer than a 1 s budget: the server stops it (TIMEOUT_EXCEEDED) and the
    read is the budget's coded failure; the same read under the default budget answers the digest."""
    from airflow_provider_dpone.core.errors import VerificationBudgetExceededError

    create(embedded_cluster, "member1", fresh_database, "cand")
    client = embedded_cluster.client("member1")
    try:
        client.command(
            f"INSERT INTO `{fresh_database}`.`cand` SELECT number, toString(number) FROM numbers(40000000)",
            settings={"max_execution_time": 0},
        )
    finally:
        client.close()
    member = Endpoint.of(connection_to(embedded_cluster, "member1"))
    try:
        tight = ClickHouseMemberSession(member, "m0000000000000001", verification_seconds=1)
        with pytest.raises(VerificationBudgetExceededError, match="VERIFICATION_BUDGET_EXCEEDED"):
            tight.observe_table(TableRead(fresh_database, "cand", with_content=True))
        observed = ClickHouseMemberSession(member, "m0000000000000001").observe_table(
            TableRead(fresh_database, "cand", with_content=True)
        )
        assert observed.row_count == 40_000_000 and observed.content_digest is not None
    finally:
        member.close()
