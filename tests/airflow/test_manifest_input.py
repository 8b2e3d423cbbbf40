"""One reader of an operator's manifest input and one static-admission failure, the same for both routes.

Each operator is given a path, inline YAML text, a mapping or a model; each refuses another route's manifest; and an
inadmissible manifest fails every operator with its first blocker's code, one line naming every other code.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_dpone.admission import admit_static
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest import (
    ClusterPublicationManifest,
    NativeTransferManifest,
    load_manifest,
    parse_manifest,
    read_manifest_input,
)
from airflow_provider_dpone.operators.full_refresh import DponeFenceOperator
from airflow_provider_dpone.operators.native_transfer import DponeNativeTransferOperator
from tests.support.manifest_samples import EXAMPLES

pytestmark = pytest.mark.unit

CLUSTER = EXAMPLES / "clickhouse_external_full_refresh.yaml"
TRANSFER = EXAMPLES / "clickhouse_to_mssql_raw_snapshot.yaml"
KINDS = [(CLUSTER, ClusterPublicationManifest), (TRANSFER, NativeTransferManifest)]


def _two_blockers(path: Path) -> str:
    """The example's text, changed so that static admission finds two blockers."""
    text = path.read_text(encoding="utf-8")
    if path == CLUSTER:
        return text.replace("ddl_scope: cluster", "ddl_scope: local").replace("  max_source_bytes: 1073741824", "#")
    durable = "  table: raw_events\n  options:\n    durable_quality_replay: true\nload:"
    return (
        text.replace("mode: exact_raw_rows", "mode: query_visible")
        .replace("replica_scope: single_server", "replica_scope: connected_replica")
        .replace("  table: raw_events\nload:", durable)
    )


@pytest.mark.parametrize(("path", "kind"), KINDS, ids=["cluster", "transfer"])
def test_a_path_inline_yaml_a_mapping_or_a_model_is_the_same_manifest(path: Path, kind: type) -> None:
    model = load_manifest(path)
    inputs = [
        str(path),
        path,
        path.name,
        path.read_text(encoding="utf-8"),
        model.model_dump(mode="json", by_alias=True, exclude_none=True),
        model,
    ]
    read = [read_manifest_input(value, kind=kind, base_dir=path.parent) for value in inputs]
    assert all(isinstance(manifest, kind) and manifest == model for manifest in read)


@pytest.mark.parametrize(("path", "kind"), [(TRANSFER, ClusterPublicationManifest), (CLUSTER, NativeTransferManifest)])
def test_the_other_routes_manifest_is_refused_with_a_stable_code(path: Path, kind: type) -> None:
    with pytest.raises(DponeError) as refused:
        read_manifest_input(path.read_text(encoding="utf-8"), kind=kind)
    assert refused.value.code == "DPONE_MANIFEST_FIELD_INVALID" and refused.value.detail.startswith("sink.type: ")


def test_the_transfer_operator_accepts_inline_yaml_like_the_cluster_one() -> None:
    task = DponeNativeTransferOperator(task_id="transfer", manifest=TRANSFER.read_text(encoding="utf-8"))
    assert task._manifest() == load_manifest(TRANSFER)


@pytest.mark.parametrize("path", [CLUSTER, TRANSFER], ids=["cluster", "transfer"])
def test_both_operators_report_every_blocker_the_same_way(path: Path) -> None:
    text = _two_blockers(path)
    first, second = admit_static(parse_manifest(text)).blockers
    task: BaseOperator = (
        DponeFenceOperator(task_id="fence", manifest=text)
        if path == CLUSTER
        else DponeNativeTransferOperator(task_id="transfer", manifest=text)
    )
    context = {"dag_run": SimpleNamespace(dag_id="dag", run_id="run"), "dag": None}
    with pytest.raises(AirflowFailException) as failed:
        task.execute(context)  # type: ignore[arg-type]
    assert str(failed.value).startswith(f"{first.code}: ")
    unwrapped = " ".join(str(failed.value).split())  # the detail runs on over lines of at most 100 characters
    assert f"[{first.field}: {first.detail}; also {second.code}]" in unwrapped
