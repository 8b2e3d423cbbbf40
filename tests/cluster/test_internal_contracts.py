"""The internal (replicated) record, receipt and request: round trips in every phase, invariants, redaction, and the
mode rules a request enforces before anything is read."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from airflow_provider_dpone.admission import admit_static
from airflow_provider_dpone.cli import run
from airflow_provider_dpone.cluster.ports import DeclaredTable
from airflow_provider_dpone.cluster.protocol.request import PublicationRequest
from airflow_provider_dpone.cluster.values.authority.codec import decode, encode
from airflow_provider_dpone.cluster.values.authority.generation import DdlBinding
from airflow_provider_dpone.cluster.values.authority.internal import (
    INTERNAL_SCHEMA_V1,
    INTERNAL_SCHEMA_V2,
    InternalAuthorityRecordV1,
    LoadBinding,
    ReplicatedCandidate,
)
from airflow_provider_dpone.cluster.values.authority.phases import MemberStage, Phase
from airflow_provider_dpone.cluster.values.clickhouse_engines import MERGE_TREE_FAMILY
from airflow_provider_dpone.cluster.values.identities import (
    CANDIDATE_INFIX,
    INTERNAL_CANDIDATE_INFIX,
    candidate_name,
    member_id,
)
from airflow_provider_dpone.cluster.values.publication_receipts import (
    INTERNAL_RECEIPT_SCHEMA,
    InternalPublicationReceipt,
    internal_receipt,
)
from airflow_provider_dpone.core.canonical import canonical_json
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest import ClusterPublicationManifest
from tests.support.fakes.records import OTHER_OPERATION, SERVER, internal_record, token, uuid
from tests.support.manifest_samples import EXAMPLES, external, internal, load, storage_of

pytestmark = pytest.mark.unit

POST_COMMIT = (Phase.COMMITTED, Phase.CLEANUP_DISPATCHING, Phase.COMPLETED)


@pytest.mark.parametrize("phase", list(Phase))
@pytest.mark.parametrize("existing", [True, False])
@pytest.mark.parametrize("v2", [False, True])
def test_internal_records_round_trip_in_every_phase(phase: Phase, existing: bool, v2: bool) -> None:
    record = internal_record(phase, members=3, existing=existing, v2=v2)
    row = encode(record)
    assert decode(row) == record
    payload = json.loads(row.payload)
    assert payload["schema"] == (INTERNAL_SCHEMA_V2 if v2 else INTERNAL_SCHEMA_V1)
    assert payload["replication_mode"] == "internal" and canonical_json(payload) == row.payload
    assert ("quality" in payload) == v2  # v1 keeps its own encoding


def _replace(record: InternalAuthorityRecordV1, **changes: object) -> None:
    data = {name: getattr(record, name) for name in type(record).model_fields}
    data.update(changes)
    InternalAuthorityRecordV1.model_validate(data)


def test_staged_requires_the_replicated_candidate_ready() -> None:
    record = internal_record(Phase.STAGED)
    assert isinstance(record, InternalAuthorityRecordV1) and record.candidate is not None
    with pytest.raises(ValidationError, match="every member staged"):
        _replace(
            record,
            candidate=record.candidate.model_copy(update={"stage": MemberStage.CREATED}),
            members=tuple(
                member.model_copy(update={"row_count": None, "content_digest": None}) for member in record.members
            ),
        )
    with pytest.raises(ValidationError, match="requires the replicated candidate"):
        _replace(internal_record(Phase.STAGING), candidate=None)  # type: ignore[arg-type]


def test_every_replica_binds_exactly_the_shared_candidate() -> None:
    record = internal_record(Phase.STAGED)
    assert isinstance(record, InternalAuthorityRecordV1)
    other = (record.members[0].model_copy(update={"candidate_uuid": uuid(999)}), *record.members[1:])
    with pytest.raises(ValidationError, match="shared candidate UUID"):
        _replace(record, members=other)
    unverified = (record.members[0].model_copy(update={"row_count": None, "content_digest": None}), *record.members[1:])
    with pytest.raises(ValidationError, match="verified content"):
        _replace(record, members=unverified)


def test_the_load_goes_through_a_bound_replica() -> None:
    record = internal_record(Phase.STAGED)
    assert isinstance(record, InternalAuthorityRecordV1) and record.candidate is not None
    assert record.candidate.load is not None
    stranger = record.candidate.load.model_copy(update={"member_id": member_id(1, 9)})
    with pytest.raises(ValidationError, match="bound replica"):
        _replace(record, candidate=record.candidate.model_copy(update={"load": stranger}))


def test_candidate_stage_rules() -> None:
    shared = uuid(1)
    create = DdlBinding(
        kind="create", epoch=1, correlation_token=token(1), query_digest="b" * 64, permitted_at_ms=1, server=SERVER
    )
    drop = DdlBinding(
        kind="drop", epoch=2, correlation_token=token(2), query_digest="c" * 64, permitted_at_ms=2, server=SERVER
    )
    load = LoadBinding(
        member_id=member_id(1, 1), candidate_uuid=shared, query_id="dpone-load-" + "1" * 32, dedup_token="2" * 64
    )
    ReplicatedCandidate(stage=MemberStage.INTENDED, uuid_intent=shared, owned_uuids=(shared,))
    ReplicatedCandidate(stage=MemberStage.INTENDED, uuid_intent=shared, owned_uuids=(shared,), create=create)
    ReplicatedCandidate(
        stage=MemberStage.CREATED, uuid_intent=shared, owned_uuids=(shared,), create=create, load=load, drop=drop
    )
    invalid = [
        {"stage": MemberStage.PENDING},
        {"owned_uuids": (uuid(2),)},
        {"owned_uuids": (shared, shared)},
        {"stage": MemberStage.CREATED, "create": create},  # the load is bound with CREATED
        {"stage": MemberStage.CREATED, "load": load},  # after the reconciled CREATE
        {"load": load, "create": create},  # INTENDED binds no load
        {"stage": MemberStage.READY, "create": create, "load": load, "drop": drop},  # only CREATED is dropped
        {"create": drop},
        {"stage": MemberStage.CREATED, "create": create, "load": load.model_copy(update={"candidate_uuid": uuid(3)})},
        {"rebuilds": 17},
    ]
    for changes in invalid:
        values: dict[str, object] = {"stage": MemberStage.INTENDED, "uuid_intent": shared, "owned_uuids": (shared,)}
        values.update(changes)
        with pytest.raises(ValidationError):
            ReplicatedCandidate.model_validate(values)


@pytest.mark.parametrize("phase", POST_COMMIT)
@pytest.mark.parametrize("existing", [True, False])
def test_internal_receipt_is_built_only_from_committed_records_and_is_redacted(phase: Phase, existing: bool) -> None:
    record = internal_record(phase, members=3, existing=existing)
    receipt = internal_receipt(record, 12, {})
    assert isinstance(receipt, InternalPublicationReceipt)
    assert receipt.schema_ == INTERNAL_RECEIPT_SCHEMA and receipt.replication_mode == "internal"
    assert receipt.load_member_id == min(record.member_ids()) and receipt.rebuilds == 0
    assert [m.member_id for m in receipt.members] == list(record.member_ids())
    assert receipt.authority_version == 12 and receipt.publication_kind == ("exchange" if existing else "rename")
    text = receipt.to_json()
    for member in record.members:
        for value in (member.candidate_uuid, member.target_uuid):
            assert value is None or value not in text


@pytest.mark.parametrize("phase", [Phase.LOCKED, Phase.STAGING, Phase.STAGED, Phase.PUBLICATION_DISPATCHING])
def test_no_internal_receipt_before_commit(phase: Phase) -> None:
    with pytest.raises(DponeError) as raised:
        internal_receipt(internal_record(phase), 1, {})
    assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_RECEIPT_INVALID"


def _request(mode: str, engine: str) -> PublicationRequest:
    return PublicationRequest.model_validate(
        {
            "cluster": "analytics",
            "database": "analytics_db",
            "target": "target_table",
            "dag_id": "d",
            "run_id": "r",
            "normalized_plan_digest": "5" * 64,
            "replication_mode": mode,
            "table": DeclaredTable(engine=engine),
            "max_source_bytes": 10,
        }
    )


@pytest.mark.parametrize(
    ("mode", "engine", "admitted"),
    [
        ("internal", "ReplicatedMergeTree", True),
        ("internal", "ReplicatedReplacingMergeTree", True),
        ("internal", "MergeTree", False),
        ("internal", "SharedMergeTree", False),
        ("internal", "replicatedmergetree", False),
        ("external", "MergeTree", True),
        ("external", "ReplicatedMergeTree", False),
        ("external", "Distributed", False),
    ],
)
def test_the_request_engine_must_be_the_modes_engine_class(mode: str, engine: str, admitted: bool) -> None:
    if admitted:
        assert _request(mode, engine).replication_mode == mode
        return
    with pytest.raises(DponeError) as raised:
        _request(mode, engine)
    assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED"


def test_the_mode_is_explicit_and_the_modes_never_share_an_operation_or_a_candidate() -> None:
    with pytest.raises(DponeError) as raised:
        PublicationRequest.parse({**_request("external", "MergeTree").model_dump(), "replication_mode": None})
    assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_REQUEST_INVALID"
    internal, external = _request("internal", "ReplicatedMergeTree"), _request("external", "MergeTree")
    assert internal.target_key == external.target_key  # one authority slot per target
    assert internal.operation_id != external.operation_id
    assert INTERNAL_CANDIDATE_INFIX in internal.candidate_name and CANDIDATE_INFIX in external.candidate_name
    assert internal.candidate_name == candidate_name("target_table", internal.operation_id, INTERNAL_CANDIDATE_INFIX)
    with pytest.raises(DponeError):
        candidate_name("target_table", OTHER_OPERATION, "__other_")


ENGINES = sorted(MERGE_TREE_FAMILY) + ["Replicated" + family for family in sorted(MERGE_TREE_FAMILY)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("base", [internal, external])
def test_static_admission_and_the_request_agree_on_the_engine_of_each_mode(
    base: Callable[[], dict[str, Any]], engine: str
) -> None:
    """``dpone check``/``plan`` and the request the operators build from the same manifest never disagree: an internal
    manifest with a non-replicated engine (or external with a replicated one) is blocked statically, and the
    request refuses it as well."""
    raw = base()
    storage_of(raw).update(engine=engine)
    manifest = load(raw)
    assert isinstance(manifest, ClusterPublicationManifest) and manifest.cluster is not None
    result = admit_static(manifest)
    mode = manifest.cluster.replication_mode.value
    if result.admissible:
        assert _request(mode, engine).table.engine == engine
        return
    assert result.codes == ("DPONE_CLICKHOUSE_CLUSTER_ENGINE_MODE_MISMATCH",)
    with pytest.raises(DponeError) as raised:
        _request(mode, engine)
    assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED"


@pytest.mark.parametrize(
    ("name", "mode"),
    [("clickhouse_internal_full_refresh", "internal"), ("clickhouse_external_full_refresh", "external")],
)
def test_the_example_manifests_select_their_mode_and_nothing_else(name: str, mode: str) -> None:
    out = io.StringIO()
    assert run("check", str(EXAMPLES / f"{name}.yaml"), out, io.StringIO()) == 0
    assert json.loads(out.getvalue())["selected"] == f"cluster_{mode}"
    raw = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text(encoding="utf-8"))
    other = "MergeTree" if mode == "internal" else "ReplicatedMergeTree"
    storage_of(raw).update(engine=other)
    blocked = admit_static(load(raw))
    assert blocked.codes == ("DPONE_CLICKHOUSE_CLUSTER_ENGINE_MODE_MISMATCH",) and blocked.decision.selected is None
