"""A restricted engine account (``EmbeddedCluster.restrict_account``): the engine holds and enforces exactly the grants.

chdb authenticates every connection as ``default`` (``programs/local/ChdbClient.cpp``) and builds its users from the
``users_xml`` config only (``EmbeddedServer::setupUsers``), so the account's grants are ``<grants><query>`` entries
that ClickHouse's ``UsersConfigAccessStorage`` parses; the checks are the engine's (``ContextAccess``, Code 497).
"""

from __future__ import annotations

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError
from dpone_embedded import EmbeddedCluster

pytestmark = pytest.mark.embedded


def test_a_restricted_account_holds_exactly_its_grants_and_the_engine_enforces_them(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    table = f"`{fresh_database}`.t"
    setup = embedded_cluster.client("member1")
    setup.command(f"CREATE TABLE {table} (a UInt64) ENGINE = MergeTree ORDER BY a")
    setup.command(f"INSERT INTO {table} VALUES (1), (2)")
    setup.close()
    embedded_cluster.restrict_account([f"GRANT SELECT ON {fresh_database}.t"], targets=["member1"])
    try:
        client = embedded_cluster.client("member1")
        assert client.query("SHOW GRANTS").result_rows == [(f"GRANT SELECT ON {fresh_database}.t TO default",)]
        assert int(client.command(f"SELECT count() FROM {table}")) == 2, "a granted read"
        for statement in (f"INSERT INTO {table} VALUES (3)", f"DROP TABLE {table} SYNC", "CREATE DATABASE nope"):
            with pytest.raises(DatabaseError) as refused:
                client.command(statement)
            assert refused.value.code == 497 and "Not enough privileges" in str(refused.value)
        assert int(client.command(f"SELECT count() FROM {table}")) == 2, "nothing refused took effect"
        other = embedded_cluster.client("member2")
        full = " ".join(str(row[0]) for row in other.query("SHOW GRANTS").result_rows)
        assert "CREATE USER" in full, "only the named process is restricted"
    finally:
        embedded_cluster.restrict_account(None, targets=["member1"])
    restored = embedded_cluster.client("member1")
    restored.command(f"INSERT INTO {table} VALUES (3)")
    assert int(restored.command(f"SELECT count() FROM {table}")) == 3, "the full account again"


def test_sync_replica_of_a_replicated_table_needs_its_grant_as_on_a_server(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    """``InterpreterSystemQuery::syncReplica`` checks ``SYSTEM SYNC REPLICA`` on the table first: the double's wait
    runs only after the engine's own check of the statement passed."""
    table = f"`{fresh_database}`.r"
    statement = f"SYSTEM SYNC REPLICA {table}"
    setup = embedded_cluster.client("member1")
    setup.command(
        f"CREATE TABLE {table} (a UInt64) ENGINE = ReplicatedMergeTree('/grants/{fresh_database}/r', 'r1') ORDER BY a"
    )
    setup.command(f"INSERT INTO {table} VALUES (1)")
    setup.close()
    try:
        embedded_cluster.restrict_account([f"GRANT SELECT ON {fresh_database}.r"], targets=["member1"])
        with pytest.raises(DatabaseError) as refused:
            embedded_cluster.client("member1").command(statement)
        assert refused.value.code == 497 and "SYSTEM SYNC REPLICA" in str(refused.value)
        grants = [f"GRANT SELECT ON {fresh_database}.r", f"GRANT SYSTEM SYNC REPLICA ON {fresh_database}.r"]
        embedded_cluster.restrict_account(grants, targets=["member1"])
        client = embedded_cluster.client("member1")
        client.command(statement, settings={"receive_timeout": 10})
        assert int(client.command(f"SELECT count() FROM {table}")) == 1
    finally:
        embedded_cluster.restrict_account(None, targets=["member1"])
