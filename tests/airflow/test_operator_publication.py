"""The publication operators' own rules: inputs, identities, deferral default, outlets, failure classification."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import Asset
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_dpone.core.errors import REGISTRY, DponeError
from airflow_provider_dpone.hooks.clickhouse import hook_environment
from airflow_provider_dpone.operators import (
    DponeCleanupOperator,
    DponeFenceOperator,
    DponePublishOperator,
    DponeStageOperator,
)
from airflow_provider_dpone.operators.full_refresh import asset_uri, build_request, read_manifest, require_admissible
from airflow_provider_dpone.operators.reporting import (
    DponeRetryableError,
    DponeTerminalError,
    airflow_failure,
    raise_for,
)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "dags_examples" / "manifests" / "clickhouse_external_full_refresh.yaml"
TRANSFER = REPO / "dags_examples" / "manifests" / "clickhouse_to_mssql_raw_snapshot.yaml"
COLUMNS = (("id", "UInt64"), ("name", "String"))


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, event: str, *args: object) -> None:
        self.lines.append(event % args if args else event)

    warning = error = info


def test_manifest_from_a_path_inline_text_or_mapping_is_the_same_manifest() -> None:
    from_path = read_manifest(str(MANIFEST))
    from_text = read_manifest(MANIFEST.read_text(encoding="utf-8"))
    from_relative = read_manifest(MANIFEST.name, base_dir=MANIFEST.parent)
    from_mapping = read_manifest(from_path.model_dump(mode="json", exclude_none=True))
    assert from_path == from_text == from_relative == from_mapping


def test_a_transfer_manifest_is_refused_with_a_stable_code() -> None:
    with pytest.raises(DponeError) as caught:
        read_manifest(TRANSFER)
    assert caught.value.code == "DPONE_MANIFEST_FIELD_INVALID"


def test_an_inadmissible_manifest_fails_with_its_admission_code() -> None:
    text = MANIFEST.read_text(encoding="utf-8").replace("ddl_scope: cluster", "ddl_scope: local")
    with pytest.raises(DponeError) as caught:
        require_admissible(read_manifest(text))
    assert caught.value.code == "DPONE_CLICKHOUSE_CLUSTER_DDL_SCOPE_REQUIRED"


def test_an_artifact_source_fails_terminally_with_its_code_in_admission_and_in_the_default_environment() -> None:
    """Not a bare NotImplementedError that Airflow would retry: a registered, non-retryable code on both paths."""
    text = MANIFEST.read_text(encoding="utf-8")
    manifest = read_manifest(text)
    raw = manifest.model_dump(mode="json", exclude_none=True)
    raw["source"] = {"type": "artifact", "sha256": "ab" * 32, "store_uri": "file:///var/lib/dpone"}
    artifact_manifest = read_manifest(raw)
    code = "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_SOURCE_UNSUPPORTED"
    with pytest.raises(DponeError) as admitted:
        require_admissible(artifact_manifest)
    with pytest.raises(DponeError) as built:
        hook_environment(artifact_manifest, "dpone_clickhouse_default")
    assert admitted.value.code == built.value.code == code
    assert isinstance(airflow_failure(built.value), DponeTerminalError)


def test_the_operation_id_depends_on_the_dag_run_not_on_anything_per_try() -> None:
    manifest = read_manifest(MANIFEST)
    first = build_request(manifest, dag_id="d", run_id="manual__1")
    again = build_request(read_manifest(MANIFEST), dag_id="d", run_id="manual__1")
    other_run = build_request(manifest, dag_id="d", run_id="manual__2")
    assert first.operation_id == again.operation_id
    assert first.operation_id != other_run.operation_id
    assert first.target_key == other_run.target_key
    assert (first.table.engine, first.table.order_by) == ("MergeTree", ("id",))


def test_every_task_carries_the_admitted_row_budget_and_it_is_part_of_the_operation() -> None:
    raw = read_manifest(MANIFEST).model_dump(mode="json", exclude_none=True)
    raw["load"]["max_source_rows"] = 500
    budgeted = read_manifest(raw)
    fence = build_request(budgeted, dag_id="d", run_id="manual__1")
    stage = build_request(budgeted, dag_id="d", run_id="manual__1")
    assert fence.max_source_rows == stage.max_source_rows == 500 and fence.operation_id == stage.operation_id
    unbudgeted = build_request(read_manifest(MANIFEST), dag_id="d", run_id="manual__1")
    assert unbudgeted.max_source_rows is None and unbudgeted.operation_id != stage.operation_id


_PRINT_DEFAULTS = (
    "import sys\n"
    "from airflow_provider_dpone.operators import DponeCleanupOperator, DponePublishOperator\n"
    "manifest = sys.argv[1]\n"
    "print(DponePublishOperator(task_id='p', manifest=manifest).deferrable,"
    " DponeCleanupOperator(task_id='c', manifest=manifest).deferrable)\n"
)


def _defaults_in_a_fresh_process(home: Path, **variables: str) -> list[str]:
    """The ``deferrable`` defaults of publish and cleanup in a new interpreter with Airflow home ``home`` and exactly
    the given ``AIRFLOW__*`` variables: the default binds when the operator module is imported, as in a DAG parser."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("AIRFLOW__")}
    environment.update(AIRFLOW_HOME=str(home), AIRFLOW_CONFIG=str(home / "airflow.cfg"), **variables)
    done = subprocess.run(
        [sys.executable, "-c", _PRINT_DEFAULTS, str(MANIFEST)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()[-2:]


@pytest.mark.parametrize(
    ("config", "variables", "expected"),
    [
        pytest.param(None, {}, "False", id="unset"),
        pytest.param(None, {"AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "true"}, "True", id="env-true"),
        pytest.param("false", {"AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "true"}, "True", id="env-over-cfg"),
        pytest.param("true", {}, "True", id="cfg-true"),
        pytest.param("false", {}, "False", id="cfg-false-like-a-fresh-airflow-cfg"),
    ],
)
def test_deferrable_defaults_to_operators_default_deferrable_and_false_when_unset(
    tmp_path: Path, config: str | None, variables: dict[str, str], expected: str
) -> None:
    if config is not None:
        (tmp_path / "airflow.cfg").write_text(f"[operators]\ndefault_deferrable = {config}\n", encoding="utf-8")
    assert _defaults_in_a_fresh_process(tmp_path, **variables) == [expected, expected]


def test_an_explicit_deferrable_argument_wins_over_the_default() -> None:
    assert DponePublishOperator(task_id="p", manifest=MANIFEST, deferrable=True).deferrable is True
    assert DponeCleanupOperator(task_id="c", manifest=MANIFEST, deferrable=False).deferrable is False


def test_publish_declares_the_target_asset_without_any_host() -> None:
    operator = DponePublishOperator(task_id="publish", manifest=MANIFEST)
    assert operator.outlets == [Asset(uri="clickhouse-cluster://dpone_cluster/analytics/target_table")]
    assert asset_uri(read_manifest(MANIFEST)) == "clickhouse-cluster://dpone_cluster/analytics/target_table"
    explicit = Asset(uri="clickhouse-cluster://other/db/t")
    assert DponePublishOperator(task_id="p2", manifest=MANIFEST, outlets=[explicit]).outlets == [explicit]
    assert not DponeFenceOperator(task_id="f", manifest=MANIFEST).outlets


@pytest.mark.parametrize("code", sorted(REGISTRY))
def test_every_code_is_either_retryable_or_terminal_with_the_advice_on_its_own_line(code: str) -> None:
    """The code, short cause and outcome on the first line; the detail, the cause and the next action below it, each
    on lines of their own: a log view that cuts long lines at its edge still shows the code, detail and advice."""
    log = _Log()
    error = DponeError(code, "member 1:2 (m0123456789abcdef)")
    with pytest.raises(AirflowException) as caught:
        raise_for(error, log)
    outcome = "retryable" if error.retryable else "terminal: no retry"
    entry = REGISTRY[code]
    assert log.lines[0] == f"{code}: {entry.summary} ({outcome})"
    assert log.lines[1] == "  [member 1:2 (m0123456789abcdef)]"
    advice = log.lines.index(next(line for line in log.lines if line.startswith("Next: ")))
    assert " ".join(line.strip() for line in log.lines[2:advice]) == entry.cause
    assert " ".join(line.strip() for line in log.lines[advice:]) == f"Next: {entry.action}"
    assert all(len(line) <= 100 or " " not in line.strip() for line in log.lines)
    assert str(caught.value) == "\n".join(error.lines()) and str(caught.value).startswith(f"{code}: ")
    if REGISTRY[code].retryable:
        assert isinstance(caught.value, DponeRetryableError)
        assert not isinstance(caught.value, AirflowFailException)
    else:
        assert isinstance(caught.value, DponeTerminalError)
        assert isinstance(caught.value, AirflowFailException), "terminal failures must not consume retries"


def test_fenced_drift_and_tampering_are_terminal_and_transient_failures_retry() -> None:
    terminal = {
        "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED",
        "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_DRIFT",
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_DIGEST_MISMATCH",
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_RECORD_INVALID",
        "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_MIXED",
    }
    transient = {
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_UNAVAILABLE",
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_OUTCOME_UNKNOWN",
        "DPONE_CLICKHOUSE_CLUSTER_MEMBER_OUTCOME_UNKNOWN",
        "DPONE_CLICKHOUSE_CLUSTER_DDL_QUEUE_UNAVAILABLE",
    }
    assert not any(REGISTRY[code].retryable for code in terminal)
    assert all(REGISTRY[code].retryable for code in transient)


def test_manifest_and_connection_ids_are_templated_as_a_mapping_or_a_path(tmp_path: Path) -> None:
    content = read_manifest(MANIFEST).model_dump(mode="json", exclude_none=True)
    content["sink"]["table"] = "{{ params.table }}"
    fence = DponeFenceOperator(task_id="fence", manifest=content, dpone_clickhouse_conn_id="{{ params.conn }}")
    assert set(fence.template_fields) >= {"manifest", "dpone_clickhouse_conn_id"}
    fence.render_template_fields({"params": {"table": "daily_2026_04_01", "conn": "ch_prod"}})
    assert read_manifest(fence.manifest).sink.table == "daily_2026_04_01"
    assert fence.dpone_clickhouse_conn_id == "ch_prod"
    assert content["sink"]["table"] == "{{ params.table }}", "the DAG's own mapping is not rewritten"

    (tmp_path / "prod").mkdir()
    (tmp_path / "prod" / "m.yaml").write_text(MANIFEST.read_text(encoding="utf-8"), encoding="utf-8")
    stage = DponeStageOperator(task_id="stage", manifest=f"{tmp_path}/{{{{ params.env }}}}/m.yaml")
    stage.render_template_fields({"params": {"env": "prod"}})
    assert read_manifest(stage.manifest) == read_manifest(MANIFEST)


def test_the_native_transfer_manifest_and_stage_base_are_templated() -> None:
    from airflow_provider_dpone.core.manifest import NativeTransferManifest, read_manifest_input
    from airflow_provider_dpone.operators.native_transfer import DponeNativeTransferOperator

    task = DponeNativeTransferOperator(
        task_id="transfer", manifest=str(TRANSFER).replace("mssql", "{{ params.sink }}"), stage_base="s3://b/{{ ds }}"
    )
    task.render_template_fields({"params": {"sink": "mssql"}, "ds": "2026-09-01"})
    assert task.stage_base == "s3://b/2026-09-01"
    assert read_manifest_input(task.manifest, kind=NativeTransferManifest).sink.type == "mssql"


INTERNAL = REPO / "dags_examples" / "manifests" / "clickhouse_internal_full_refresh.yaml"


def test_the_internal_manifest_builds_an_internal_request_with_its_partition_key() -> None:
    manifest = read_manifest(INTERNAL)
    request = build_request(manifest, dag_id="d", run_id="r")
    assert (request.replication_mode, request.table.engine) == ("internal", "ReplicatedMergeTree")
    assert request.table.partition_by == "toYYYYMM(updated_at)" and request.table.order_by == ("id",)
    other = read_manifest(MANIFEST)
    external = build_request(other, dag_id="d", run_id="r")
    assert external.replication_mode == "external" and external.operation_id != request.operation_id


def test_the_convergence_bound_is_a_deployment_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_dpone.cluster.protocol.context import ProtocolSettings
    from airflow_provider_dpone.hooks.publication import protocol_settings

    assert protocol_settings() == ProtocolSettings()
    monkeypatch.setenv("AIRFLOW__DPONE__REPLICA_SYNC_TIMEOUT_SECONDS", "7.5")
    assert protocol_settings().replica_sync_timeout_seconds == 7.5


def test_the_rollback_switch_of_external_mode_is_a_deployment_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_dpone.hooks.publication import protocol_settings

    assert protocol_settings().external_admission  # on unless the deployment rolls external mode back
    monkeypatch.setenv("AIRFLOW__DPONE__EXTERNAL_REPLICATION_ADMISSION", "False")
    assert not protocol_settings().external_admission


def test_the_void_proofs_margins_come_from_the_connection_and_the_deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
    from airflow_provider_dpone.core.errors import DponeError
    from airflow_provider_dpone.hooks.publication import protocol_settings

    options = ClickHouseConnectionOptions(connect_timeout_seconds=2, send_receive_timeout_seconds=7)
    assert protocol_settings(options).send_timeout_ms == 9_000
    assert protocol_settings().void_skew_margin_ms == 60_000  # the safe default
    monkeypatch.setenv("AIRFLOW__DPONE__VOID_SKEW_MARGIN_SECONDS", "5")
    assert protocol_settings(options).void_skew_margin_ms == 5_000
    monkeypatch.setenv("AIRFLOW__DPONE__VOID_SKEW_MARGIN_SECONDS", "-1")
    with pytest.raises(DponeError) as raised:
        protocol_settings(options)
    assert raised.value.code == "DPONE_CLICKHOUSE_CLUSTER_REQUEST_INVALID"


@pytest.mark.parametrize("margin", [-1, 0])
def test_the_void_permit_operator_refuses_a_margin_that_is_not_positive_when_the_dag_is_parsed(margin: int) -> None:
    from airflow_provider_dpone.operators import DponeVoidPermitOperator

    with pytest.raises(ValueError, match="skew_margin_seconds"):
        DponeVoidPermitOperator(
            task_id="v", manifest=str(MANIFEST), target_dag_id="d", target_run_id="r", skew_margin_seconds=margin
        )


def test_the_void_permit_operator_passes_a_templated_retired_server_uuid_and_none_when_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``retired_server_uuid`` is templated (the maintenance DAG's param); an empty value means no retired server."""
    from types import SimpleNamespace

    from airflow_provider_dpone.cluster.protocol.context import ProtocolSettings
    from airflow_provider_dpone.cluster.protocol.service import PublicationService
    from airflow_provider_dpone.operators import DponeVoidPermitOperator

    operator = DponeVoidPermitOperator(
        task_id="v", manifest=str(MANIFEST), target_dag_id="d", target_run_id="r", retired_server_uuid=""
    )
    assert "retired_server_uuid" in operator.template_fields
    seen: list[str | None] = []

    def void_permit(self: PublicationService, *, retired_server_uuid: str | None = None) -> Any:
        seen.append(retired_server_uuid)
        raise RuntimeError("stop here")

    monkeypatch.setattr(PublicationService, "void_permit", void_permit)
    session = SimpleNamespace(environment=SimpleNamespace(ports=None, settings=ProtocolSettings()), request=None)
    for value, expected in (
        ("", None),
        ("5e1f0000-0000-4000-8000-000000000001", "5e1f0000-0000-4000-8000-000000000001"),
    ):
        operator.retired_server_uuid = value
        with pytest.raises(RuntimeError, match="stop here"):
            operator._act(session)  # type: ignore[arg-type]
        assert seen[-1] == expected


def test_a_task_environment_looks_its_coordinator_connection_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each lookup is a round trip to Airflow (and its secrets backend): the adapters, the protocol settings and the
    member connections of one task try share one resolution."""
    from airflow.sdk import Connection

    from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

    manifest = read_manifest(MANIFEST)
    conn_id = manifest.sink.connection_id
    looked_up: list[str] = []
    connection = Connection(conn_id=conn_id, conn_type="dpone_clickhouse", host="coordinator.invalid", port=8123)

    def lookup(cls: type, requested: str) -> Connection:
        looked_up.append(requested)
        return connection

    monkeypatch.setattr(DponeClickHouseHook, "get_connection", classmethod(lookup))
    environment = hook_environment(manifest, conn_id, ddl_task_timeout_seconds=30)
    try:
        assert environment.settings.send_timeout_ms > 0 and environment.member_connections is not None
        assert looked_up == [conn_id]
    finally:
        environment.close()


QUALITY = REPO / "dags_examples" / "manifests" / "clickhouse_internal_quality_replay.yaml"


class _NoEnvironmentError(Exception):
    """The ports factory was reached: the task got past the manifest's admission."""


def _no_environment(*args: object, **kwargs: object) -> None:
    raise _NoEnvironmentError


def _task_context() -> Any:
    from types import SimpleNamespace

    return {"dag_run": SimpleNamespace(dag_id="d", run_id="r"), "dag": None}


@pytest.mark.parametrize("operator", [DponeFenceOperator, DponeStageOperator, DponePublishOperator])
def test_a_templated_manifest_is_refused_with_durable_quality_replay(operator: type) -> None:
    """Seed 002: the replayed configuration is source-free and exhaustive, and templates are unsupported. A manifest
    Jinja changed is refused before any connection; the same manifest without templates, and a templated manifest
    without durable replay, reach the environment."""
    content = read_manifest(QUALITY).model_dump(mode="json", exclude_none=True)
    templated = {**content, "sink": {**content["sink"], "table": "{{ params.table }}"}}
    task = operator(task_id="t", manifest=templated, ports_factory=_no_environment)
    task.render_template_fields({"params": {"table": content["sink"]["table"]}})
    with pytest.raises(AirflowFailException, match=r"(?s)DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED.*templated"):
        task.execute(_task_context())

    plain = operator(task_id="t", manifest=content, ports_factory=_no_environment)
    plain.render_template_fields({"params": {}})
    with pytest.raises(_NoEnvironmentError):
        plain.execute(_task_context())

    without_replay = {**templated, "sink": {**templated["sink"], "options": {**templated["sink"]["options"]}}}
    without_replay["sink"]["options"]["durable_quality_replay"] = False
    without_replay.pop("quality", None)
    task = operator(task_id="t", manifest=without_replay, ports_factory=_no_environment)
    task.render_template_fields({"params": {"table": content["sink"]["table"]}})
    with pytest.raises(_NoEnvironmentError):
        task.execute(_task_context())


def test_a_publish_task_with_a_templated_manifest_parses_without_a_default_outlet() -> None:
    content = read_manifest(MANIFEST).model_dump(mode="json", exclude_none=True)
    content["sink"]["table"] = "{{ params.table }}"
    task = DponePublishOperator(task_id="publish", manifest=content)
    assert task.outlets == []
    assert DponePublishOperator(task_id="publish", manifest=MANIFEST).outlets  # untemplated: the target's asset


def test_a_fence_that_describes_the_source_admits_the_cluster_first() -> None:
    """With a column-observing quality policy the fence describes the source (metadata only); a cluster whose
    ``internal_replication`` flag does not match the manifest's mode is refused before that, as without the policy."""
    from tests.support.airflow.dpone_airflow_fakes import FakeDeployment

    content = read_manifest(QUALITY).model_dump(mode="json", exclude_none=True)
    content["quality"] = {"target_metrics": ["row_count", "null_count"], "target_columns": ["id"]}
    manifest = read_manifest(content)
    assert manifest.quality_policy is not None and manifest.quality_policy.observes_columns
    deployment = FakeDeployment.build(manifest, rows=[(1, "a")])  # internal manifest, internal_replication=false
    fence = DponeFenceOperator(task_id="fence", manifest=content, ports_factory=deployment.factory())
    with pytest.raises(AirflowFailException, match="REPLICATION_MODE_MISMATCH"):
        fence.execute(_task_context())
    assert deployment.table_calls == 0  # the source was never described
    assert deployment.world.keeper == {}
