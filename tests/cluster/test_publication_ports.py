"""One contract suite for the publication ports, run against the in-memory fakes AND the real ClickHouse adapters on
the embedded cluster (real engines, HTTP, emulated ON CLUSTER queue). Every test asserts observable outcomes only,
so a fake that drifts from ClickHouse's behaviour fails here.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_dpone.cluster.ports import (
    ColumnSpec,
    DispatchSettings,
    DropTable,
    ExchangeTables,
    HostDdlState,
    RenameTable,
    TableRead,
    TableSpec,
)
from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_COLUMNS, AUTHORITY_TABLE, AuthorityRow
from airflow_provider_dpone.cluster.values.receipts import CONTENT_DIGEST_V2
from airflow_provider_dpone.core.errors import (
    AuthorityConflictError,
    ExchangeUnsupportedError,
    MutationRejectedError,
    OutcomeUnknownError,
    ReadBackOlderError,
)
from tests.support.cluster.port_backends import BACKENDS, PortBackend, Row, open_backend
from tests.support.fakes.world import content_digest as typed_multiset_digest

pytestmark = [pytest.mark.contract, pytest.mark.embedded_cluster(members=2)]

COLUMNS = (("id", "UInt64"), ("s", "Nullable(String)"))
SPEC = TableSpec(columns=tuple(ColumnSpec(name=n, type=t) for n, t in COLUMNS), order_by=("id",))
ROWS: tuple[Row, ...] = ((1, "a"), (2, None), (3, "c"))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PortBackend]:
    instance = open_backend(request.param, request, tmp_path)
    try:
        yield instance
    finally:
        instance.close()


def key() -> str:
    return uuid.uuid4().hex * 2


def authority_row(target_key: str, payload: str) -> AuthorityRow:
    return AuthorityRow(
        target_key=target_key,
        operation_id="op",
        fence_token="f" * 32,
        phase="LOCKED",
        dispatch_epoch=0,
        payload=payload,
        payload_sha256="a" * 64,
    )


def new_uuid() -> str:
    return str(uuid.uuid4())


def settings(token: str | None = None) -> DispatchSettings:
    token = token or uuid.uuid4().hex
    return DispatchSettings(
        correlation_token=token, query_digest="d" * 64, log_comment='{"dpone":"contract","token":"' + token + '"}'
    )


def members(backend: PortBackend) -> list[str]:
    return list(backend.inventory.member_ids)


def session(backend: PortBackend, member_id: str):  # type: ignore[no-untyped-def]
    return backend.ports.sessions.session(backend.inventory.member(member_id))


def candidate(backend: PortBackend, member_id: str, name: str = "cand", spec: TableSpec = SPEC) -> str:
    value = new_uuid()
    session(backend, member_id).create_table(backend.database, name, value, spec)
    return value


# --- authority ---------------------------------------------------------------------------------------------------


def test_read_of_an_absent_key_is_none(backend: PortBackend) -> None:
    assert backend.ports.authority.read(key()) is None


def test_strict_create_conflicts_on_an_existing_key_and_changes_nothing(backend: PortBackend) -> None:
    target = key()
    first = authority_row(target, '{"n":1}')
    backend.ports.authority.create(first)
    with pytest.raises(AuthorityConflictError):
        backend.ports.authority.create(authority_row(target, '{"n":2}'))
    stored = backend.ports.authority.read(target)
    assert stored is not None and stored.row == first and stored.version == 0


def test_compare_and_set_bumps_the_version_by_one(backend: PortBackend) -> None:
    target = key()
    backend.ports.authority.create(authority_row(target, "v0"))
    for expected in range(3):
        row = authority_row(target, f"v{expected + 1} it's \\ quoted")
        backend.ports.authority.compare_and_set(row, expected)
        stored = backend.ports.authority.read(target)
        assert stored is not None and stored.row == row and stored.version == expected + 1


def test_compare_and_set_with_a_stale_version_changes_nothing(backend: PortBackend) -> None:
    target = key()
    backend.ports.authority.create(authority_row(target, "v0"))
    current = authority_row(target, "v1")
    backend.ports.authority.compare_and_set(current, 0)
    with pytest.raises(AuthorityConflictError):  # the next version holds another row
        backend.ports.authority.compare_and_set(authority_row(target, "stale 0"), 0)
    for ahead in (2, 7):  # a version the key never had reads as older: only a lagging Keeper server explains it
        with pytest.raises(ReadBackOlderError):
            backend.ports.authority.compare_and_set(authority_row(target, f"ahead {ahead}"), ahead)
    stored = backend.ports.authority.read(target)
    assert stored is not None and stored.row == current and stored.version == 1


def test_compare_and_set_of_an_absent_key_changes_nothing_and_is_not_yet_known(backend: PortBackend) -> None:
    """No row after the update: the caller held a version, so only a lagging Keeper server explains it."""
    target = key()
    with pytest.raises(ReadBackOlderError):
        backend.ports.authority.compare_and_set(authority_row(target, "x"), 0)
    assert backend.ports.authority.read(target) is None


def test_lost_authority_response_is_unknown_and_the_write_is_observable(backend: PortBackend) -> None:
    target = key()
    backend.ports.authority.create(authority_row(target, "v0"))
    row = authority_row(target, "v1")
    backend.lose_next_response("authority")
    with pytest.raises(OutcomeUnknownError):
        backend.ports.authority.compare_and_set(row, 0)
    stored = backend.ports.authority.read(target)
    assert stored is not None and stored.row == row and stored.version == 1


# --- member: the fence's exchange probe ------------------------------------------------------------------------


def test_a_members_own_exchange_swaps_two_tables_and_a_missing_one_is_refused(backend: PortBackend) -> None:
    member = members(backend)[0]
    left, right = candidate(backend, member, "xa"), candidate(backend, member, "xb")
    member_session = session(backend, member)
    member_session.exchange_tables(backend.database, "xa", "xb")
    assert member_session.table_uuids(backend.database, ("xa", "xb")) == (right, left)
    for other in members(backend)[1:]:  # this member only
        assert session(backend, other).table_uuids(backend.database, ("xa", "xb")) == (None, None)
    with pytest.raises(MutationRejectedError):
        member_session.exchange_tables(backend.database, "xa", "absent")
    assert member_session.table_uuids(backend.database, ("xa", "xb")) == (right, left)


def test_an_exchange_without_rename_exchange_is_refused_as_unsupported_and_changes_nothing(
    backend: PortBackend,
) -> None:
    member = members(backend)[0]
    left, right = candidate(backend, member, "ya"), candidate(backend, member, "yb")
    backend.refuse_next_exchange(member)
    with pytest.raises(ExchangeUnsupportedError):
        session(backend, member).exchange_tables(backend.database, "ya", "yb")
    assert session(backend, member).table_uuids(backend.database, ("ya", "yb")) == (left, right)


# --- catalog -----------------------------------------------------------------------------------------------------


def test_inventory_is_every_member_sorted_by_position(backend: PortBackend) -> None:
    rows = backend.ports.catalog.inventory(backend.cluster)
    assert [(row.shard_num, row.replica_num) for row in rows] == [(1, 1), (1, 2)]
    assert {row.internal_replication for row in rows} == {False}
    assert backend.ports.catalog.inventory("no_such_cluster") == ()


@pytest.mark.parametrize("version", [1, 2])
def test_inventory_reports_the_coordinator_sessions_ddl_entry_format_version(
    backend: PortBackend, version: int
) -> None:
    assert {row.ddl_entry_format_version for row in backend.ports.catalog.inventory(backend.cluster)} == {5}
    backend.set_ddl_entry_format_version(version)
    rows = backend.ports.catalog.inventory(backend.cluster)
    assert [(row.shard_num, row.replica_num) for row in rows] == [(1, 1), (1, 2)]
    assert {row.ddl_entry_format_version for row in rows} == {version}


def test_catalog_facts_of_every_member(backend: PortBackend) -> None:
    catalog = backend.ports.catalog
    cluster = backend.cluster
    for member in backend.inventory.members:
        answer = catalog.admission_facts(member, cluster, backend.database, AUTHORITY_TABLE)
        engine, facts = answer.database_engine, answer.table
        assert engine == "Atomic" and facts is not None
        assert answer.local_positions == ((member.shard_num, member.replica_num),)  # the member itself answered
        assert tuple((column.name, column.type) for column in facts.columns) == AUTHORITY_COLUMNS
        assert all(column.default_kind == "" for column in facts.columns)
        assert facts.engine == "KeeperMap" and facts.primary_key == "target_key"
        assert facts.engine_full.startswith("KeeperMap('/") and facts.engine_full.endswith("PRIMARY KEY target_key")
        absent = catalog.admission_facts(member, cluster, backend.database, "no_such_table")
        assert (absent.database_engine, absent.table) == ("Atomic", None)
        absent = catalog.admission_facts(member, cluster, "no_such_database", AUTHORITY_TABLE)
        assert (absent.database_engine, absent.table) == (None, None)
        assert catalog.admission_facts(member, "no_such_cluster", backend.database, "t").local_positions == ()


# --- member staging ----------------------------------------------------------------------------------------------


def test_create_with_an_exact_uuid_shows_that_uuid_and_no_rows(backend: PortBackend) -> None:
    empty = backend.seal(COLUMNS, ())
    for member_id in members(backend):
        value = candidate(backend, member_id)
        observed = session(backend, member_id).observe_table(TableRead(backend.database, "cand", with_content=True))
        assert (observed.exists, observed.uuid, observed.engine) == (True, value, "MergeTree")
        assert observed.columns == COLUMNS and observed.row_count == 0
        assert observed.content_digest == empty.content_digest


def test_declared_types_are_reported_as_clickhouse_spells_them(backend: PortBackend) -> None:
    spec = TableSpec(columns=(ColumnSpec(name="id", type="UInt64"), ColumnSpec(name="d", type="Decimal(18,4)")))
    member_id = members(backend)[0]
    candidate(backend, member_id, "typed", spec)
    observed = session(backend, member_id).observe_table(TableRead(backend.database, "typed", with_content=False))
    assert observed.columns == (("id", "UInt64"), ("d", "Decimal(18, 4)"))


def test_a_taken_name_is_refused_and_keeps_its_table(backend: PortBackend) -> None:
    member_id = members(backend)[0]
    first = candidate(backend, member_id)
    with pytest.raises(MutationRejectedError):
        session(backend, member_id).create_table(backend.database, "cand", new_uuid(), SPEC)
    assert (
        session(backend, member_id).observe_table(TableRead(backend.database, "cand", with_content=False)).uuid == first
    )


def test_a_uuid_in_use_on_the_member_is_refused(backend: PortBackend) -> None:
    member_id = members(backend)[0]
    used = candidate(backend, member_id)
    with pytest.raises(MutationRejectedError):
        session(backend, member_id).create_table(backend.database, "other", used, SPEC)
    assert (
        not session(backend, member_id).observe_table(TableRead(backend.database, "other", with_content=False)).exists
    )


def test_load_then_observe_equals_the_artifact(backend: PortBackend) -> None:
    receipt = backend.seal(COLUMNS, ROWS)
    assert receipt.row_count == 3 and receipt.schema_pairs == COLUMNS
    for member_id in members(backend):
        value = candidate(backend, member_id)
        handle = backend.ports.artifacts.open(receipt)
        session(backend, member_id).load(
            backend.database, "cand", value, handle, query_id=f"dpone-load-{uuid.uuid4().hex}", dedup_token="t"
        )
        observed = session(backend, member_id).observe_table(TableRead(backend.database, "cand", with_content=True))
        assert (observed.uuid, observed.row_count, observed.content_digest) == (value, 3, receipt.content_digest)


def test_the_content_digest_is_the_typed_multiset_digest_of_the_rows(backend: PortBackend) -> None:
    """Version 2 is one definition on every side: the server's digest equals the Python typed multiset digest
    (``core.typed_digest``) of the same rows, so the fake and the engine agree value for value."""
    receipt = backend.seal(COLUMNS, ROWS)
    assert receipt.content_digest_version == CONTENT_DIGEST_V2
    assert receipt.content_digest == typed_multiset_digest(COLUMNS, ROWS)
    member_id = members(backend)[0]
    value = candidate(backend, member_id)
    member = session(backend, member_id)
    handle = backend.ports.artifacts.open(receipt)
    member.load(backend.database, "cand", value, handle, query_id=f"dpone-load-{uuid.uuid4().hex}", dedup_token="t")
    current = member.observe_table(TableRead(backend.database, "cand", with_content=True))
    assert current.content_digest == receipt.content_digest and current.row_count == 3


def test_an_empty_artifact_is_a_complete_generation(backend: PortBackend) -> None:
    receipt = backend.seal(COLUMNS, ())
    member_id = members(backend)[0]
    value = candidate(backend, member_id)
    session(backend, member_id).load(
        backend.database,
        "cand",
        value,
        backend.ports.artifacts.open(receipt),
        query_id=f"dpone-load-{uuid.uuid4().hex}",
        dedup_token="t",
    )
    observed = session(backend, member_id).observe_table(TableRead(backend.database, "cand", with_content=True))
    assert (receipt.row_count, observed.row_count, observed.content_digest) == (0, 0, receipt.content_digest)


def test_the_digest_sees_duplicates_and_nulls_but_not_row_order(backend: PortBackend) -> None:
    base = backend.seal(COLUMNS, ROWS)
    variants = {
        "duplicate": backend.seal(COLUMNS, (*ROWS, ROWS[0])),
        "null_to_empty": backend.seal(COLUMNS, ((1, "a"), (2, ""), (3, "c"))),
        "value_to_null": backend.seal(COLUMNS, ((1, None), (2, None), (3, "c"))),
        "missing": backend.seal(COLUMNS, ROWS[:2]),
    }
    digests = {base.content_digest, *(receipt.content_digest for receipt in variants.values())}
    assert len(digests) == 1 + len(variants)
    reordered = backend.seal(COLUMNS, tuple(reversed(ROWS)))
    assert reordered.content_digest == base.content_digest


def test_the_parts_digest_is_stable_until_rows_are_written(backend: PortBackend) -> None:
    receipt = backend.seal(COLUMNS, ROWS)
    member_id = members(backend)[0]
    value = candidate(backend, member_id)
    member = session(backend, member_id)

    def parts(**flags: bool) -> str | None:
        return member.observe_table(TableRead(backend.database, "cand", with_content=False, **flags)).parts_digest

    assert parts() is None
    empty = parts(with_parts=True)
    for token in ("first", "second"):  # a second load (another token) adds parts: a write the barrier must see
        member.load(
            backend.database,
            "cand",
            value,
            backend.ports.artifacts.open(receipt),
            query_id=f"dpone-load-{uuid.uuid4().hex}",
            dedup_token=token,
        )
        loaded = member.observe_table(TableRead(backend.database, "cand", with_content=True))
        assert loaded.parts_digest is not None and loaded.parts_digest == parts(with_parts=True) != empty
        empty = loaded.parts_digest
    assert member.observe_table(TableRead(backend.database, "cand", with_content=True)).row_count == 6


def test_an_added_column_keeps_every_part_and_changes_the_schema_and_the_content(backend: PortBackend) -> None:
    """``ADD COLUMN`` is metadata-only: the parts digest stays, so only the schema shows the alter (and the content
    digest, read again over the new schema, which the parts alone would not trigger)."""
    receipt = backend.seal(COLUMNS, ROWS)
    member_id = members(backend)[0]
    member = session(backend, member_id)
    handle = backend.ports.artifacts.open(receipt)
    query_id = f"dpone-load-{uuid.uuid4().hex}"
    member.load(backend.database, "cand", candidate(backend, member_id), handle, query_id=query_id, dedup_token="t")
    before = member.observe_table(TableRead(backend.database, "cand", with_content=True))
    backend.add_column(member_id, "cand", ("added", "UInt64"), 7)
    after = member.observe_table(TableRead(backend.database, "cand", with_content=True))
    assert (after.uuid, after.parts_digest, after.row_count) == (before.uuid, before.parts_digest, len(ROWS))
    assert after.columns == (*COLUMNS, ("added", "UInt64")) != before.columns
    expected = typed_multiset_digest((*COLUMNS, ("added", "UInt64")), tuple((*row, 7) for row in ROWS))
    assert after.content_digest == expected != before.content_digest


def test_a_load_is_refused_unless_the_name_holds_the_uuid(backend: PortBackend) -> None:
    receipt = backend.seal(COLUMNS, ROWS)
    member_id = members(backend)[0]
    candidate(backend, member_id)
    with pytest.raises(MutationRejectedError):
        session(backend, member_id).load(
            backend.database,
            "cand",
            new_uuid(),
            backend.ports.artifacts.open(receipt),
            query_id=f"dpone-load-{uuid.uuid4().hex}",
            dedup_token="t",
        )
    assert (
        session(backend, member_id).observe_table(TableRead(backend.database, "cand", with_content=False)).row_count
        == 0
    )


def test_drop_with_a_wrong_uuid_is_refused_and_with_the_exact_uuid_drops(backend: PortBackend) -> None:
    member_id = members(backend)[0]
    value = candidate(backend, member_id)
    with pytest.raises(MutationRejectedError):
        session(backend, member_id).drop_table(backend.database, "cand", new_uuid())
    assert (
        session(backend, member_id).observe_table(TableRead(backend.database, "cand", with_content=False)).uuid == value
    )
    session(backend, member_id).drop_table(backend.database, "cand", value)
    assert not session(backend, member_id).observe_table(TableRead(backend.database, "cand", with_content=False)).exists


def test_a_lost_load_response_is_unknown_and_the_rows_landed_once(backend: PortBackend) -> None:
    receipt = backend.seal(COLUMNS, ROWS)
    member_id = members(backend)[1]
    value = candidate(backend, member_id)
    backend.lose_next_response("load", member_id)
    with pytest.raises(OutcomeUnknownError):
        session(backend, member_id).load(
            backend.database,
            "cand",
            value,
            backend.ports.artifacts.open(receipt),
            query_id=f"dpone-load-{uuid.uuid4().hex}",
            dedup_token="t",
        )
    observed = session(backend, member_id).observe_table(TableRead(backend.database, "cand", with_content=True))
    assert (observed.row_count, observed.content_digest) == (3, receipt.content_digest)


def test_a_lost_create_response_is_unknown_and_the_table_is_observable(backend: PortBackend) -> None:
    member_id = members(backend)[0]
    value = new_uuid()
    backend.lose_next_response("create", member_id)
    with pytest.raises(OutcomeUnknownError):
        session(backend, member_id).create_table(backend.database, "cand", value, SPEC)
    assert (
        session(backend, member_id).observe_table(TableRead(backend.database, "cand", with_content=False)).uuid == value
    )


# --- cluster DDL -------------------------------------------------------------------------------------------------


def test_exchange_swaps_the_uuids_on_every_member(backend: PortBackend) -> None:
    before = {m: (candidate(backend, m, "target"), candidate(backend, m, "cand")) for m in members(backend)}
    intent = ExchangeTables(cluster=backend.cluster, database=backend.database, left="target", right="cand")
    outcome = backend.ports.ddl.dispatch(backend.inventory, intent, settings())
    assert sorted(outcome.finished) == members(backend) and not outcome.failed and not outcome.timed_out
    for member_id, (target_uuid, candidate_uuid) in before.items():
        observe = session(backend, member_id).observe_table
        assert observe(TableRead(backend.database, "target", with_content=False)).uuid == candidate_uuid
        assert observe(TableRead(backend.database, "cand", with_content=False)).uuid == target_uuid
        pair = session(backend, member_id).table_uuids(backend.database, ("target", "cand"))
        assert pair == (candidate_uuid, target_uuid)


def test_an_exchanged_table_keeps_its_parts_digest_under_the_new_name(backend: PortBackend) -> None:
    """The published table keeps its part names and checksums: what a candidate was verified with is what the target
    shows after EXCHANGE (a successor's baseline reuses its digest on that basis, cluster/protocol/seal.py)."""
    receipt = backend.seal(COLUMNS, ROWS)
    verified = {}
    for member_id in members(backend):
        candidate(backend, member_id, "target")
        value = candidate(backend, member_id)
        member = session(backend, member_id)
        artifact = backend.ports.artifacts.open(receipt)
        member.load(
            backend.database, "cand", value, artifact, query_id=f"dpone-load-{uuid.uuid4().hex}", dedup_token="t"
        )
        verified[member_id] = member.observe_table(TableRead(backend.database, "cand", with_content=True))
    intent = ExchangeTables(cluster=backend.cluster, database=backend.database, left="target", right="cand")
    outcome = backend.ports.ddl.dispatch(backend.inventory, intent, settings())
    assert sorted(outcome.finished) == members(backend) and not outcome.failed
    for member_id, before in verified.items():
        after = session(backend, member_id).observe_table(TableRead(backend.database, "target", with_content=True))
        assert before.parts_digest is not None and after.uuid == before.uuid
        assert (after.parts_digest, after.row_count, after.content_digest) == (
            before.parts_digest,
            before.row_count,
            before.content_digest,
        )


def test_rename_moves_the_uuid_on_every_member(backend: PortBackend) -> None:
    before = {m: candidate(backend, m) for m in members(backend)}
    intent = RenameTable(cluster=backend.cluster, database=backend.database, source="cand", target="target")
    backend.ports.ddl.dispatch(backend.inventory, intent, settings())
    for member_id, value in before.items():
        observe = session(backend, member_id).observe_table
        assert observe(TableRead(backend.database, "target", with_content=False)).uuid == value
        assert not observe(TableRead(backend.database, "cand", with_content=False)).exists
        assert session(backend, member_id).table_uuids(backend.database, ("cand", "target", "other")) == (
            None,
            value,
            None,
        )


def test_drop_on_cluster_removes_the_table_everywhere(backend: PortBackend) -> None:
    for member_id in members(backend):
        candidate(backend, member_id)
    backend.ports.ddl.dispatch(
        backend.inventory, DropTable(cluster=backend.cluster, database=backend.database, table="cand"), settings()
    )
    for member_id in members(backend):
        assert (
            not session(backend, member_id)
            .observe_table(TableRead(backend.database, "cand", with_content=False))
            .exists
        )


def test_queue_status_finds_exactly_the_entry_of_a_token(backend: PortBackend) -> None:
    for member_id in members(backend):
        candidate(backend, member_id, "a")
        candidate(backend, member_id, "b")
    first, second = settings(), settings()
    backend.ports.ddl.dispatch(
        backend.inventory, DropTable(cluster=backend.cluster, database=backend.database, table="a"), first
    )
    backend.ports.ddl.dispatch(
        backend.inventory, DropTable(cluster=backend.cluster, database=backend.database, table="b"), second
    )
    entries = []
    for dispatched in (first, second):
        status = backend.ports.ddl.queue_status(backend.inventory, dispatched.correlation_token)
        assert status is not None and status.correlation_token == dispatched.correlation_token
        assert [host.member_id for host in status.hosts] == members(backend)
        assert all(host.succeeded for host in status.hosts)
        entries.append(status.entry)
    assert entries[0] != entries[1]
    assert backend.ports.ddl.queue_status(backend.inventory, uuid.uuid4().hex) is None


@pytest.mark.parametrize("kind", ["exchange", "rename", "drop"])
def test_each_statement_kind_sent_on_cluster_is_found_in_the_queue_by_its_token(
    backend: PortBackend, kind: str
) -> None:
    """Every kind the external route sends ``ON CLUSTER``, dispatched by the product's DDL adapter and found by its own
    queue lookup (a real server keeps the token in the entry's settings, not in its query text)."""
    for member_id in members(backend):
        candidate(backend, member_id, "target")
        candidate(backend, member_id, "cand")
    cluster, database = backend.cluster, backend.database
    intent = {
        "exchange": ExchangeTables(cluster=cluster, database=database, left="target", right="cand"),
        "rename": RenameTable(cluster=cluster, database=database, source="cand", target="renamed"),
        "drop": DropTable(cluster=cluster, database=database, table="cand"),
    }[kind]
    token = settings()
    outcome = backend.ports.ddl.dispatch(backend.inventory, intent, token)
    assert sorted(outcome.finished) == members(backend) and not outcome.failed and not outcome.timed_out
    status = backend.ports.ddl.queue_status(backend.inventory, token.correlation_token)
    assert status is not None and status.correlation_token == token.correlation_token
    assert [host.member_id for host in status.hosts] == members(backend)
    assert all(host.succeeded for host in status.hosts)
    cand_gone = kind != "exchange"
    for member_id in members(backend):
        observed = session(backend, member_id).observe_table(TableRead(backend.database, "cand", with_content=False))
        assert observed.exists is not cand_gone, member_id


def test_a_host_failure_is_unknown_to_the_initiator_and_visible_in_the_queue(backend: PortBackend) -> None:
    first, second = members(backend)
    moved = candidate(backend, first)
    candidate(backend, second)
    candidate(backend, second, "target")  # the rename fails on the second member only: the name is taken there
    token = settings()
    intent = RenameTable(cluster=backend.cluster, database=backend.database, source="cand", target="target")
    with pytest.raises(OutcomeUnknownError):
        backend.ports.ddl.dispatch(backend.inventory, intent, token)
    status = backend.ports.ddl.queue_status(backend.inventory, token.correlation_token)
    assert status is not None
    by_member = {host.member_id: host for host in status.hosts}
    assert by_member[first].succeeded
    assert by_member[second].state is HostDdlState.FINISHED and by_member[second].failed
    assert (
        session(backend, first).observe_table(TableRead(backend.database, "target", with_content=False)).uuid == moved
    )


def test_a_host_that_does_not_run_the_entry_times_out_and_stays_queued_until_it_does(backend: PortBackend) -> None:
    first, second = members(backend)
    for member_id in (first, second):
        candidate(backend, member_id)
    backend.pause(second)
    token = settings()
    intent = DropTable(cluster=backend.cluster, database=backend.database, table="cand")
    outcome = backend.ports.ddl.dispatch(backend.inventory, intent, token)
    assert outcome.timed_out and second not in outcome.finished
    status = backend.ports.ddl.queue_status(backend.inventory, token.correlation_token)
    assert status is not None
    by_member = {host.member_id: host for host in status.hosts}
    assert by_member[first].succeeded
    assert by_member[second].state in (HostDdlState.INACTIVE, HostDdlState.ACTIVE)
    assert session(backend, second).observe_table(TableRead(backend.database, "cand", with_content=False)).exists
    backend.resume(second)
    deadline = time.monotonic() + 10
    while True:
        status = backend.ports.ddl.queue_status(backend.inventory, token.correlation_token)
        assert status is not None
        if all(host.succeeded for host in status.hosts) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert all(host.succeeded for host in status.hosts)
    assert not session(backend, second).observe_table(TableRead(backend.database, "cand", with_content=False)).exists


def test_a_lost_dispatch_response_is_unknown_and_the_entry_and_effect_are_observable(backend: PortBackend) -> None:
    before = {m: candidate(backend, m) for m in members(backend)}
    token = settings()
    backend.lose_next_response("ddl")
    with pytest.raises(OutcomeUnknownError):
        backend.ports.ddl.dispatch(
            backend.inventory, DropTable(cluster=backend.cluster, database=backend.database, table="cand"), token
        )
    status = backend.ports.ddl.queue_status(backend.inventory, token.correlation_token)
    assert status is not None and all(host.succeeded for host in status.hosts)
    for member_id in before:
        assert (
            not session(backend, member_id)
            .observe_table(TableRead(backend.database, "cand", with_content=False))
            .exists
        )


def test_the_coordinator_start_time_is_a_lower_bound_that_a_restart_moves_forward(backend: PortBackend) -> None:
    ddl = backend.ports.ddl
    first = ddl.server_identity()
    assert first.started_at_ms <= backend.now_ms()
    again = ddl.server_identity()
    assert again.name == first.name  # the same server, by serverUUID() and the digest of hostName()
    assert abs(again.started_at_ms - first.started_at_ms) <= 1000  # the same start, to uptime()'s whole seconds
    before = backend.now_ms()
    backend.restart_coordinator()
    after = ddl.server_identity()
    assert before - 1000 <= after.started_at_ms <= backend.now_ms() and after.started_at_ms > first.started_at_ms


def test_a_coordinator_recreated_without_its_data_directory_answers_a_new_uuid_on_the_same_host(
    backend: PortBackend,
) -> None:
    """What the void proof's retired-server rule reads: a new ``serverUUID()``, the same ``hostName()`` digest, and a
    start time after the recreation."""
    ddl = backend.ports.ddl
    first = ddl.server_identity()
    recreated = str(uuid.uuid4())
    before = backend.now_ms()
    backend.recreate_coordinator(recreated)
    after = ddl.server_identity()
    assert after.name.server_uuid == recreated != first.name.server_uuid
    assert after.name.host_digest == first.name.host_digest
    assert before - 1000 <= after.started_at_ms <= backend.now_ms()
    assert ddl.server_identity().name == after.name  # it keeps its new identity


def test_a_pinned_dispatch_runs_in_its_identity_session_and_is_refused_unrun_after_a_restart(
    backend: PortBackend,
) -> None:
    ddl = backend.ports.ddl
    pinned = settings()
    session_id = f"dpone-{pinned.correlation_token}"
    ddl.server_identity(session_id=session_id)
    candidate(backend, members(backend)[0], "cand_a")
    for member_id in members(backend)[1:]:
        candidate(backend, member_id, "cand_a")
    drop_a = DropTable(cluster=backend.cluster, database=backend.database, table="cand_a")
    ddl.dispatch(backend.inventory, drop_a, pinned.model_copy(update={"session_id": session_id}))
    assert ddl.queue_status(backend.inventory, pinned.correlation_token) is not None

    lost = settings()
    lost_session = f"dpone-{lost.correlation_token}"
    ddl.server_identity(session_id=lost_session)
    for member_id in members(backend):
        candidate(backend, member_id, "cand_b")
    backend.restart_coordinator()  # the server holding the session is gone: the pinned request must not run
    drop_b = DropTable(cluster=backend.cluster, database=backend.database, table="cand_b")
    with pytest.raises(MutationRejectedError):
        ddl.dispatch(backend.inventory, drop_b, lost.model_copy(update={"session_id": lost_session}))
    assert ddl.queue_status(backend.inventory, lost.correlation_token) is None
    for member_id in members(backend):
        assert (
            session(backend, member_id).observe_table(TableRead(backend.database, "cand_b", with_content=False)).exists
        )


def _stalled_exchange(backend: PortBackend) -> tuple[DispatchSettings, list[BaseException], threading.Thread]:
    """An EXCHANGE sent to a stalled coordinator, from a thread (the embedded request blocks until woken)."""
    intent = ExchangeTables(cluster=backend.cluster, database=backend.database, left="target", right="cand")
    token = settings()
    failures: list[BaseException] = []

    def send() -> None:
        try:
            backend.ports.ddl.dispatch(backend.inventory, intent, token)
        except OutcomeUnknownError as error:
            failures.append(error)

    backend.stall_coordinator()
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    time.sleep(0.5)
    assert backend.ports.ddl.queue_status(backend.inventory, token.correlation_token) is None
    return token, failures, sender


def test_a_stalled_coordinator_queues_its_held_request_late_once_woken(backend: PortBackend) -> None:
    before = {m: (candidate(backend, m, "target"), candidate(backend, m, "cand")) for m in members(backend)}
    token, _, sender = _stalled_exchange(backend)
    for member_id, pair in before.items():
        assert session(backend, member_id).table_uuids(backend.database, ("target", "cand")) == pair
    backend.release_coordinator()
    sender.join(timeout=30)
    deadline = time.monotonic() + 10
    while True:
        status = backend.ports.ddl.queue_status(backend.inventory, token.correlation_token)
        if (status is not None and all(host.succeeded for host in status.hosts)) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert status is not None and all(host.succeeded for host in status.hosts)
    for member_id, (target_uuid, candidate_uuid) in before.items():
        pair = session(backend, member_id).table_uuids(backend.database, ("target", "cand"))
        assert pair == (candidate_uuid, target_uuid)  # exactly one exchange


def test_a_request_held_by_a_coordinator_dies_when_it_restarts(backend: PortBackend) -> None:
    before = {m: (candidate(backend, m, "target"), candidate(backend, m, "cand")) for m in members(backend)}
    token, failures, sender = _stalled_exchange(backend)
    backend.restart_coordinator()
    sender.join(timeout=30)
    assert not sender.is_alive() and len(failures) == 1  # the client never learns an outcome
    backend.release_coordinator()  # nothing is held any more
    time.sleep(0.5)
    assert backend.ports.ddl.queue_status(backend.inventory, token.correlation_token) is None
    for member_id, pair in before.items():
        assert session(backend, member_id).table_uuids(backend.database, ("target", "cand")) == pair
