"""Runtime admission: pure decisions over inventory and catalog facts (one shard, >= 2 unique members, uniform flag
matching the mode, opaque ids, Atomic databases, the exact KeeperMap authority table, direct MergeTree targets)."""

from __future__ import annotations

import pytest

from airflow_provider_dpone.cluster.protocol.runtime_admission import (
    MAX_MEMBERS,
    admit_inventory,
    admit_runtime,
    require_atomic_databases,
    require_authority_table,
    require_ddl_entry_settings,
    require_member_identities,
)
from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_COLUMNS
from airflow_provider_dpone.cluster.values.identities import member_id
from airflow_provider_dpone.cluster.values.inventory import (
    AdmittedMember,
    ColumnFact,
    InventoryRow,
    MemberEndpoint,
    MemberFacts,
    TableFacts,
)
from airflow_provider_dpone.core.errors import REGISTRY, DponeError, UnavailableError
from tests.support.cluster.sim import COLUMNS, Sim, candidate_calls
from tests.support.fakes.publication import exact_authority_facts

pytestmark = pytest.mark.protocol


def _row(
    shard: int, replica: int, *, flag: bool = False, host: str | None = None, cluster: str = "c", version: int = 5
) -> InventoryRow:
    return InventoryRow(
        cluster=cluster,
        shard_num=shard,
        replica_num=replica,
        internal_replication=flag,
        endpoint=MemberEndpoint(host=host or f"h{shard}-{replica}", port=9000),
        ddl_entry_format_version=version,
    )


def _code(call: object) -> str:
    with pytest.raises(DponeError) as raised:
        call()  # type: ignore[operator]
    return raised.value.code


def test_the_member_count_budget_is_admitted_exactly() -> None:
    rows = [_row(1, replica) for replica in range(1, MAX_MEMBERS + 1)]
    assert len(admit_inventory(rows, cluster="c", mode="external").members) == MAX_MEMBERS


def test_admits_one_shard_of_independent_members_in_member_id_order() -> None:
    rows = [_row(1, 3), _row(1, 1), _row(1, 2), _row(1, 9, cluster="other")]
    inventory = admit_inventory(rows, cluster="c", mode="external")
    assert inventory.member_ids == tuple(sorted(member_id(1, r) for r in (1, 2, 3)))
    assert inventory.internal_replication is False
    again = admit_inventory(list(reversed(rows)), cluster="c", mode="external")
    assert again.digest == inventory.digest  # host order never changes identities
    moved = admit_inventory(
        [_row(1, 1, host="x"), _row(1, 2, host="y"), _row(1, 3, host="z")], cluster="c", mode="external"
    )
    assert moved.digest == inventory.digest  # endpoints never enter the digest


def test_endpoints_never_reach_a_serialized_or_printed_inventory() -> None:
    inventory = admit_inventory(
        [_row(1, 1, host="secret-host-a"), _row(1, 2, host="secret-host-b")], cluster="c", mode="external"
    )
    assert "secret-host" not in inventory.model_dump_json()
    assert "secret-host" not in repr(inventory) and "secret-host" not in str(inventory.members[0].endpoint)


