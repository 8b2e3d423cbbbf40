"""The external publication service on the real adapters, built by the hook from an Airflow connection, on the
embedded cluster: absent target (RENAME), then a second generation over the existing target (EXCHANGE + cleanup),
then a same-operation retry after a lost load response. Outcomes are read from the engines, never from the service.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.cluster.clickhouse.adapter_set import PublicationAdapters
from airflow_provider_dpone.cluster.ports import DeclaredTable
from airflow_provider_dpone.cluster.protocol.results import Committed, Completed, InProgress
from airflow_provider_dpone.cluster.protocol.service import publication_service
from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_COLUMNS, AUTHORITY_TABLE
from airflow_provider_dpone.core.clickhouse.clients import Purpose, build_client, close_client
from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2)]

COLUMNS = (("id", "UInt64"), ("name", "String"), ("amount", "Nullable(Decimal(18, 4))"), ("at", "DateTime64(3, 'UTC')"))


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
        "table": DeclaredTable(order_by=("id",)),
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


def wait_for_verdict(service: Any, timeout_s: float = 30.0) -> object:
    """Reconcile the publication until it is no longer in progress: its result, or the ``DponeError`` it stops with."""
    from airflow_provider_dpone.core.errors import DponeError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            result = service.reconcile_publication()
        except DponeError as error:
            return error
        if not isinstance(result, InProgress) or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


LIVE_TARGET_WRITES = {
    "insert": "INSERT INTO `{db}`.`target_table` SELECT * FROM `{db}`.`target_table` LIMIT 1",
    "alter_update": "ALTER TABLE `{db}`.`target_table` UPDATE name = 'written-in-place' WHERE id = 7"
    " SETTINGS mutations_sync = 1",
    "alter_add_column": "ALTER TABLE `{db}`.`target_table` ADD COLUMN `added` UInt64 DEFAULT 7",
}


def staged_second_generation(adapters: PublicationAdapters, database: str) -> tuple[Any, Any]:
    """run-1 published (2,000 rows), run-2 fenced and staged over it: (its parsed request, its service)."""
    from airflow_provider_dpone.cluster.protocol.request import PublicationRequest

    publish(adapters, database, "run-1", 2_000, 1)
    parsed = PublicationRequest.parse(request(database, "run-2"))
    service = publication_service(adapters.ports, parsed)
    service.fence()
    stage = service.stage(
        adapters.query_source(query=source_query(3_000, 3), columns=COLUMNS, max_source_bytes=1 << 26)
    )
    assert stage.phase == "STAGED"
    return parsed, service


def run_on(embedded_cluster: Any, member: Any, statement: str) -> None:
    client = embedded_cluster.client(member)
    try:
        client.command(statement)
    finally:
        client.close()


def write_while_the_exchange_is_in_flight(
    adapters: PublicationAdapters, embedded_cluster: Any, database: str, statement: str
) -> tuple[Any, str, Any, tuple[int, int]]:
    """Stage run-2 over run-1, pause member2's DDL worker, publish (the others switch), run ``statement`` on member2
    (``{cand}``: the candidate name), then let its EXCHANGE run: the request, the code the operation stops with (it
    must stop), its record (never COMMITTED, the code recorded) and member2's target digest right after the write."""
    from airflow_provider_dpone.cluster.values.authority.codec import decode
    from airflow_provider_dpone.cluster.values.authority.phases import Phase
    from airflow_provider_dpone.core.errors import DponeError

    parsed, service = staged_second_generation(adapters, database)
    paused = embedded_cluster.members[-1]
    embedded_cluster.faults.pause(paused)
    try:
        assert isinstance(service.publish(), InProgress)
        run_on(embedded_cluster, paused, statement.format(cand=parsed.candidate_name))
        written = digest_on(embedded_cluster, paused, database, "target_table")
    finally:
        embedded_cluster.faults.resume(paused)
    verdict = wait_for_verdict(service)
    assert isinstance(verdict, DponeError), verdict
    stored = adapters.ports.authority.read(parsed.target_key)
    assert stored is not None
    record = decode(stored.row)
    assert record.phase is Phase.PUBLICATION_DISPATCHING
    assert record.last_error is not None and record.last_error.code == verdict.code
    return parsed, verdict.code, record, written


