"""A server error in the middle of an extraction stream, through the product's own extraction adapters, on the
embedded cluster and, opt-in, on the compose cluster's real servers.

The server fails after its first blocks have left, as a real server does: the status (200) and the first blocks are
already sent, so the error can only end the body. ClickHouse 25.11+ writes its tagged ``__exception__`` block and
closes the connection without the last chunk (``WriteBufferFromHTTP1ServerResponse::cancelWithException``); the
double does the same (``tests/embedded/test_http_contract.py``). Two ways make a real server fail there:

* the cluster route's extraction: a source query whose later rows raise (``throwIf`` on a row far past the first
  blocks, ``max_block_size`` small);
* the transfer route's snapshot SELECT over a table: ``max_result_rows`` under the read profile's
  ``result_overflow_mode = 'throw'`` (Code 396 once the limit is crossed, after the first blocks).

The product's outcome is a coded failure with its next action, and nothing a retry would trust: no sealed artifact,
no temporary object left in the store, no block handed on after the break. The in-memory fakes do not speak HTTP,
so this case runs on the two HTTP backends only.
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
from airflow_provider_dpone.core.errors import DponeError, lookup
from airflow_provider_dpone.transfer.route.read_profile import frozen_settings
from airflow_provider_dpone.transfer.route.schema_admission import map_type
from airflow_provider_dpone.transfer.source.session import ClickHouseSnapshotConnector, http_connector
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from airflow_provider_dpone.transfer.values.query import SnapshotQuery
from airflow_provider_dpone.transfer.values.raw_snapshot import SettingRecord
from tests.support.cluster.port_backends import BACKENDS, PortBackend, open_backend
from tests.support.fixtures import real_cluster

pytestmark = [pytest.mark.contract, pytest.mark.embedded_cluster(members=2)]

HTTP_BACKENDS = tuple(kind for kind in BACKENDS if kind != "fake")
"""``embedded`` and ``real`` (with its ``real_cluster`` marker): the backends whose extraction crosses HTTP."""

ROWS = 400_000
FAILING_ROW = 300_000
BLOCK_ROWS = 1_000
COLUMNS = (("id", "UInt64"), ("h", "UInt64"))
FAILS_MID_STREAM = (
    f"SELECT number AS id, sipHash64(number) + throwIf(number = {FAILING_ROW}, 'mid-stream') AS h FROM numbers({ROWS})"
)
"""Raises on row 300,000: with 1,000-row blocks of hashes (poorly compressible), megabytes have left by then."""
SUCCEEDS = f"SELECT number AS id, sipHash64(number) AS h FROM numbers({ROWS})"


@pytest.fixture(params=HTTP_BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PortBackend]:
    instance = open_backend(request.param, request, tmp_path)
    try:
        yield instance
    finally:
        instance.close()


def stored_files(backend: Any) -> list[Path]:
    """Every file in the backend's artifact store: sealed objects and temporary ones alike."""
    base = Path(str(backend.adapters.store.base).removeprefix("file://"))
    return sorted(path for path in base.rglob("*") if path.is_file()) if base.exists() else []


def assert_coded_with_advice(error: DponeError, code: str) -> None:
    assert error.code == code
    assert error.retryable and lookup(code).action
    assert f"Next: {lookup(code).action}" in str(error)


def test_a_server_error_mid_extraction_seals_no_artifact_and_leaves_nothing_in_the_store(
    backend: PortBackend,
) -> None:
    adapters = cast(Any, backend).adapters
    before = stored_files(backend)
    source = adapters.query_source(
        query=FAILS_MID_STREAM, columns=COLUMNS, max_source_bytes=1 << 30, settings={"max_block_size": BLOCK_ROWS}
    )
    with pytest.raises(DponeError) as failed:
        source.seal()
    assert_coded_with_advice(failed.value, "DPONE_ARTIFACT_EXTRACTION_FAILED")
    assert stored_files(backend) == before, "a broken extraction left an object in the store"

    # the same query without the failing row seals, from the same store: the failure was the stream's, not the setup's
    receipt = adapters.query_source(
        query=SUCCEEDS, columns=COLUMNS, max_source_bytes=1 << 30, settings={"max_block_size": BLOCK_ROWS}
    ).seal()
    assert receipt.row_count == ROWS
    assert [path for path in stored_files(backend) if path not in before] == [
        Path(str(adapters.store.object_path(receipt.sha256)).removeprefix("file://"))
    ]