@pytest.mark.parametrize(
    ("rows", "mode", "code"),
    [
        ([], "external", "DPONE_CLICKHOUSE_CLUSTER_NOT_DEFINED"),
        (
            [_row(1, 1, cluster="other"), _row(1, 2, cluster="other")],
            "external",
            "DPONE_CLICKHOUSE_CLUSTER_NOT_DEFINED",
        ),
        ([_row(1, 1), _row(2, 1)], "external", "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_MULTI_SHARD"),
        ([_row(1, 1)], "external", "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_TOO_FEW_MEMBERS"),
        (
            [_row(1, replica) for replica in range(1, MAX_MEMBERS + 2)],
            "external",
            "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_TOO_MANY_MEMBERS",
        ),
        ([_row(1, 1), _row(1, 1, host="other")], "external", "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_AMBIGUOUS"),
        (
            [_row(1, 1, host="same"), _row(1, 2, host="SAME")],
            "external",
            "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_AMBIGUOUS",
        ),
        ([_row(1, 1), _row(1, 2, flag=True)], "external", "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_MIXED_REPLICATION"),
        (
            [_row(1, 1, flag=True), _row(1, 2, flag=True)],
            "external",
            "DPONE_CLICKHOUSE_CLUSTER_REPLICATION_MODE_MISMATCH",
        ),
        ([_row(1, 1), _row(1, 2)], "internal", "DPONE_CLICKHOUSE_CLUSTER_REPLICATION_MODE_MISMATCH"),
    ],
)
def test_inventory_blockers(rows: list[InventoryRow], mode: str, code: str) -> None:
    assert _code(lambda: admit_inventory(rows, cluster="c", mode=mode)) == code  # type: ignore[arg-type]


def test_databases_must_be_atomic_everywhere() -> None:
    require_atomic_databases({"m1": "Atomic", "m2": "Atomic"})
    for bad in ("Ordinary", "Replicated", None):
        assert _code(lambda b=bad: require_atomic_databases({"m1": "Atomic", "m2": b})) == (
            "DPONE_CLICKHOUSE_CLUSTER_DATABASE_NOT_ATOMIC"
        )


def _facts(**changes: object) -> TableFacts:
    return exact_authority_facts().model_copy(update=changes)


def test_exact_authority_table_is_admitted_and_its_path_returned() -> None:
    assert require_authority_table({"m1": exact_authority_facts(), "m2": exact_authority_facts()}) == "/dpone/authority"
    with_capacity = _facts(engine_full="KeeperMap('/dpone/authority', 1000) PRIMARY KEY target_key")
    assert require_authority_table({"m1": with_capacity, "m2": with_capacity}) == "/dpone/authority"


@pytest.mark.parametrize(
    "facts",
    [
        None,
        _facts(engine="MergeTree", engine_full="MergeTree ORDER BY target_key"),
        _facts(engine_full="KeeperMap('/dpone/{shard}/authority') PRIMARY KEY target_key"),
        _facts(engine_full="KeeperMap('relative/path') PRIMARY KEY target_key"),
        _facts(engine_full="KeeperMap('/dpone/../authority') PRIMARY KEY target_key"),
        _facts(engine_full="KeeperMap('/dpone//authority') PRIMARY KEY target_key"),
        _facts(primary_key="operation_id"),
        _facts(columns=tuple(ColumnFact(name=n, type=t) for n, t in AUTHORITY_COLUMNS[:-1])),
        _facts(columns=tuple(ColumnFact(name=n, type="String") for n, _ in AUTHORITY_COLUMNS)),
        _facts(columns=tuple(ColumnFact(name=n, type=t, default_kind="DEFAULT") for n, t in AUTHORITY_COLUMNS)),
        _facts(columns=tuple(ColumnFact(name=n, type=t) for n, t in reversed(AUTHORITY_COLUMNS))),
    ],
)
def test_authority_table_deviations_are_refused(facts: TableFacts | None) -> None:
    code = _code(lambda: require_authority_table({"m1": exact_authority_facts(), "m2": facts}))
    assert code == "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TABLE_UNSUPPORTED"


def test_authority_facades_must_agree() -> None:
    other = exact_authority_facts("/dpone/other")
    assert _code(lambda: require_authority_table({"m1": exact_authority_facts(), "m2": other})) == (
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TABLE_UNSUPPORTED"
    )


