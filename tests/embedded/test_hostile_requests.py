"""The embedded endpoints refuse what a local test cluster must never do for a stranger: answer a web page's
cross-origin request, or read and write files and hosts outside the cluster through SQL."""

from __future__ import annotations

import http.client
from urllib.parse import urlencode

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError
from dpone_embedded import EmbeddedCluster
from dpone_embedded.sqltext import external_access

PASSWORD = "pw-hostile-3c1d"
pytestmark = [pytest.mark.embedded, pytest.mark.embedded_cluster(members=2, password=PASSWORD)]

REFUSED = (
    "SELECT count() FROM file('/etc/hostname', 'LineAsString')",
    "SELECT count() FROM `file`('../../../../etc/hostname', 'LineAsString')",
    "INSERT INTO FUNCTION file('/tmp/dpone_hostile_out.txt', 'LineAsString') SELECT 'x'",
    "SELECT * FROM url('http://127.0.0.1:9/x', 'LineAsString')",
    "SELECT * FROM remote('127.0.0.1:9', system.one)",
    "SELECT * FROM s3('http://127.0.0.1:9/b/k', 'CSV')",
    "CREATE TABLE {db}.f (x String) ENGINE = File(LineAsString, '/etc/hostname')",
    "INSERT INTO {db}.t FROM INFILE '/etc/hostname' FORMAT LineAsString",
    "SELECT 1 INTO OUTFILE '/tmp/dpone_hostile_out.txt'",
)


@pytest.mark.parametrize("statement", REFUSED)
def test_statements_reaching_outside_the_cluster_are_refused(
    embedded_cluster: EmbeddedCluster, fresh_database: str, statement: str
) -> None:
    client = embedded_cluster.client("member1")
    try:
        client.command(f"CREATE TABLE IF NOT EXISTS `{fresh_database}`.t (x String) ENGINE = MergeTree ORDER BY x")
        with pytest.raises(DatabaseError, match="Code: 497"):
            client.command(statement.format(db=f"`{fresh_database}`"))
    finally:
        client.close()


def test_the_words_inside_literals_and_plain_names_are_not_refused(embedded_cluster: EmbeddedCluster) -> None:
    client = embedded_cluster.client()
    try:
        assert client.query("SELECT 'file(/etc/hostname)' AS file, 1 AS url").result_rows == [
            ("file(/etc/hostname)", 1)
        ]
    finally:
        client.close()
    assert external_access("SELECT file FROM t WHERE url = 'remote(x)'") is None


def _post(cluster: EmbeddedCluster, origin: str | None) -> tuple[int, bytes]:
    endpoint = cluster.members[0]
    connection = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=30)
    headers = {"X-ClickHouse-User": "default", "X-ClickHouse-Key": PASSWORD}
    if origin is not None:
        headers["Origin"] = origin
    try:
        connection.request("POST", "/?" + urlencode({"query": "SELECT 42"}), body=b"", headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_a_foreign_origin_is_refused_and_local_clients_are_served(embedded_cluster: EmbeddedCluster) -> None:
    port = embedded_cluster.members[0].port
    assert _post(embedded_cluster, "http://attacker.example") == (403, b"Cross-origin requests are refused.\n")
    assert _post(embedded_cluster, "null")[0] == 403
    assert _post(embedded_cluster, None) == (200, b"42\n")
    assert _post(embedded_cluster, f"http://127.0.0.1:{port}") == (200, b"42\n")
