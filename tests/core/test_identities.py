"""Deterministic identities: golden vectors, exact derivations, and what must never enter an id."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.cluster.values import identities as ids
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import MAX_IDENTIFIER_LENGTH

pytestmark = pytest.mark.unit

PLAN = "5" * 64
TARGET_KEY = "ffc55aa66031de7b8501adfb6def59231aeb119c89addcca541c274e684ae623"
OPERATION = "6c47dd41409baff80f32c405d93fcee5804c6b1b2b20a736707dfe8a4de6c3ce"
SCHEMA = "efe5f6cc777337246a35d78f49175263582a062f1eb7164662a21fa271e18e58"
UUID1 = "00000000-0000-4000-8000-000000000001"


def _independent(tag: str, *parts: object) -> str:
    """The documented derivation, re-implemented without the library: SHA-256 of canonical JSON ``[tag, *parts]``."""
    text = json.dumps([tag, *parts], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_golden_vectors() -> None:
    assert ids.target_key("analytics", "analytics_db", "target_table") == TARGET_KEY
    assert (
        ids.operation_id(
            dag_id="external_refresh",
            run_id="scheduled__2026-09-18",
            target_key_hex=TARGET_KEY,
            normalized_plan_digest=PLAN,
        )
        == OPERATION
    )
    assert ids.member_id(1, 1) == "m629d3632c85884e6"
    assert ids.member_id(1, 2) == "maeb196b49c01b49d"
    assert ids.candidate_name("target_table", OPERATION) == "target_table__dpone_ext_6c47dd41409baff8"
    assert ids.schema_digest([("id", "UInt64"), ("name", "String")]) == SCHEMA
    assert (
        ids.generation_id(operation_id_hex=OPERATION, artifact_sha256="a" * 64, schema_digest_hex=SCHEMA, row_count=3)
        == "4a8212b516d06c77838cbf88d2e8949e961544d1a69b843412b276d9eabdeace"
    )
    assert (
        ids.inventory_digest(cluster="analytics", internal_replication=False, members=[(1, 2), (1, 1)])
        == "9931a367f27ec23ed04d07a75934db538ce780977c157418c418581265c7a182"
    )
    assert ids.load_query_id(operation_id_hex=OPERATION, member="m629d3632c85884e6", candidate_uuid=UUID1) == (
        "dpone-load-d00a99d50ba2a316b32b48a8619db7a9"
    )


def test_derivations_match_the_documented_formula() -> None:
    assert _independent(ids.TAG_TARGET_KEY, "analytics", "analytics_db", "target_table") == TARGET_KEY
    assert (
        _independent(
            ids.TAG_OPERATION_ID, ids.PROTOCOL_VERSION, ["external_refresh", "scheduled__2026-09-18"], TARGET_KEY, PLAN
        )
        == OPERATION
    )
    assert ids.member_id(3, 7) == "m" + _independent(ids.TAG_MEMBER_ID, 3, 7)[:16]
    gen = ids.generation_id(operation_id_hex=OPERATION, artifact_sha256="b" * 64, schema_digest_hex=SCHEMA, row_count=0)
    assert gen == _independent(ids.TAG_GENERATION_ID, OPERATION, "b" * 64, SCHEMA, 0)


def test_tags_are_versioned_and_distinct() -> None:
    tags = [value for name, value in vars(ids).items() if name.startswith("TAG_")]
    assert len(tags) == len(set(tags)) >= 9
    assert all(tag.endswith(".v1") for tag in tags)


def test_operation_id_depends_on_every_input_and_nothing_else() -> None:
    base = {"dag_id": "d", "run_id": "r", "target_key_hex": TARGET_KEY, "normalized_plan_digest": PLAN}
    reference = ids.operation_id(**base)
    assert ids.operation_id(**base) == reference  # same invocation, any try, any process
    for field, other in (
        ("dag_id", "d2"),
        ("run_id", "r2"),
        ("target_key_hex", "1" * 64),
        ("normalized_plan_digest", "2" * 64),
    ):
        assert ids.operation_id(**{**base, field: other}) != reference
    assert ids.operation_id(**base, protocol_version="other.v2") != reference
    # scheduler invocation is a pair: moving text between dag_id and run_id changes the id
    assert ids.operation_id(**{**base, "dag_id": "d_r", "run_id": "x"}) != ids.operation_id(
        **{**base, "dag_id": "d", "run_id": "r_x"}
    )


def test_inventory_digest_ignores_order_but_not_membership_or_mode() -> None:
    a = ids.inventory_digest(cluster="c", internal_replication=False, members=[(1, 1), (1, 2)])
    assert a == ids.inventory_digest(cluster="c", internal_replication=False, members=[(1, 2), (1, 1)])
    assert a != ids.inventory_digest(cluster="c", internal_replication=False, members=[(1, 1), (1, 2), (1, 3)])
    assert a != ids.inventory_digest(cluster="c", internal_replication=True, members=[(1, 1), (1, 2)])
    assert a != ids.inventory_digest(cluster="d", internal_replication=False, members=[(1, 1), (1, 2)])


def test_identity_signatures_take_no_try_number_host_or_randomness() -> None:
    import inspect

    forbidden = {"try_number", "attempt", "host", "hostname", "endpoint", "port", "address", "random", "seed"}
    for function in (ids.target_key, ids.operation_id, ids.member_id, ids.generation_id, ids.inventory_digest):
        assert not forbidden & set(inspect.signature(function).parameters)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=MAX_IDENTIFIER_LENGTH))
def test_candidate_name_is_bounded_and_keeps_the_operation_suffix(target: str) -> None:
    target = "t" + target[: MAX_IDENTIFIER_LENGTH - 1]
    name = ids.candidate_name(target, OPERATION)
    assert len(name) <= ids.MAX_CANDIDATE_NAME
    assert name.endswith(ids.CANDIDATE_INFIX + OPERATION[: ids.OPERATION_PREFIX_HEX])
    assert target.startswith(name[: -len(ids.CANDIDATE_INFIX) - ids.OPERATION_PREFIX_HEX])


def test_long_targets_are_truncated_deterministically_and_stay_distinct() -> None:
    long_a = "a" * 120 + "_x"
    long_b = "a" * 120 + "_y"
    op_a = ids.operation_id(
        dag_id="d", run_id="r", target_key_hex=ids.target_key("c", "db", long_a), normalized_plan_digest=PLAN
    )
    op_b = ids.operation_id(
        dag_id="d", run_id="r", target_key_hex=ids.target_key("c", "db", long_b), normalized_plan_digest=PLAN
    )
    name_a, name_b = ids.candidate_name(long_a, op_a), ids.candidate_name(long_b, op_b)
    assert len(name_a) == len(name_b) == ids.MAX_CANDIDATE_NAME
    assert name_a == ids.candidate_name(long_a, op_a)
    assert name_a != name_b


def test_member_ids_are_distinct_over_a_large_grid() -> None:
    grid = {ids.member_id(shard, replica) for shard in range(1, 41) for replica in range(1, 41)}
    assert len(grid) == 1600
    assert all(len(member) == 17 and member.startswith("m") for member in grid)


@pytest.mark.parametrize(
    "call",
    [
        lambda: ids.member_id(0, 1),
        lambda: ids.member_id(1, True),
        lambda: ids.operation_id(dag_id="", run_id="r", target_key_hex=TARGET_KEY, normalized_plan_digest=PLAN),
        lambda: ids.operation_id(dag_id="d", run_id="r", target_key_hex=TARGET_KEY, normalized_plan_digest="XYZ"),
        lambda: ids.generation_id(
            operation_id_hex=OPERATION, artifact_sha256="a" * 64, schema_digest_hex=SCHEMA, row_count=-1
        ),
        lambda: ids.schema_digest([]),
    ],
)
def test_malformed_inputs_fail_with_a_stable_code(call: object) -> None:
    with pytest.raises(DponeError) as raised:
        call()  # type: ignore[operator]
    assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_IDENTITY_INVALID"


def test_names_are_validated_as_identifiers() -> None:
    with pytest.raises(DponeError) as raised:
        ids.target_key("c", "db", "bad`name")
    assert raised.value.code == "DPONE_IDENTIFIER_INVALID"
