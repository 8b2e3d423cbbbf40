"""How each adapter maps what the server answered (or did not) onto the port failure contract.

A scripted client stands in for the server here, so every branch is reached deterministically, including the ones a
real engine shows only under races (a compare-and-set whose version moved twice). The real-engine behaviour of the
same adapters is covered by the contract suite and ``tests/cluster/clickhouse/test_ch_adapters.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

from airflow_provider_dpone.cluster.clickhouse.authority_store import ClickHouseAuthorityStore
from airflow_provider_dpone.cluster.clickhouse.cluster_ddl import ClickHouseClusterDDL
from airflow_provider_dpone.cluster.clickhouse.endpoint import Endpoint
from airflow_provider_dpone.cluster.clickhouse.member_session import (
    SYNC_READ_MARGIN_SECONDS,
    ClickHouseMemberSession,
    sync_bound,
)
from airflow_provider_dpone.cluster.clickhouse.oneshot import MutationGuard
from airflow_provider_dpone.cluster.ports import (
    ColumnSpec,
    DispatchSettings,
    DropTable,
    HostDdlState,
    TableRead,
    TableSpec,
)
from airflow_provider_dpone.cluster.values.authority.row import AuthorityRow
from airflow_provider_dpone.cluster.values.identities import member_id
from airflow_provider_dpone.cluster.values.inventory import AdmittedInventory, AdmittedMember, MemberEndpoint
from airflow_provider_dpone.core.errors import (
    AuthorityConflictError,
    ExchangeUnsupportedError,
    MutationRejectedError,
    OutcomeUnknownError,
    ReadBackOlderError,
    UnavailableError,
)

pytestmark = pytest.mark.adapter

KEY = "k" * 64
UUID = "00000000-0000-4000-8000-000000000001"
TOKEN = "0123456789abcdef" * 2


class Result:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.result_rows = rows


class Scripted:
    """A client whose reads and writes answer from queues of callables (rows, or an exception to raise)."""

    def __init__(self) -> None:
        self.reads: list[Callable[[], list[tuple[Any, ...]]]] = []
        self.writes: list[Callable[[], Any]] = []
        self.sent: list[str] = []
        self.queries: list[str] = []

    def query(self, statement: str, **_: Any) -> Result:
        self.queries.append(statement)
        return Result(self.reads.pop(0)())

    def command(self, statement: str, **_: Any) -> Any:
        self.sent.append(statement)
        return self.writes.pop(0)()

    raw_query = command

    def raw_insert(self, table: str, **kwargs: Any) -> Any:
        self.sent.append(f"INSERT {table}")
        for _chunk in kwargs["insert_block"]:
            pass
        return self.writes.pop(0)()


def rows(*values: tuple[Any, ...]) -> Callable[[], list[tuple[Any, ...]]]:
    return lambda: list(values)


def fail(error: Exception) -> Callable[[], Any]:
    def raise_() -> Any:
        raise error

    return raise_


def ok() -> Callable[[], Any]:
    return lambda: None


def authority_row(payload: str) -> AuthorityRow:
    return AuthorityRow(
        target_key=KEY,
        operation_id="op",
        fence_token="f",
        phase="LOCKED",
        dispatch_epoch=0,
        payload=payload,
        payload_sha256="a" * 64,
    )


def stored(payload: str, version: int) -> tuple[Any, ...]:
    row = authority_row(payload)
    return (row.target_key, row.operation_id, row.fence_token, row.phase, 0, row.payload, row.payload_sha256, version)


def store(client: Scripted) -> ClickHouseAuthorityStore:
    return ClickHouseAuthorityStore(Endpoint.over(client), "db", guard=MutationGuard())


LOST = OperationalError("Error executing HTTP request")


def refused(code: int, text: str = "server text that may name a host") -> DatabaseError:
    return DatabaseError(text, code=code)


NODE_EXISTS = (
    "Code: 999. DB::Exception: Transaction failed (Node exists): Op #0, path: /k/data/AWE=. (KEEPER_EXCEPTION)"
)
BAD_VERSION = (
    "Code: 999. DB::Exception: Transaction failed (Bad version): Op #0, path: /k/data/AWE=. (KEEPER_EXCEPTION)"
)
CONNECTION_LOSS = "Code: 999. Coordination::Exception: Connection loss, path /k/data/AWE=. (KEEPER_EXCEPTION)"


# --- authority ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (fail(refused(999, NODE_EXISTS)), AuthorityConflictError),
        (fail(refused(999, CONNECTION_LOSS)), OutcomeUnknownError),  # the multi may have applied
        (fail(refused(999)), OutcomeUnknownError),
        (fail(refused(60)), MutationRejectedError),
        (fail(LOST), OutcomeUnknownError),
    ],
)
def test_strict_insert_failures(answer: Callable[[], Any], expected: type[Exception]) -> None:
    client = Scripted()
    client.writes.append(answer)
    with pytest.raises(expected) as caught:
        store(client).create(authority_row("p"))
    assert "host" not in str(caught.value)


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (rows(stored("new", 4)), None),  # applied
        (rows(stored("other writer", 4)), AuthorityConflictError),  # someone else made 3 -> 4
        # older than the write (the caller holds version 3; versions only grow, rows are never deleted): a Keeper
        # server behind the write answered the read, so the write is not yet known, never a conflict
        (rows(stored("old", 3)), ReadBackOlderError),
        (rows(stored("old", 2)), ReadBackOlderError),
        (rows(), ReadBackOlderError),
        (rows(stored("later writer", 5)), OutcomeUnknownError),  # ours may have applied, then another
    ],
)
def test_compare_and_set_outcome_is_proven_by_the_versions_read_after_it(
    after: Callable[[], Any], expected: type[Exception] | None
) -> None:
    client = Scripted()
    client.reads.append(after)
    client.writes.append(ok())
    if expected is None:
        store(client).compare_and_set(authority_row("new"), 3)
    else:
        with pytest.raises(expected):
            store(client).compare_and_set(authority_row("new"), 3)
    assert len(client.sent) == 1 and client.reads == []  # one update, one read: no read before the write


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (BAD_VERSION, AuthorityConflictError),
        (CONNECTION_LOSS, OutcomeUnknownError),
        (NODE_EXISTS, AuthorityConflictError),
    ],
)
def test_a_keeper_failure_of_the_compare_and_set_is_a_conflict_only_when_keeper_refused_it(
    text: str, expected: type[Exception]
) -> None:
    """With no server-side resend, a lost Keeper reply surfaces as Code 999 without Keeper's refusal: unknown."""
    client = Scripted()
    client.writes.append(fail(refused(999, text)))
    with pytest.raises(expected):
        store(client).compare_and_set(authority_row("new"), 3)
    assert len(client.sent) == 1