@pytest.mark.parametrize(
    "write",
    [
        "INSERT INTO `{db}`.`{cand}` SELECT * FROM `{db}`.`{cand}` LIMIT 1",
        "ALTER TABLE `{db}`.`{cand}` UPDATE name = 'written-after-the-barrier' WHERE id = 7 SETTINGS mutations_sync = 1",
    ],
    ids=["insert", "alter_update"],
)
def test_a_candidate_written_while_the_exchange_is_in_flight_is_never_committed(
    adapters: PublicationAdapters, embedded_cluster: Any, fresh_database: str, write: str
) -> None:
    """member2's DDL worker is paused after the barrier, its candidate is written, then the EXCHANGE runs there:
    the UUIDs are exactly as bound, the content is not. The operation stops with a coded failure, never COMMITTED,
    and every object is retained (the predecessor under the candidate name on every member)."""
    parsed, code, record, _written = write_while_the_exchange_is_in_flight(
        adapters, embedded_cluster, fresh_database, write.format(db=fresh_database, cand="{cand}")
    )
    assert code == "DPONE_CLICKHOUSE_CLUSTER_PUBLISHED_CONTENT_DIVERGENT"
    tables = member_tables(embedded_cluster, fresh_database)
    for member in embedded_cluster.members:  # exchanged everywhere, and both objects retained
        assert set(tables[member.name]) == {"target_table", parsed.candidate_name}
    published = {tables[member.name]["target_table"][0] for member in embedded_cluster.members}
    assert published == {member.candidate_uuid for member in record.members}


def drift_stops_publish_twice(adapters: PublicationAdapters, parsed: Any, service: Any) -> Any:
    """``publish`` stops with TARGET_DRIFT and a retry stops again, before any permit: the record, still STAGED."""
    from airflow_provider_dpone.cluster.values.authority.codec import decode
    from airflow_provider_dpone.cluster.values.authority.phases import Phase
    from airflow_provider_dpone.core.errors import DponeError

    for _ in range(2):
        with pytest.raises(DponeError) as raised:
            service.publish()
        assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_TARGET_DRIFT"
    stored = adapters.ports.authority.read(parsed.target_key)
    assert stored is not None
    record = decode(stored.row)
    assert record.phase is Phase.STAGED and record.publication is None
    return record


@pytest.mark.parametrize("write", sorted(LIVE_TARGET_WRITES))
def test_a_live_target_written_in_place_between_stage_and_publish_stops_the_publication_with_the_write_kept(
    adapters: PublicationAdapters, embedded_cluster: Any, fresh_database: str, write: str
) -> None:
    """Seed 000 E6 on the real engine: after the stage observed every member's target (its baseline), member2's
    live target is written or altered in place (same UUID). The barrier sees it from what the engine reports (its
    columns, active parts, count and content digest) and stops with TARGET_DRIFT before any permit: nothing is
    exchanged, the written target stays the target with the write, every candidate is retained, a retry stops
    again."""
    parsed, service = staged_second_generation(adapters, fresh_database)
    before = member_tables(embedded_cluster, fresh_database)
    written = embedded_cluster.members[-1]
    run_on(embedded_cluster, written, LIVE_TARGET_WRITES[write].format(db=fresh_database))
    after_write = digest_on(embedded_cluster, written, fresh_database, "target_table")
    drift_stops_publish_twice(adapters, parsed, service)
    tables = member_tables(embedded_cluster, fresh_database)
    for member in embedded_cluster.members:  # nothing exchanged: every name holds the UUID it held
        assert {name: uuid for name, (uuid, _) in tables[member.name].items()} == {
            name: uuid for name, (uuid, _) in before[member.name].items()
        }
    assert digest_on(embedded_cluster, written, fresh_database, "target_table") == after_write  # the write kept
    other = embedded_cluster.members[0]
    assert digest_on(embedded_cluster, other, fresh_database, "target_table") != after_write


def test_a_merge_of_the_live_target_between_stage_and_publish_still_publishes(
    adapters: PublicationAdapters, embedded_cluster: Any, fresh_database: str
) -> None:
    """The control: OPTIMIZE FINAL replaces the live target's parts and keeps every row; the barrier digests the
    new parts and finds the baseline's content."""
    _parsed, service = staged_second_generation(adapters, fresh_database)
    optimize_final(embedded_cluster, fresh_database, "target_table")
    assert isinstance(service.publish(), Committed)
    assert isinstance(service.cleanup(), Completed)