def test_every_entry_point_runs_admission_before_touching_authority() -> None:
    sim = Sim.build()
    sim.world.members[1].databases[sim.world.database] = "Ordinary"
    with pytest.raises(DponeError) as raised:
        sim.service().fence()
    assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_DATABASE_NOT_ATOMIC"
    assert sim.world.calls["authority.read"] == 0 and sim.world.keeper == {}
    sim.world.members[1].databases[sim.world.database] = "Atomic"
    sim.world.authority_facts[sim.world.members[0].member_id] = None
    with pytest.raises(DponeError) as raised:
        sim.service().fence()
    assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TABLE_UNSUPPORTED"
    sim.world.authority_facts.clear()
    sim.world.internal_replication = True
    with pytest.raises(DponeError) as raised:
        sim.service().fence()
    assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_REPLICATION_MODE_MISMATCH"
    assert sim.world.keeper == {}


IDENTITY_MISMATCH = "DPONE_CLICKHOUSE_MEMBER_IDENTITY_MISMATCH"


@pytest.mark.parametrize("local", [((1, 2),), (), ((1, 1), (1, 2))])
def test_a_member_endpoint_must_mark_exactly_its_own_position_local(local: tuple[tuple[int, int], ...]) -> None:
    inventory = admit_inventory([_row(1, 1), _row(1, 2)], cluster="c", mode="external")
    first, second = inventory.members
    require_member_identities({first: ((1, 1),), second: ((1, 2),)})
    assert _code(lambda: require_member_identities({first: local, second: ((1, 2),)})) == IDENTITY_MISMATCH


def test_an_endpoint_answered_by_another_member_is_refused_before_anything_is_created() -> None:
    """Two members behind one server (the second member's endpoint reaches the first): the fence refuses before the
    authority is touched, and a stage of an existing fence refuses before any candidate DDL."""
    sim = Sim.build(members=3)
    members = [member.member_id for member in sim.world.members]
    sim.world.answered_by[members[2]] = members[0]
    assert _code(lambda: sim.service().fence()) == IDENTITY_MISMATCH
    assert sim.world.keeper == {} and sim.world.calls["authority.create"] == 0
    sim.world.answered_by.clear()
    assert sim.service().fence()
    fenced = dict(sim.world.keeper)
    sim.world.answered_by[members[1]] = members[2]
    assert _code(lambda: sim.service().stage(sim.source)) == IDENTITY_MISMATCH
    assert sim.world.keeper == fenced and sim.source.seals == 0
    assert not any(sim.world.calls[name] for name in ("member.load", "ddl.dispatch", "authority.cas"))
    assert candidate_calls(sim, "member.create") == 0 and candidate_calls(sim, "member.drop") == 0  # the probe only


DDL_ENTRY_FORMAT = "DPONE_CLICKHOUSE_CLUSTER_DDL_ENTRY_FORMAT_UNSUPPORTED"


@pytest.mark.parametrize(("version", "admitted"), [(0, False), (1, False), (2, True), (3, True), (5, True)])
def test_a_coordinator_that_queues_ddl_without_settings_is_refused(version: int, admitted: bool) -> None:
    rows = [_row(1, 1, version=version), _row(1, 2, version=version)]
    if admitted:
        require_ddl_entry_settings(rows)
    else:
        assert _code(lambda: require_ddl_entry_settings(rows)) == DDL_ENTRY_FORMAT
    assert _code(lambda: require_ddl_entry_settings([])) == DDL_ENTRY_FORMAT


def test_an_entry_format_without_settings_refuses_every_entry_point_before_anything_is_written() -> None:
    """The coordinator reports ``distributed_ddl_entry_format_version = 1`` for the connection's user: the fence
    refuses before the authority exists, and a stage and a publication of an existing fence before any member or
    cluster DDL, the authority unchanged."""
    sim = Sim.build()
    sim.world.ddl_entry_format_version = 1
    assert _code(lambda: sim.service().fence()) == DDL_ENTRY_FORMAT
    assert sim.world.keeper == {} and sim.world.calls["authority.create"] == 0
    sim.world.ddl_entry_format_version = 5
    assert sim.service().fence()
    fenced = dict(sim.world.keeper)
    sim.world.ddl_entry_format_version = 1
    assert _code(lambda: sim.service().stage(sim.source)) == DDL_ENTRY_FORMAT
    assert sim.world.keeper == fenced and sim.source.seals == 0
    assert not any(sim.world.calls[name] for name in ("member.load", "ddl.dispatch", "authority.cas"))
    assert candidate_calls(sim, "member.create") == 0 and candidate_calls(sim, "member.drop") == 0
    sim.world.ddl_entry_format_version = 2
    sim.service().stage(sim.source)
    staged = dict(sim.world.keeper)
    sim.world.ddl_entry_format_version = 1
    assert _code(lambda: sim.service().publish()) == DDL_ENTRY_FORMAT
    assert sim.world.keeper == staged and sim.world.calls["ddl.dispatch"] == 0