def test_compare_and_set_without_a_read_back_is_unknown() -> None:
    client = Scripted()
    client.reads.append(fail(LOST))
    client.writes.append(ok())
    with pytest.raises(OutcomeUnknownError):
        store(client).compare_and_set(authority_row("new"), 3)


def test_authority_read_failure_is_unavailable() -> None:
    client = Scripted()
    client.reads.append(fail(LOST))
    with pytest.raises(UnavailableError):
        store(client).read(KEY)


# --- member session ----------------------------------------------------------------------------------------------

SPEC = TableSpec(columns=(ColumnSpec(name="id", type="UInt64"),))


class Handle:
    def __init__(self) -> None:
        from airflow_provider_dpone.cluster.values.receipts import ArtifactColumn, ArtifactReceipt

        self.receipt = ArtifactReceipt(
            sha256="a" * 64,
            byte_size=1,
            row_count=1,
            columns=(ArtifactColumn(name="id", type="UInt64"),),
            content_digest="c" * 64,
            replayable=True,
            content_digest_version=2,
        )

    def chunks(self) -> Any:
        yield b"x"


def session(client: Scripted) -> ClickHouseMemberSession:
    return ClickHouseMemberSession(Endpoint.over(client), "m0000000000000001", guard=MutationGuard())


@pytest.mark.parametrize(
    ("answer", "expected"), [(fail(refused(57)), MutationRejectedError), (fail(LOST), OutcomeUnknownError)]
)
def test_create_failures(answer: Callable[[], Any], expected: type[Exception]) -> None:
    client = Scripted()
    client.writes.append(answer)
    with pytest.raises(expected):
        session(client).create_table("db", "cand", UUID, SPEC)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        # DatabaseAtomic::renameTable: a kernel without renameat2 (src/Databases/DatabaseAtomic.cpp)
        (
            fail(refused(48, "RENAME EXCHANGE is not supported because exchanging files is not supported by the OS")),
            ExchangeUnsupportedError,
        ),
        # renameExchange: the filesystem answered EINVAL (src/Common/renameat2.cpp)
        (fail(refused(1, "System call renameat2() is not supported")), ExchangeUnsupportedError),
        (fail(refused(60)), MutationRejectedError),  # UNKNOWN_TABLE: an ordinary refusal
        (fail(LOST), OutcomeUnknownError),
    ],
)
def test_exchange_failures_name_an_os_or_filesystem_without_rename_exchange(
    answer: Callable[[], Any], expected: type[Exception]
) -> None:
    client = Scripted()
    client.writes.append(answer)
    with pytest.raises(expected) as raised:
        session(client).exchange_tables("db", "left", "right")
    assert type(raised.value) is expected
    assert client.sent == ["EXCHANGE TABLES `db`.`left` AND `db`.`right`"]