def test_a_live_target_written_while_the_exchange_is_in_flight_is_never_committed_nor_dropped(
    adapters: PublicationAdapters, embedded_cluster: Any, fresh_database: str
) -> None:
    """member2's DDL worker is paused after the barrier; its live target (still the old one there) is written; then
    the EXCHANGE runs there. After the DDL the predecessor, now under the candidate name, is not its baseline: the
    operation stops with TARGET_DRIFT, never COMMITTED, and the predecessor holding the write is retained."""
    parsed, code, record, written = write_while_the_exchange_is_in_flight(
        adapters, embedded_cluster, fresh_database, LIVE_TARGET_WRITES["insert"].format(db=fresh_database)
    )
    assert code == "DPONE_CLICKHOUSE_CLUSTER_TARGET_DRIFT"
    paused = embedded_cluster.members[-1]
    tables = member_tables(embedded_cluster, fresh_database)
    predecessors = {member.target_uuid for member in record.members}
    assert tables[paused.name][parsed.candidate_name][0] in predecessors  # the predecessor, retained
    assert digest_on(embedded_cluster, paused, fresh_database, parsed.candidate_name) == written  # with the write


def test_one_byte_changed_in_the_extracted_stream_stops_the_stage_before_any_member_is_touched(
    adapters: PublicationAdapters, embedded_cluster: Any, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's extraction stream changes one byte of a value before the artifact's digest is computed: the
    stage fails with a coded error before STAGING (no artifact bound, no candidate on any member)."""
    from airflow_provider_dpone.cluster.clickhouse import artifact_source
    from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
    from airflow_provider_dpone.cluster.values.authority.codec import decode
    from airflow_provider_dpone.cluster.values.authority.phases import Phase
    from airflow_provider_dpone.core.errors import DponeError

    original = artifact_source.copy_bounded
    changed: list[int] = []

    def corrupting(read: Any, writer: Any, chunk_bytes: int) -> None:
        def read_changed(size: int) -> bytes:
            chunk = read(size)
            if changed or not chunk:
                return chunk
            changed.append(len(chunk))  # the last byte of the first chunk: a DateTime64 value's highest byte
            return chunk[:-1] + bytes([chunk[-1] ^ 0x01])

        original(read_changed, writer, chunk_bytes)

    publish(adapters, fresh_database, "run-1", 2_000, 1)
    before = member_tables(embedded_cluster, fresh_database)
    parsed = PublicationRequest.parse(request(fresh_database, "run-2"))
    service = publication_service(adapters.ports, parsed)
    service.fence()
    monkeypatch.setattr(artifact_source, "copy_bounded", corrupting)
    with pytest.raises(DponeError) as caught:
        service.stage(adapters.query_source(query=source_query(3_000, 3), columns=COLUMNS, max_source_bytes=1 << 26))
    assert caught.value.code == "DPONE_ARTIFACT_SOURCE_DIGEST_MISMATCH" and len(changed) == 1
    stored = adapters.ports.authority.read(parsed.target_key)
    assert stored is not None
    record = decode(stored.row)
    assert record.phase is Phase.LOCKED and record.artifact is None
    assert member_tables(embedded_cluster, fresh_database) == before  # no candidate, the target untouched


class _WorkerDied(BaseException):
    """A worker process that died before its request left (``BaseException``: nothing may swallow it)."""


class _Interleaved:
    """The authority store of one worker, through which another worker's call runs just before this worker's first
    compare-and-set leaves; ``dies_before`` makes the worker die before a write of that phase leaves."""

    def __init__(self, store: Any, dies_before: str | None = None) -> None:
        self.store = store
        self.before_first_cas: Any = None
        self.dies_before = dies_before

    def read(self, target_key: str) -> Any:
        return self.store.read(target_key)

    def create(self, row: Any) -> None:
        self.store.create(row)

    def compare_and_set(self, row: Any, expected_version: int) -> None:
        action, self.before_first_cas = self.before_first_cas, None
        if action is not None:
            action()
        if row.phase == self.dies_before:
            raise _WorkerDied
        self.store.compare_and_set(row, expected_version)


def test_an_abort_that_died_half_way_while_a_publish_took_its_permit_leaves_no_publication_on_dropped_candidates(
    adapters: PublicationAdapters, embedded_cluster: Any, fresh_database: str
) -> None:
    """The publish try has observed its staged candidates and is about to take its permit; in between, an abort of
    the same operation runs on another worker, writes what it writes, drops, and dies before it records ABORTED. The
    publish's permit must then lose on the real KeeperMap (the abort fenced first), nothing may be exchanged, and the
    next abort finishes: no candidate left, the target exactly the previous generation."""
    from dataclasses import replace

    from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
    from airflow_provider_dpone.core.errors import DponeError

    publish(adapters, fresh_database, "run-1", 2_000, 1)
    before = member_tables(embedded_cluster, fresh_database)
    parsed = PublicationRequest.parse(request(fresh_database, "run-2"))
    publication_service(adapters.ports, parsed).fence()
    staged = publication_service(adapters.ports, parsed).stage(
        adapters.query_source(query=source_query(3_000, 3), columns=COLUMNS, max_source_bytes=1 << 26)
    )
    assert staged.phase == "STAGED"
    publisher, aborter = _Interleaved(adapters.ports.authority), _Interleaved(adapters.ports.authority, "ABORTED")

    def abort_on_another_worker() -> None:
        with pytest.raises(_WorkerDied):
            # the operator acts a CREATE window after the stage (an abort waits out any stage try's CREATE)
            publication_service(
                replace(adapters.ports, authority=aborter, clock=_Later(adapters.ports.clock)), parsed
            ).abort()

    publisher.before_first_cas = abort_on_another_worker
    with pytest.raises(DponeError) as refused:
        publication_service(replace(adapters.ports, authority=publisher), parsed).publish()
    assert refused.value.code == "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_CONFLICT"  # the permit lost to the fence
    later = replace(adapters.ports, clock=_Later(adapters.ports.clock))  # no stage CREATE can still arrive
    assert publication_service(later, parsed).abort().phase == "ABORTED"
    with pytest.raises(DponeError) as aborted:
        publication_service(adapters.ports, parsed).publish()
    assert aborted.value.code == "DPONE_CLICKHOUSE_CLUSTER_OPERATION_ABORTED"
    assert member_tables(embedded_cluster, fresh_database) == before  # no candidate, the same target everywhere


CREATE_WINDOW_MS = 10_000 + 310_000 + 60_000 + 1
"""The default dispatch deadline, send timeout and skew margin: after the last candidate intent plus these, no
member-local CREATE a stage try sent can still arrive (an external abort waits them out before ABORTED)."""


class _Later:
    """The clock of a worker acting a whole CREATE window later than now (instead of sleeping it out)."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock

    def now_ms(self) -> int:
        return int(self.clock.now_ms()) + CREATE_WINDOW_MS

    def monotonic_ms(self) -> int:
        return int(self.clock.monotonic_ms())

    def sleep_ms(self, ms: int) -> None:
        self.clock.sleep_ms(ms)


class _BeforeFirstCreate:
    """The member sessions of one worker: ``action`` (another worker's call) runs just before this worker's first
    ``CREATE ... UUID`` leaves for a member."""

    def __init__(self, sessions: Any, action: Any) -> None:
        self.sessions, self.action = sessions, action

    def session(self, member: Any) -> Any:
        inner, outer = self.sessions.session(member), self

        class _Session:
            def __getattr__(self, name: str) -> Any:
                return getattr(inner, name)

            def create_table(self, *args: Any, **kwargs: Any) -> None:
                action, outer.action = outer.action, None
                if action is not None:
                    action()
                inner.create_table(*args, **kwargs)

        return _Session()


def test_an_abort_between_a_stage_try_s_intent_write_and_its_create_leaves_no_candidate_after_aborted(
    adapters: PublicationAdapters, embedded_cluster: Any, fresh_database: str
) -> None:
    """External mode on real engines: a stage try wrote STAGING with every candidate intent and is about to send its
    first ``CREATE ... UUID``; in between, an abort of the same operation runs whole on another worker. The CREATE
    then lands after the abort observed the member. The abort must not have written ABORTED while a candidate can
    still arrive: it stops ``ABORT_CREATE_IN_FLIGHT``, the stage try loses its next write to the fence, and the abort
    a CREATE window later drops what landed and ends ABORTED, every member exactly as before the operation."""
    from dataclasses import replace

    from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
    from airflow_provider_dpone.cluster.values.authority.phases import Phase
    from airflow_provider_dpone.core.errors import DponeError
    from tests.support.cluster.replica_checks import authority_record

    publish(adapters, fresh_database, "run-1", 2_000, 1)
    before = member_tables(embedded_cluster, fresh_database)
    parsed = PublicationRequest.parse(request(fresh_database, "run-2"))
    publication_service(adapters.ports, parsed).fence()
    first_abort: list[str] = []

    def abort_on_another_worker() -> None:
        try:
            first_abort.append(publication_service(adapters.ports, parsed).abort().phase)
        except DponeError as stopped:
            first_abort.append(stopped.code)

    racing = replace(adapters.ports, sessions=_BeforeFirstCreate(adapters.ports.sessions, abort_on_another_worker))
    with pytest.raises(DponeError):
        publication_service(racing, parsed).stage(
            adapters.query_source(query=source_query(3_000, 3), columns=COLUMNS, max_source_bytes=1 << 26)
        )
    landed = member_tables(embedded_cluster, fresh_database)
    assert landed != before, "the stage try's CREATE landed after the abort"
    record = authority_record(embedded_cluster, fresh_database)
    assert first_abort == ["DPONE_CLICKHOUSE_CLUSTER_ABORT_CREATE_IN_FLIGHT"], first_abort
    assert record is not None and record.phase is Phase.ABORTING
    later = replace(adapters.ports, clock=_Later(adapters.ports.clock))
    assert publication_service(later, parsed).abort().phase == "ABORTED"
    assert member_tables(embedded_cluster, fresh_database) == before  # no candidate, the same target everywhere


def misrouted_adapters(
    embedded_cluster: Any, database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, endpoints: dict[str, str]
) -> PublicationAdapters:
    """The adapters of a connection whose ``member_endpoints`` map is ``endpoints`` (each member is its own engine
    process, so a wrong entry reaches another member's server)."""
    connection = {**embedded_cluster.connection_json(database), "extra": {"member_endpoints": endpoints}}
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_MISROUTED", json.dumps(connection))
    return DponeClickHouseHook("dpone_misrouted").publication_adapters(
        database=database, artifact_base=f"file://{tmp_path}/misrouted", ddl_task_timeout_seconds=10
    )


def authority_rows(embedded_cluster: Any, database: str) -> int:
    client = embedded_cluster.client("coordinator")
    try:
        return int(client.command(f"SELECT count() FROM `{database}`.`{AUTHORITY_TABLE}`"))
    finally:
        client.close()


@pytest.mark.parametrize(
    ("mapping", "code"),
    [
        ("swapped", "DPONE_CLICKHOUSE_MEMBER_IDENTITY_MISMATCH"),
        ("extra", "DPONE_CLICKHOUSE_MEMBER_ENDPOINT_EXTRA"),
    ],
)
def test_a_member_endpoint_that_is_not_its_member_is_refused_before_anything_is_created(
    adapters: PublicationAdapters,
    embedded_cluster: Any,
    fresh_database: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mapping: str,
    code: str,
) -> None:
    from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
    from airflow_provider_dpone.core.errors import DponeError

    first, second = embedded_cluster.members
    endpoints = {first.member_key: second.address, second.member_key: first.address}
    if mapping == "extra":
        endpoints = {first.member_key: first.address, second.member_key: second.address, "1:9": "127.0.0.1:9"}
    built = misrouted_adapters(embedded_cluster, fresh_database, tmp_path, monkeypatch, endpoints)
    before = member_tables(embedded_cluster, fresh_database)
    try:
        service = publication_service(built.ports, PublicationRequest.parse(request(fresh_database, "run-m")))
        with pytest.raises(DponeError) as refused:
            service.fence()
    finally:
        built.close()
    assert refused.value.code == code
    assert authority_rows(embedded_cluster, fresh_database) == 0
    assert member_tables(embedded_cluster, fresh_database) == before
    assert first.address not in str(refused.value) and second.address not in str(refused.value)
    publish(adapters, fresh_database, "run-ok", 100, 1)  # the correct map of the same cluster is admitted
