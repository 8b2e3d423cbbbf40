"""clickhouse-connect's sync client against the embedded HTTP endpoint: the server behaviour the product relies on."""

from __future__ import annotations

import datetime as dt
import io
import re
import time
import urllib.parse
import uuid
from decimal import Decimal

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError
from dpone_embedded import EmbeddedCluster

from tests.support.embedded import session_checks

pytestmark = pytest.mark.embedded

ROWS = [
    (1, "one", Decimal("1.5000"), dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC)),
    (2, "two", None, dt.datetime(2024, 6, 7, 8, 9, 10, 0, tzinfo=dt.UTC)),
]
COLUMNS = ["id", "name", "amount", "ts"]
DDL = "(id UInt64, name String, amount Nullable(Decimal(18,4)), ts DateTime64(3,'UTC')) ENGINE = MergeTree ORDER BY id"


def _table(client, database: str, name: str = "t") -> str:
    client.command(f"CREATE TABLE `{database}`.`{name}` {DDL}")
    return f"`{database}`.`{name}`"


def test_ping_version_and_engine(embedded_cluster: EmbeddedCluster) -> None:
    client = embedded_cluster.client("member1")
    assert client.ping()
    version, timezone, display = client.query("SELECT version(), timezone(), displayName()").result_rows[0]
    assert version.startswith("26.")
    assert timezone == client.server_tz.key if hasattr(client.server_tz, "key") else timezone
    assert display == "member1"


def test_query_insert_round_trip_with_typed_values(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    client = embedded_cluster.client("member1")
    table = _table(client, fresh_database)
    summary = client.insert(table, ROWS, column_names=COLUMNS)
    assert summary.written_rows == 2
    result = client.query(f"SELECT id, name, amount, ts FROM {table} ORDER BY id")
    assert [row[:3] for row in result.result_rows] == [(1, "one", Decimal("1.5000")), (2, "two", None)]
    assert result.result_rows[0][3].replace(tzinfo=dt.UTC) == dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC)