@pytest.mark.parametrize("answer", [fail(refused(241)), fail(LOST)])
def test_every_load_failure_after_sending_is_unknown(answer: Callable[[], Any]) -> None:
    client = Scripted()
    client.reads.append(rows((UUID,)))
    client.writes.append(answer)
    with pytest.raises(OutcomeUnknownError):
        session(client).load("db", "cand", UUID, Handle(), query_id="dpone-load-1", dedup_token="t")


def test_a_load_whose_artifact_fails_verification_while_streaming_is_invalid_not_unknown() -> None:
    from airflow_provider_dpone.core.errors import ArtifactInvalidError

    class Tampered(Handle):
        def chunks(self) -> Any:
            yield b"x"
            raise ArtifactInvalidError("artifact bytes changed")

    client = Scripted()
    client.reads.append(rows((UUID,)))
    client.writes.append(ok())
    with pytest.raises(ArtifactInvalidError):
        session(client).load("db", "cand", UUID, Tampered(), query_id="dpone-load-1", dedup_token="t")


@pytest.mark.parametrize("current", [rows(), rows(("00000000-0000-4000-8000-000000000002",))])
def test_load_and_drop_send_nothing_unless_the_name_holds_the_uuid(current: Callable[[], Any]) -> None:
    client = Scripted()
    client.reads += [current, current]
    with pytest.raises(MutationRejectedError):
        session(client).load("db", "cand", UUID, Handle(), query_id="dpone-load-1", dedup_token="t")
    with pytest.raises(MutationRejectedError):
        session(client).drop_table("db", "cand", UUID)
    assert client.sent == []


@pytest.mark.parametrize(
    ("parts_uuid", "content_uuid"), [(UUID, "another-uuid"), ("another-uuid", UUID)], ids=["content", "parts"]
)
def test_observation_refuses_content_of_a_table_that_changed_meanwhile(parts_uuid: str, content_uuid: str) -> None:
    client = Scripted()
    client.reads += [
        rows((UUID, "MergeTree", [("id", "UInt64", "")], ([("all_1_1_0", "ab")], 3, parts_uuid))),
        rows(([("all_1_1_0", 3, "7")], content_uuid)),  # the per-part content read (sql_digest.part_content)
    ]
    with pytest.raises(UnavailableError):
        session(client).observe_table(TableRead("db", "cand", with_content=True))


