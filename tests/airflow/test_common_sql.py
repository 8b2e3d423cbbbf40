"""common-sql on a ``dpone_clickhouse`` connection: ``SQLExecuteQueryOperator`` runs SQL on the embedded cluster.

The operator resolves the hook from the connection type (passing the connection's extra as keyword arguments, the
walkthrough's ``TypeError``), requires a ``DbApiHook``, and fetches the rows through the hook's DB-API connection.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from dpone_embedded.cluster import EmbeddedCluster

from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def conn_id(monkeypatch: pytest.MonkeyPatch, embedded_cluster: EmbeddedCluster, fresh_database: str) -> str:
    monkeypatch.setenv("AIRFLOW_CONN_SQL_CH", json.dumps(embedded_cluster.connection_json(database=fresh_database)))
    client = embedded_cluster.client(database=fresh_database)
    try:
        client.command("CREATE TABLE t (id UInt64, name String) ENGINE = MergeTree ORDER BY id")
        client.command("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    finally:
        client.close()
    return "sql_ch"


def test_sql_execute_query_operator_runs_a_select(conn_id: str, fresh_database: str) -> None:
    operator = SQLExecuteQueryOperator(
        task_id="q",
        conn_id=conn_id,
        sql="SELECT id, name FROM t WHERE id >= %(low)s ORDER BY id",
        parameters={"low": 2},
    )
    assert isinstance(operator.get_db_hook(), DponeClickHouseHook)
    assert [tuple(row) for row in operator.execute(context={})] == [(2, "b"), (3, "c")]
    other_db = SQLExecuteQueryOperator(task_id="d", conn_id=conn_id, sql="SELECT currentDatabase()", database="system")
    assert [tuple(row) for row in other_db.execute(context={})] == [("system",)]


def test_the_hook_answers_common_sql_reads_and_runs_statements(conn_id: str) -> None:
    hook = DponeClickHouseHook(dpone_clickhouse_conn_id=conn_id)
    assert hook.get_first("SELECT count() FROM t") == (3,)
    hook.run("INSERT INTO t VALUES (4, 'd')")
    assert [tuple(row) for row in hook.get_records("SELECT id FROM t ORDER BY id")] == [(1,), (2,), (3,), (4,)]


def test_the_documented_example_runs_as_written(
    monkeypatch: pytest.MonkeyPatch, embedded_cluster: EmbeddedCluster
) -> None:
    """docs/connections.md's common-sql block, unedited, on the embedded cluster and its default connection."""
    guide = (REPO / "docs" / "connections.md").read_text(encoding="utf-8")
    section = guide.split("## Ad-hoc SQL with common-sql", 1)[1]
    (block,) = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.DOTALL)
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(embedded_cluster.connection_json()))
    namespace: dict[str, Any] = {}
    exec(compile(block, "docs/connections.md", "exec"), namespace)
    (operator,) = [value for value in namespace.values() if isinstance(value, SQLExecuteQueryOperator)]
    assert [tuple(row) for row in operator.execute(context={})] == [(len(embedded_cluster.members),)]