def test_raw_insert_of_native_bytes_and_raw_stream(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    source = embedded_cluster.client("coordinator")
    native = source.raw_query(
        "SELECT number AS id, toString(number) AS name, if(number % 3 = 0, NULL, toDecimal64(number, 4)) AS amount,"
        " toDateTime64(number, 3, 'UTC') AS ts FROM numbers(50000)",
        fmt="Native",
    )
    client = embedded_cluster.client("member2")
    table = _table(client, fresh_database)
    summary = client.raw_insert(table, COLUMNS, native, fmt="Native")
    assert summary.written_rows == 50000
    stream = client.raw_stream(f"SELECT * FROM {table} ORDER BY id", fmt="Native")
    streamed = b"".join(iter(lambda: stream.read(1 << 16), b""))
    copy = _table(client, fresh_database, "copy")
    client.raw_insert(copy, COLUMNS, streamed, fmt="Native")
    digest = "SELECT count(), countIf(amount IS NULL), sum(cityHash64(tuple(*))) FROM {}"
    assert client.command(digest.format(table)) == client.command(digest.format(copy))
    assert client.command(digest.format(table))[:2] == ["50000", "16667"]


def test_raw_insert_from_a_stream_and_compressed_bodies(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    client = embedded_cluster.client("member1", compress="lz4")
    table = _table(client, fresh_database)
    tsv = "".join(f"{i}\tname{i}\t\\N\t2024-01-01 00:00:00.000\n" for i in range(1000)).encode()
    client.raw_insert(table, COLUMNS, io.BytesIO(tsv), fmt="TabSeparated")
    codecs = ("lz4", "zstd", "gzip")  # what clickhouse-connect can send; each body holds several frames
    for number, codec in enumerate(codecs):
        other = embedded_cluster.client("member1", compress=codec)
        rows = [(10_000 + i, codec * 50, None, ROWS[0][3]) for i in range(20_000)]
        other.insert(table, rows, column_names=COLUMNS)
        expected = 1000 + 20_000 * (number + 1)
        assert other.query(f"SELECT count() FROM {table}").result_rows == [(expected,)]
        # and the response came back compressed with the client's coding where ClickHouse would choose it
        assert other.query(f"SELECT name FROM {table} WHERE name = '{codec * 50}' LIMIT 1").result_rows


def test_settings_query_id_and_summary_round_trip(embedded_cluster: EmbeddedCluster) -> None:
    client = embedded_cluster.client("coordinator")
    query_id = f"q-{uuid.uuid4()}"
    result = client.query(
        "SELECT getSetting('max_threads'), getSetting('log_comment')",
        settings={"max_threads": 1, "log_comment": "dpone-check", "query_id": query_id},
    )
    assert result.result_rows == [(1, "dpone-check")]
    assert result.query_id == query_id
    assert result.summary["query_id"] == query_id
    # settings of one request do not leak into the next
    assert client.query("SELECT getSetting('log_comment')").result_rows == [("",)]


def test_a_session_keeps_its_own_set_across_requests_that_override_it(embedded_cluster: EmbeddedCluster) -> None:
    """On real servers too: ``test_real_cluster.py``."""
    client = embedded_cluster.client("coordinator", session_id=f"s-{uuid.uuid4()}")
    session_checks.check_request_settings_bind_only_the_request(client)


def test_server_side_parameters(embedded_cluster: EmbeddedCluster) -> None:
    client = embedded_cluster.client("member2")
    result = client.query("SELECT {a:UInt32} + 1, {s:String}", parameters={"a": 41, "s": "it's\ttab"})
    assert result.result_rows == [(42, "it's\ttab")]


def test_server_errors_keep_their_code(embedded_cluster: EmbeddedCluster) -> None:
    client = embedded_cluster.client("member1")
    with pytest.raises(DatabaseError) as unknown_table:
        client.query("SELECT * FROM no_such_db.no_such_table")
    assert unknown_table.value.code == 81 or unknown_table.value.code == 60
    with pytest.raises(DatabaseError) as syntax:
        client.command("SELEC 1")
    assert syntax.value.code == 62
    assert "SYNTAX_ERROR" in str(syntax.value)
    with pytest.raises(DatabaseError) as setting:
        client.query("SELECT 1", settings={"no_such_setting_xyz": 1})
    assert setting.value.code == 115


def test_get_is_readonly_like_a_server(embedded_cluster: EmbeddedCluster, fresh_database: str) -> None:
    client = embedded_cluster.client("member1")
    endpoint = embedded_cluster.endpoint("member1")
    import urllib.error
    import urllib.parse
    import urllib.request

    query = urllib.parse.urlencode({"query": f"CREATE TABLE `{fresh_database}`.g (a UInt8) ENGINE = Memory"})
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(f"http://{endpoint.address}/?{query}")
    assert error.value.headers["X-ClickHouse-Exception-Code"] == "164"
    assert client.command(f"EXISTS TABLE `{fresh_database}`.g") == 0


def test_sessions_keep_state_and_refuse_concurrency(embedded_cluster: EmbeddedCluster) -> None:
    session = f"s-{uuid.uuid4()}"
    client = embedded_cluster.client("coordinator", session_id=session)
    client.command("SET max_threads = 3")
    client.command("CREATE TEMPORARY TABLE tmp (a UInt8)")
    client.command("INSERT INTO tmp VALUES (7)")
    assert client.query("SELECT getSetting('max_threads'), (SELECT a FROM tmp)").result_rows == [(3, 7)]
    other = embedded_cluster.client("coordinator")
    assert other.query("SELECT getSetting('max_threads')").result_rows != [(3,)]


def test_unknown_sessions_and_long_timeouts_are_refused_with_the_servers_text(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """The texts compiled into ClickHouse 26.9: a checked session that does not exist (372) and a session timeout
    above max_session_timeout (374, default 3600)."""
    import urllib.error
    import urllib.request

    endpoint = embedded_cluster.endpoint("coordinator")

    def refused(**params: object) -> tuple[str, str]:
        query = urllib.parse.urlencode({"query": "SELECT 1", **params})
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(f"http://{endpoint.address}/?{query}")
        return error.value.headers["X-ClickHouse-Exception-Code"], error.value.read().decode()

    missing = f"gone-{uuid.uuid4()}"
    code, text = refused(session_id=missing, session_check=1)
    assert code == "372" and f"Session {missing} not found" in text
    code, text = refused(session_id=f"long-{uuid.uuid4()}", session_timeout=3601)
    assert code == "374"
    assert (
        "Session timeout '3601' is larger than max_session_timeout: 3600. "
        "Maximum session timeout could be modified in configuration file. (" in text
    )


def test_formats_arrow_parquet_json(embedded_cluster: EmbeddedCluster) -> None:
    client = embedded_cluster.client("member1")
    table = client.query_arrow("SELECT number AS n, toString(number) AS s FROM numbers(5)")
    assert table.column("n").to_pylist() == [0, 1, 2, 3, 4]
    parquet = client.raw_query("SELECT number AS n FROM numbers(3)", fmt="Parquet")
    assert parquet[:4] == b"PAR1"
    json_rows = client.raw_query("SELECT 1 AS a FORMAT JSONEachRow")
    assert json_rows == b'{"a":1}\n'


def test_authentication_is_checked(embedded_cluster: EmbeddedCluster) -> None:
    endpoint = embedded_cluster.coordinator
    import clickhouse_connect

    with pytest.raises((DatabaseError, OperationalError)) as error:
        clickhouse_connect.get_client(host=endpoint.host, port=endpoint.port, username="intruder", password="x")
    assert getattr(error.value, "code", None) == 516


def test_form_encoded_parameters(embedded_cluster: EmbeddedCluster) -> None:
    client = embedded_cluster.client("member1", form_encode_query_params=True)
    assert client.query("SELECT {a:String} || '!'", parameters={"a": "form"}).result_rows == [("form!",)]


def test_running_query_id_and_busy_session_are_refused(embedded_cluster: EmbeddedCluster) -> None:
    import threading

    embedded_cluster.faults.delay_response("coordinator", 1.0, match="slow-one")
    session = f"busy-{uuid.uuid4()}"
    first = embedded_cluster.client("coordinator", session_id=session)
    thread = threading.Thread(target=lambda: first.query("SELECT 'slow-one'", settings={"query_id": "fixed-id"}))
    thread.start()
    try:
        time.sleep(0.3)
        same_id = embedded_cluster.client("coordinator")
        with pytest.raises(DatabaseError) as running:
            same_id.query("SELECT 1", settings={"query_id": "fixed-id"})
        assert running.value.code == 216
        same_session = embedded_cluster.client("coordinator", session_id=session)
        with pytest.raises(DatabaseError) as locked:
            same_session.query("SELECT 1")
        assert locked.value.code == 373
        assert f"Session {session} is locked by a concurrent client. (SESSION_IS_LOCKED)" in str(locked.value)
    finally:
        thread.join()


@pytest.mark.parametrize("coding", ["zstd", "lz4", "gzip", "deflate"])
def test_response_compression_follows_accept_encoding(embedded_cluster: EmbeddedCluster, coding: str) -> None:
    import urllib3
    from dpone_embedded.httpwire import _Decoder

    endpoint = embedded_cluster.endpoint("member2")
    response = urllib3.request(
        "POST",
        f"http://{endpoint.address}/?enable_http_compression=1",
        body=b"SELECT repeat('x', 100000) FORMAT RawBLOB",
        headers={"Accept-Encoding": coding},
        decode_content=False,
    )
    assert response.status == 200
    assert response.headers["Content-Encoding"] == coding
    assert len(response.data) < 10_000
    assert _Decoder(coding).decompress(response.data) == b"x" * 100_000


def test_streamed_bodies_and_failed_inserts_keep_the_connection(
    embedded_cluster: EmbeddedCluster, fresh_database: str
) -> None:
    client = embedded_cluster.client("member1", compress=False)
    table = _table(client, fresh_database)
    native = embedded_cluster.client("coordinator").raw_query(
        "SELECT number AS id, repeat('n', number % 50) AS name, NULL AS amount, toDateTime64(number, 3, 'UTC') AS ts"
        " FROM numbers(300000)",
        fmt="Native",
    )
    pieces = (native[i : i + 777_777] for i in range(0, len(native), 777_777))  # chunked framing, odd sizes
    assert client.raw_insert(table, COLUMNS, pieces, fmt="Native").written_rows == 300_000
    with pytest.raises(DatabaseError) as broken:  # the engine stops reading half-way: the rest is drained
        client.raw_insert(table, COLUMNS, (native[:1000], b"\xff" * 3_000_000), fmt="Native")
    assert broken.value.code != 0
    with pytest.raises(DatabaseError):
        client.raw_insert(table, COLUMNS, native[:5000] + b"\xff" * 2_000_000, fmt="Native")
    assert client.command(f"SELECT count(), uniqExact(id) FROM {table}") == ["300000", "300000"]


FAILS_MID_STREAM = "SELECT number, throwIf(number = 60000) FROM numbers(100000)"
"""Fails after its first blocks left: the error comes inside a body whose status (200) is already sent."""


def test_an_error_in_the_middle_of_a_stream_is_the_tagged_exception_block(embedded_cluster: EmbeddedCluster) -> None:
    """WriteBufferFromHTTP1ServerResponse::cancelWithException (ClickHouse 25.11+): every response names a tag in
    X-ClickHouse-Exception-Tag; a failure after the headers writes __exception__, the tag, the message, its length and
    the tag, __exception__, and no last chunk."""
    import socket

    endpoint = embedded_cluster.endpoint("member1")
    host, port = endpoint.address.rsplit(":", 1)
    query = urllib.parse.urlencode({"max_block_size": 1000, "enable_http_compression": 0})
    body = FAILS_MID_STREAM.encode()
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(f"POST /?{query} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        received = b""
        while chunk := sock.recv(65536):  # the server closes the connection after the block
            received += chunk
    head, _, rest = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
    tag = headers["X-ClickHouse-Exception-Tag"]
    assert len(tag) == 16 and tag.isalpha() and tag.islower()
    assert headers["Transfer-Encoding"] == "chunked"
    assert not rest.endswith(b"0\r\n\r\n")  # no last chunk: the body is cut short on purpose
    found = re.search(
        rb"\r\n__exception__\r\n"
        + tag.encode()
        + rb"\r\n(Code: 395\..*?\n)(\d+) "
        + tag.encode()
        + rb"\r\n__exception__\r\n",
        rest,
        re.DOTALL,
    )
    assert found is not None, rest[-400:]
    assert int(found.group(2)) == len(found.group(1))
    assert b"FUNCTION_THROW_IF_VALUE_IS_NON_ZERO" in found.group(1)


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "compressed"])
def test_clickhouse_connect_raises_the_server_error_of_a_failed_stream(
    embedded_cluster: EmbeddedCluster, compress: bool
) -> None:
    """clickhouse-connect 1.12 scans a response for the block of its X-ClickHouse-Exception-Tag and raises the
    server's message (driver/buffer.py ResponseBuffer._check_for_exception)."""
    client = embedded_cluster.client("member1", compress=compress)
    with pytest.raises(Exception) as failed:
        len(client.query(FAILS_MID_STREAM, settings={"max_block_size": 1000}).result_rows)
    assert "Code: 395" in str(failed.value), repr(failed.value)