def test_observation_refuses_parts_listed_after_a_partial_read_of_another_table() -> None:
    from airflow_provider_dpone.cluster.values.part_digests import PartDigest, part_key

    known = (PartDigest(part=part_key("all_1_1_0", "ab"), rows=3, sum="0" * 63 + "7"),)
    listed = [("all_1_1_0", "ab"), ("all_2_2_0", "cd")]
    client = Scripted()
    client.reads += [
        rows((UUID, "MergeTree", [("id", "UInt64", "")], (listed, 4, UUID))),
        rows(([("all_2_2_0", 1, "5")], UUID)),  # only the part not known is read
        rows(((listed, 4, "another-uuid"),)),  # the listing after it: another table under the name
    ]
    with pytest.raises(UnavailableError):
        session(client).observe_table(TableRead("db", "cand", with_content=True, known_parts=known))
    assert "WHERE _part IN ('all_2_2_0')" in client.queries[1]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [(ok(), True), (fail(refused(159)), False), (fail(refused(60)), UnavailableError), (fail(LOST), UnavailableError)],
)
def test_sync_replica_maps_the_servers_timeout_to_not_yet(answer: Callable[[], Any], expected: Any) -> None:
    client = Scripted()
    client.writes.append(answer)
    if isinstance(expected, bool):
        assert session(client).sync_replica("db", "cand", timeout_seconds=5) is expected
    else:
        with pytest.raises(expected):
            session(client).sync_replica("db", "cand", timeout_seconds=5)
    assert client.sent == ["SYSTEM SYNC REPLICA `db`.`cand`"]


@pytest.mark.parametrize(
    ("requested", "read_timeout", "sent"),
    [(30, 300.0, 30), (30, None, 30), (30, 10.0, 8), (0.2, 300.0, 1), (2.5, 300.0, 3), (30, 2.0, 1)],
)
def test_the_sync_bound_ends_before_the_http_read_timeout(requested: float, read_timeout: Any, sent: int) -> None:
    assert sync_bound(requested, read_timeout) == sent
    if read_timeout is not None and read_timeout > SYNC_READ_MARGIN_SECONDS + 1:
        assert sent <= read_timeout - SYNC_READ_MARGIN_SECONDS


# --- cluster DDL -------------------------------------------------------------------------------------------------


def inventory() -> AdmittedInventory:
    members = tuple(
        AdmittedMember(
            member_id=member_id(1, replica),
            shard_num=1,
            replica_num=replica,
            endpoint=MemberEndpoint(host=f"ch-{replica}", port=9000),
        )
        for replica in (1, 2)
    )
    return AdmittedInventory(cluster="c", internal_replication=False, members=members, digest="9" * 64)


SETTINGS = DispatchSettings(correlation_token=TOKEN, query_digest="d" * 64, log_comment=f'{{"token":"{TOKEN}"}}')
DROP = DropTable(cluster="c", database="db", table="cand")


def ddl(client: Scripted) -> ClickHouseClusterDDL:
    return ClickHouseClusterDDL(Endpoint.over(client), guard=MutationGuard())


def test_a_complete_initiator_answer_maps_hosts_to_members() -> None:
    client = Scripted()
    client.writes.append(
        lambda: b"ch-1\t9000\t0\t\t1\t0\nCH-2\t9000\t57\terror text\t0\t0\nelsewhere\t9000\t0\t\t0\t0\n"
    )
    outcome = ddl(client).dispatch(inventory(), DROP, SETTINGS)
    assert outcome.finished == (member_id(1, 1),) and outcome.failed == (member_id(1, 2),)
    assert not outcome.timed_out


@pytest.mark.parametrize(
    ("answer", "timed_out"), [(fail(refused(159)), True), (fail(refused(57)), None), (fail(LOST), None)]
)
def test_dispatch_failures(answer: Callable[[], Any], timed_out: bool | None) -> None:
    client = Scripted()
    client.writes.append(answer)
    if timed_out:
        assert ddl(client).dispatch(inventory(), DROP, SETTINGS).timed_out
    else:
        with pytest.raises(OutcomeUnknownError):
            ddl(client).dispatch(inventory(), DROP, SETTINGS)


def test_queue_status_of_one_entry_maps_states_and_codes() -> None:
    client = Scripted()
    client.reads.append(
        rows(
            ("query-0000000007", "ch-1", 9000, "Finished", 0),
            ("query-0000000007", "ch-2", 9000, None, None),
            ("query-0000000007", "stranger", 9000, "Finished", 0),
        )
    )
    status = ddl(client).queue_status(inventory(), TOKEN)
    assert status is not None and status.entry == "query-0000000007"
    assert [(host.member_id, host.state) for host in status.hosts] == [
        (member_id(1, 1), HostDdlState.FINISHED),
        (member_id(1, 2), HostDdlState.UNKNOWN),
    ]


