"""The authority store's writes on the real KeeperMap engine: what each write sends on the wire, and that the engine
runs it with the server-side Keeper retries off.

The proof has three parts: the setting exists on the engine with a non-zero default (so leaving it out would leave
retries on), every mutation the store sends carries it in its statement text (captured at the HTTP layer, below the
client), and the engine evaluates that clause, in exactly the statement shapes the store sends, as the setting of the
query whose KeeperMap sink does the Keeper multi-request (``getSetting`` read back from the row it wrote).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from airflow_provider_dpone.cluster.clickhouse import sql_authority
from airflow_provider_dpone.cluster.clickhouse.authority_store import ClickHouseAuthorityStore
from airflow_provider_dpone.cluster.clickhouse.endpoint import Endpoint
from airflow_provider_dpone.cluster.clickhouse.literals import settings_clause
from airflow_provider_dpone.cluster.clickhouse.oneshot import MutationGuard
from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_COLUMNS, AUTHORITY_TABLE
from airflow_provider_dpone.core.clickhouse import clients
from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection
from airflow_provider_dpone.core.identifiers import qualified_clickhouse
from tests.cluster.clickhouse.test_failure_mapping import KEY
from tests.cluster.clickhouse.test_failure_mapping import authority_row as row

pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2)]

NO_RESEND = "insert_keeper_max_retries = 0"


def admin(embedded_cluster: Any, statement: str) -> Any:
    client = embedded_cluster.client("coordinator")
    try:
        return client.query(statement).result_rows
    finally:
        client.close()


@pytest.fixture
def authority_table(embedded_cluster: Any, fresh_database: str) -> str:
    columns = ", ".join(f"`{name}` {kind}" for name, kind in AUTHORITY_COLUMNS)
    admin(
        embedded_cluster,
        f"CREATE TABLE {qualified_clickhouse(fresh_database, AUTHORITY_TABLE)} ({columns})"
        f" ENGINE = KeeperMap('/dpone/authority/{uuid.uuid4().hex}') PRIMARY KEY target_key",
    )
    return fresh_database


@pytest.fixture
def wire() -> Iterator[list[str]]:
    """Every statement text that leaves the process over HTTP (URL ``query`` parameter plus body)."""
    sent: list[str] = []
    original = clients.PinnedPoolManager.urlopen

    def urlopen(self: Any, method: str, url: str, redirect: bool = True, **kw: Any) -> Any:
        query = dict(parse_qsl(urlsplit(url).query)).get("query", "")
        body = kw.get("body") or b""
        sent.append(query + (body.decode(errors="replace") if isinstance(body, bytes) else str(body)))
        return original(self, method, url, redirect, **kw)

    clients.PinnedPoolManager.urlopen = urlopen  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        clients.PinnedPoolManager.urlopen = original  # type: ignore[method-assign]


def test_the_engine_retries_keeper_writes_unless_told_not_to(embedded_cluster: Any) -> None:
    [(default, kind)] = admin(
        embedded_cluster, "SELECT default, type FROM system.settings WHERE name = 'insert_keeper_max_retries'"
    )
    assert kind == "UInt64" and int(default) > 0  # ClickHouse 26.x: 20 resends of a KeeperMap multi-request
    assert admin(embedded_cluster, "SELECT count() FROM system.settings WHERE name = 'keeper_map_strict_mode'") == [
        (1,)
    ]


def test_every_authority_write_sends_the_no_resend_setting_and_applies(
    embedded_cluster: Any, authority_table: str, wire: list[str]
) -> None:
    endpoint = Endpoint.of(
        ResolvedConnection(
            host=embedded_cluster.endpoint("coordinator").host,
            port=embedded_cluster.endpoint("coordinator").port,
            username=embedded_cluster.user,
            password="",
            database="",
        )
    )
    store = ClickHouseAuthorityStore(endpoint, authority_table, guard=MutationGuard())
    try:
        store.create(row("v0"))
        store.compare_and_set(row("v1"), 0)
        store.compare_and_set(row("v2"), 1)
        stored = store.read(KEY)
    finally:
        endpoint.close()
    assert stored is not None and stored.version == 2 and stored.row == row("v2")
    writes = [text for text in wire if AUTHORITY_TABLE in text and not text.lstrip().upper().startswith("SELECT")]
    assert len(writes) == 3
    assert all(NO_RESEND in text and "keeper_map_strict_mode = 1" in text for text in writes)


def test_the_engine_runs_both_write_shapes_with_the_setting_in_force(
    embedded_cluster: Any, fresh_database: str
) -> None:
    """The clause sits where ``sql_authority`` puts it (INSERT: before ``VALUES``; UPDATE: after ``WHERE``) and the
    engine applies it to the query that writes Keeper: the written values are that query's own setting."""
    table = qualified_clickhouse(fresh_database, "probe")
    admin(
        embedded_cluster,
        f"CREATE TABLE {table} (k String, v String) ENGINE = KeeperMap('/dpone/probe/{uuid.uuid4().hex}') PRIMARY KEY k",
    )
    clause = settings_clause(sql_authority.WRITE)
    seen = "toString(getSetting('insert_keeper_max_retries'))"
    admin(embedded_cluster, f"INSERT INTO {table} (k, v){clause} VALUES ('a', {seen})")
    assert admin(embedded_cluster, f"SELECT v, _version FROM {table}") == [("0", 0)]
    admin(embedded_cluster, f"ALTER TABLE {table} UPDATE v = 'x' || {seen} WHERE k = 'a' AND _version = 0{clause}")
    assert admin(embedded_cluster, f"SELECT v, _version FROM {table}") == [("x0", 1)]
    admin(embedded_cluster, f"ALTER TABLE {table} UPDATE v = {seen} WHERE k = 'a' AND _version = 1")
    assert admin(embedded_cluster, f"SELECT v FROM {table}") != [("0",)]  # control: without it, the default