def test_request_validates_names_engine_and_order_by() -> None:
    sim = Sim.build()
    base = sim.request
    for changes, code in (
        ({"target": "bad name"}, "DPONE_IDENTIFIER_INVALID"),
        ({"database": "db`x"}, "DPONE_IDENTIFIER_INVALID"),
        (
            {"table": base.table.model_copy(update={"engine": "ReplicatedMergeTree"})},
            "DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED",
        ),
    ):
        with pytest.raises(DponeError) as raised:
            type(base).model_validate({**base.model_dump(), **changes})
        assert raised.value.code == code
    with pytest.raises(ValueError, match="order_by"):  # the candidate's table, completed with the stage's columns
        type(base).model_validate(
            {**base.model_dump(), "table": {**base.table.model_dump(), "order_by": ("missing",)}}
        ).candidate_table(COLUMNS)


def test_parse_maps_malformed_requests_to_a_stable_code_without_values() -> None:
    values = Sim.build().request.model_dump()
    assert type(Sim.build().request).parse(values) == Sim.build().request
    for changes in ({"normalized_plan_digest": "NOT-A-DIGEST"}, {"max_source_bytes": 0}, {"surprise": 1}):
        with pytest.raises(DponeError) as raised:
            type(Sim.build().request).parse({**values, **changes})
        assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_REQUEST_INVALID"
        assert "NOT-A-DIGEST" not in str(raised.value)


def test_a_cluster_the_coordinator_does_not_define_is_terminal_and_named() -> None:
    """A typo in the cluster name is not transient: no retry can make the coordinator define it."""
    with pytest.raises(DponeError) as raised:
        admit_inventory([_row(1, 1), _row(1, 2)], cluster="dpone_clustr", mode="external")
    assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_NOT_DEFINED" and not raised.value.retryable
    assert raised.value.detail == "cluster dpone_clustr"


class _OneMemberDown:
    """A catalog whose coordinator lists two members and whose second member does not answer."""

    def __init__(self, cluster: str) -> None:
        self.rows = (_row(1, 1, cluster=cluster), _row(1, 2, cluster=cluster))

    def inventory(self, cluster: str) -> tuple[InventoryRow, ...]:
        return self.rows

    def admission_facts(self, member: AdmittedMember, cluster: str, database: str, table: str) -> MemberFacts:
        if member.replica_num == 2:
            raise UnavailableError("connection refused")
        return MemberFacts(database_engine="Atomic", table=exact_authority_facts(), local_positions=((1, 1),))


@pytest.mark.parametrize("parallelism", [1, 4])
def test_a_member_that_does_not_answer_admission_is_named_with_its_cluster(parallelism: int) -> None:
    request = Sim.build().request
    with pytest.raises(DponeError) as raised:
        admit_runtime(_OneMemberDown(request.cluster), request, parallelism=parallelism)  # type: ignore[arg-type]
    assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE" and raised.value.retryable
    assert (
        raised.value.detail
        == f"cluster {request.cluster}: member {member_id(1, 2)} (shard 1, replica 2) did not answer"
    )
    assert REGISTRY[raised.value.code].retryable, "a member that is down may come back"