def test_two_entries_with_one_token_are_not_evidence() -> None:
    client = Scripted()
    client.reads.append(rows(("query-1", "ch-1", 9000, "Finished", 0), ("query-2", "ch-1", 9000, "Finished", 0)))
    with pytest.raises(UnavailableError):
        ddl(client).queue_status(inventory(), TOKEN)


class Recording(Scripted):
    """A client that also records the settings each read carried."""

    def __init__(self) -> None:
        super().__init__()
        self.read_settings: list[dict[str, Any]] = []

    def query(self, statement: str, **kwargs: Any) -> Result:
        self.read_settings.append(dict(kwargs.get("settings") or {}))
        return super().query(statement, **kwargs)


@pytest.mark.parametrize("engine", ["MergeTree", "Memory"], ids=["per-part", "one-read"])
def test_every_content_read_carries_the_server_side_verification_budget(engine: str) -> None:
    client = Recording()
    client.reads += [
        rows((UUID, engine, [("id", "UInt64", "")], ([("all_1_1_0", "ab")], 3, UUID))),
        rows(([("all_1_1_0", 3, "7")], UUID)) if engine == "MergeTree" else rows((3, "7", UUID)),
    ]
    budgeted = ClickHouseMemberSession(Endpoint.over(client), "m0000000000000001", verification_seconds=7)
    budgeted.observe_table(TableRead("db", "cand", with_content=True))
    assert client.read_settings[-1] == {"max_execution_time": 7, "timeout_overflow_mode": "throw"}
    assert "max_execution_time" not in client.read_settings[0]  # the metadata read is not a content read


@pytest.mark.parametrize("engine", ["MergeTree", "Memory"], ids=["per-part", "one-read"])
def test_a_content_read_stopped_at_the_budget_is_the_coded_unavailable_read(engine: str) -> None:
    from airflow_provider_dpone.core.errors import VerificationBudgetExceededError

    client = Scripted()
    client.reads += [
        rows((UUID, engine, [("id", "UInt64", "")], ([("all_1_1_0", "ab")], 3, UUID))),
        fail(refused(159, "Code: 159. DB::Exception: Timeout exceeded: elapsed 1.0 seconds. (TIMEOUT_EXCEEDED)")),
    ]
    with pytest.raises(VerificationBudgetExceededError, match="DPONE_CLICKHOUSE_CLUSTER_VERIFICATION_BUDGET_EXCEEDED"):
        session(client).observe_table(TableRead("db", "cand", with_content=True))
    other = Scripted()
    other.reads += [rows((UUID, engine, [("id", "UInt64", "")], ([("all_1_1_0", "ab")], 3, UUID))), fail(refused(60))]
    with pytest.raises(UnavailableError) as plain:
        session(other).observe_table(TableRead("db", "cand", with_content=True))
    assert not isinstance(plain.value, VerificationBudgetExceededError)


@pytest.mark.parametrize(("answer", "code"), [(rows((3, 7)), None), (fail(refused(159)), "VERIFICATION_BUDGET")])
def test_the_artifact_reference_digest_runs_under_the_budget_and_a_stopped_read_is_coded(
    answer: Callable[[], Any], code: str | None
) -> None:
    from airflow_provider_dpone.cluster.clickhouse.reference_digest import reference_digest
    from airflow_provider_dpone.core.errors import DponeError

    client = Recording()
    client.writes += [ok(), ok(), ok()]  # create, insert, drop
    client.reads.append(answer)
    endpoint = Endpoint.over(client)
    if code is None:
        assert reference_digest(endpoint, [("id", "UInt64")], [b""])[0] == 3
    else:
        with pytest.raises(DponeError, match=code):
            reference_digest(endpoint, [("id", "UInt64")], [b""])
    assert client.read_settings == [{"max_execution_time": 600, "timeout_overflow_mode": "throw"}]