@dataclass
class SourceBackend:
    connector: ClickHouseSnapshotConnector
    relation: RelationRef
    admin: Any


def _source_backend(kind: str, request: pytest.FixtureRequest) -> Iterator[SourceBackend]:
    if kind == "real":
        compose = real_cluster.compose_cluster()
        member = compose.coordinator
        host, port, user, password = member.host, member.port, compose.user, compose.password
        admin = compose.client(member)
        database = f"stream_{uuid.uuid4().hex[:12]}"
        admin.command(f"CREATE DATABASE IF NOT EXISTS `{database}` ENGINE = Atomic")
    else:
        cluster = request.getfixturevalue("embedded_cluster")
        database = request.getfixturevalue("fresh_database")
        endpoint = cluster.endpoint("member1")
        host, port_text = endpoint.address.rsplit(":", 1)
        port = int(port_text)
        raw = cluster.connection_json(database)
        user, password = raw["login"], raw["password"]
        admin = cluster.client("member1")
    try:
        admin.command(
            f"CREATE TABLE `{database}`.events (id UInt64, ver UInt64) ENGINE = ReplacingMergeTree(ver) ORDER BY id"
        )
        admin.command(f"INSERT INTO `{database}`.events SELECT number, 1 FROM numbers({ROWS})")
        connector = http_connector(host, port, user, password, ClickHouseConnectionOptions())
        yield SourceBackend(connector, RelationRef(database=database, table="events"), admin)
    finally:
        try:
            if kind == "real":
                admin.command(f"DROP DATABASE IF EXISTS `{database}` SYNC")
        finally:
            admin.close()


@pytest.fixture(params=HTTP_BACKENDS)
def source(request: pytest.FixtureRequest) -> Iterator[SourceBackend]:
    yield from _source_backend(request.param, request)


def snapshot(source: SourceBackend, **extra: str) -> SnapshotQuery:
    settings = {**frozen_settings(60), **extra}
    return SnapshotQuery(
        relation=source.relation,
        projection=tuple(
            map_type(name, type_, implicit_utc=False) for name, type_ in (("id", "UInt64"), ("ver", "UInt64"))
        ),
        window=None,
        provenance=False,
        settings=tuple(SettingRecord(name=k, value=v) for k, v in sorted(settings.items())),
        vendor_query_id=f"dpone-contract-{id(source):x}",
        block_rows=BLOCK_ROWS,
        expected=None,
    )


def drain(session: Any, query: SnapshotQuery, arrived: collections.Counter[str]) -> None:
    """Read the port's stream to its end, counting what arrived."""
    with session.stream(query) as blocks:
        for block in blocks:
            arrived["blocks"] += 1
            arrived["rows"] += block.rows


def test_a_server_error_mid_snapshot_stream_is_a_coded_source_failure_after_the_first_blocks(
    source: SourceBackend,
) -> None:
    """``max_result_rows`` under ``result_overflow_mode = 'throw'`` (the read profile's) stops the SELECT after
    blocks have arrived: the stream raises ``native_transfer.source_query_failed``, never ends as if complete."""
    limit = ROWS // 2
    session = source.connector.connect()
    arrived: collections.Counter[str] = collections.Counter()
    try:
        with pytest.raises(DponeError) as failed:
            drain(session, snapshot(source, max_result_rows=str(limit)), arrived)
    finally:
        session.close()
    assert_coded_with_advice(failed.value, "native_transfer.source_query_failed")
    assert arrived["blocks"] > 0, "the server failed before the stream started: not a mid-stream error"
    assert 0 < arrived["rows"] <= limit + BLOCK_ROWS < ROWS

    # the same SELECT without the limit reads every row: the failure was the limit's, mid-stream
    session = source.connector.connect()
    complete: collections.Counter[str] = collections.Counter()
    try:
        drain(session, snapshot(source), complete)
    finally:
        session.close()
    assert complete["rows"] == ROWS
