"""``DponeNativeTransferOperator.execute`` on the real engine and a real PostgreSQL: identity, retry, failure rules.

Each call of ``execute`` is one Airflow try of the same task instance (same dag_id and run_id); the seams replace
only the connection lookups (the in-process engine has no network endpoint).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest import load_manifest
from airflow_provider_dpone.core.manifest.transfer import NativeTransferManifest
from airflow_provider_dpone.hooks.native_transfer import OperationIdentity
from airflow_provider_dpone.operators.native_transfer import DponeNativeTransferOperator
from tests.support.airflow.native_operator_env import (
    FlakyPublish,
    SourceSeam,
    context,
    create_source,
    factory,
    redaction_problems,
)
from tests.support.fixtures.object_store import StoreBackend
from tests.support.fixtures.target_harness import PostgresHarness
from tests.support.manifest_samples import EXAMPLES
from tests.support.transfer import native_chdb
from tests.support.transfer.native_route_chdb import read_rows
from tests.support.transfer.native_route_pg import PgRoute

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture(scope="module")
def admin():
    client = native_chdb.client()
    create_source(client)
    yield client
    client.close()


@pytest.fixture
def harness(postgres_server):
    created = PostgresHarness(postgres_server.dsn)
    yield created
    created.close()


def manifest_for(harness: PostgresHarness, **source_options: Any) -> NativeTransferManifest:
    loaded = load_manifest(EXAMPLES / "clickhouse_to_postgres_raw_snapshot.yaml")
    assert isinstance(loaded, NativeTransferManifest)
    raw = loaded.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw["sink"]["schema"] = harness.schema
    if source_options:
        raw["source"]["options"]["native_transfer"] = source_options
    return NativeTransferManifest.model_validate(raw)


def operator(harness: PostgresHarness, tmp_path, seam: SourceSeam, target: Any = None, **kwargs: Any):
    return DponeNativeTransferOperator(
        task_id="transfer",
        manifest=kwargs.pop("manifest", None) or manifest_for(harness),
        stage_base=kwargs.pop("stage_base", f"file://{tmp_path}"),
        connector_factory=seam,
        target_factory=factory(target)
        if target
        else lambda m: harness.bind(m.sink.table, m.sink.options.string_mapping),
        **kwargs,
    )


def published(harness: PostgresHarness, tmp_path) -> Any:
    return PgRoute(tmp_path, None, harness, table="raw_events").target_rows()  # type: ignore[arg-type]


def test_identity_is_the_run_and_the_plan_never_the_try(harness) -> None:
    manifest = manifest_for(harness)
    first = OperationIdentity(manifest, "dag", "run-1")
    assert first.operation_id == OperationIdentity(manifest, "dag", "run-1").operation_id
    assert first.operation_id != OperationIdentity(manifest, "dag", "run-2").operation_id
    assert first.operation_id != OperationIdentity(manifest, "other", "run-1").operation_id
    changed = manifest_for(harness, execution={"chunk_rows": 3})
    assert first.operation_id != OperationIdentity(changed, "dag", "run-1").operation_id
    assert first.target_key == OperationIdentity(changed, "dag", "run-1").target_key


def test_success_returns_redacted_evidence(admin, harness, tmp_path, postgres_server) -> None:
    evidence = operator(harness, tmp_path, SourceSeam()).execute(context())
    assert evidence["rows"] == 7 and evidence["chunks"] == 1 and evidence["state"] == "succeeded"
    assert evidence["source_snapshot"] == "exact_raw_rows" and evidence["source_connections"] == 1
    assert evidence["source_snapshot_profile_sha256"] and evidence["source_eof_descriptor_sha256"]
    assert published(harness, tmp_path) == read_rows(admin, "SELECT * FROM events.raw_events")
    secrets = [postgres_server.password, postgres_server.host, str(postgres_server.port), "raw_events", "events"]
    assert redaction_problems(evidence, secrets) == []


def test_openlineage_reports_the_source_and_target_tables_with_the_rows_moved(
    admin, harness, tmp_path, postgres_server, monkeypatch
) -> None:
    """As the OpenLineage listener extracts it on success; the connections are looked up for host and port only."""
    from airflow.providers.openlineage.extractors.manager import ExtractorManager
    from airflow.utils.state import TaskInstanceState
    from openlineage.client.serde import Serde

    monkeypatch.setenv(
        "AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", '{"conn_type": "dpone_clickhouse", "host": "ch-1", "port": 8443}'
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_POSTGRES_DEFAULT",
        json.dumps(
            {"conn_type": "postgres", "host": postgres_server.host, "port": postgres_server.port, "schema": "dw"}
        ),
    )
    task = operator(harness, tmp_path, SourceSeam())
    evidence = task.execute(context())
    run = SimpleNamespace(run_id="manual__lineage")
    metadata = ExtractorManager().extract_metadata(run, task, TaskInstanceState.SUCCESS, SimpleNamespace(task=task))
    (source,) = [Serde.to_dict(dataset) for dataset in metadata.inputs]
    (target,) = [Serde.to_dict(dataset) for dataset in metadata.outputs]
    assert (source["namespace"], source["name"]) == ("clickhouse://ch-1:8443", "events.raw_events")
    assert source["inputFacets"]["inputStatistics"]["rowCount"] == evidence["rows"] == 7
    assert target["namespace"] == f"postgres://{postgres_server.host}:{postgres_server.port}"
    assert target["name"] == f"dw.{harness.schema}.raw_events"
    assert target["outputFacets"]["outputStatistics"]["rowCount"] == 7


def test_retry_after_eof_completes_from_the_stage_without_the_source(admin, harness, tmp_path) -> None:
    seam = SourceSeam()
    flaky = FlakyPublish(harness.bind("raw_events"))
    task = operator(harness, tmp_path, seam, flaky)
    with pytest.raises(AirflowException, match=r"native_transfer\.publication_absent") as first:
        task.execute(context(try_number=1))
    assert not isinstance(first.value, AirflowFailException), "an absent publication is retryable"
    seam.deny = True
    evidence = task.execute(context(try_number=2))
    assert evidence["source_connections"] == 0 and seam.connector.connections == 1
    assert evidence["resumed_from"] == "publishing" and evidence["rows"] == 7
    assert published(harness, tmp_path) == read_rows(admin, "SELECT * FROM events.raw_events")


class _FailingStream:
    """Delegates to a real session; its data stream fails after the first block (a dropped connection)."""

    def __init__(self, session: Any) -> None:
        self._session = session

    @contextmanager
    def stream(self, query: Any) -> Iterator[Iterator[Any]]:
        with self._session.stream(query) as blocks:

            def failing() -> Iterator[Any]:
                yield next(iter(blocks))
                raise DponeError("native_transfer.source_query_failed", "server code 210 (simulated)")

            yield failing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def test_failure_before_eof_is_reextract_required_then_a_new_invocation(admin, harness, tmp_path) -> None:
    seam = SourceSeam()
    real_connect = seam.connector.connect
    seam.connector.connect = lambda: _FailingStream(real_connect())  # type: ignore[method-assign]
    manifest = manifest_for(harness, source_snapshot={"mode": "exact_raw_rows"}, execution={"chunk_rows": 2})
    task = operator(harness, tmp_path, seam, manifest=manifest)
    with pytest.raises(AirflowException, match=r"native_transfer\.reextract_required") as failed:
        task.execute(context(try_number=1))
    assert "source_query_failed" in str(failed.value) and not isinstance(failed.value, AirflowFailException)
    seam.connector.connect = real_connect  # type: ignore[method-assign]
    evidence = task.execute(context(try_number=2))
    assert evidence["invocations"] == 2 and evidence["rows"] == 7 and seam.connector.connections == 2


def test_a_later_try_failing_for_its_own_reason_is_not_named_after_an_earlier_settled_invocation(
    admin, harness, tmp_path
) -> None:
    seam = SourceSeam()
    real_connect = seam.connector.connect
    seam.connector.connect = lambda: _FailingStream(real_connect())  # type: ignore[method-assign]
    manifest = manifest_for(harness, source_snapshot={"mode": "exact_raw_rows"}, execution={"chunk_rows": 2})
    task = operator(harness, tmp_path, seam, manifest=manifest)
    with pytest.raises(AirflowException, match=r"native_transfer\.reextract_required"):
        task.execute(context(try_number=1))

    def unreachable() -> Any:
        raise DponeError("native_transfer.source_query_failed", "connection refused (simulated)")

    seam.connector.connect = unreachable  # type: ignore[method-assign]
    with pytest.raises(AirflowException) as second:
        task.execute(context(try_number=2))
    assert "native_transfer.source_query_failed" in str(second.value)
    assert "reextract_required" not in str(second.value), "try 2 settled nothing: try 1's invocation is not its own"
    seam.connector.connect = real_connect  # type: ignore[method-assign]
    assert task.execute(context(try_number=3))["rows"] == 7


def test_terminal_codes_fail_without_retry(admin, harness, tmp_path) -> None:
    legacy = manifest_for(harness, execution={"chunk_rows": 2})
    with pytest.raises(AirflowFailException, match=r"native_transfer\.replacing_raw_snapshot_required"):
        operator(harness, tmp_path, SourceSeam(), manifest=legacy).execute(context())
    blocked = manifest_for(harness, source_snapshot={"mode": "query_visible", "replica_scope": "connected_replica"})
    seam = SourceSeam(deny=True)
    with pytest.raises(AirflowFailException, match=r"native_transfer\.source_snapshot_mode_invalid"):
        operator(harness, tmp_path, seam, manifest=blocked).execute(context())
    assert seam.connector.connections == 0, "static admission refuses before any connection"


def test_guide_shows_the_real_plan_output() -> None:
    import io
    import json
    import re

    from airflow_provider_dpone.cli import run
    from tests.support.manifest_samples import REPO

    guide = (REPO / "docs" / "clickhouse-to-mssql.md").read_text(encoding="utf-8")
    documented = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", guide, re.DOTALL)]
    out, err = io.StringIO(), io.StringIO()
    assert run("plan", str(EXAMPLES / "clickhouse_to_mssql_raw_snapshot.yaml"), out, err) == 0
    actual = json.loads(out.getvalue())
    assert {"decision": actual["decision"], "declared": actual["declared"]} in documented


def test_hook_builds_the_adapters_from_airflow_connections(monkeypatch) -> None:
    import json

    from airflow_provider_dpone.hooks.native_transfer import DponeNativeTransferHook
    from airflow_provider_dpone.hooks.stage_store import stage_base
    from airflow_provider_dpone.transfer.targets.mssql.target import MsSqlTransferTarget
    from airflow_provider_dpone.transfer.targets.postgres.target import PostgresTransferTarget

    postgres = {"conn_type": "postgres", "host": "db.internal", "port": 5433, "login": "loader", "password": "pw-x9"}
    postgres |= {"schema": "warehouse", "extra": {"sslmode": "verify-full", "unrelated": "dropped"}}
    clickhouse = {"conn_type": "dpone_clickhouse", "host": "ch.internal", "port": 8443, "login": "reader"}
    clickhouse |= {"password": "pw-y7", "extra": {"secure": True}}
    monkeypatch.setenv("AIRFLOW_CONN_POSTGRES_DEFAULT", json.dumps(postgres))
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps(clickhouse))
    manifest = load_manifest(EXAMPLES / "clickhouse_to_postgres_raw_snapshot.yaml")
    assert isinstance(manifest, NativeTransferManifest)
    hook = DponeNativeTransferHook(manifest)
    dsn = hook.postgres_dsn(manifest.sink)  # type: ignore[arg-type]
    assert "host=db.internal" in dsn and "port=5433" in dsn and "dbname=warehouse" in dsn
    assert "sslmode=verify-full" in dsn and "unrelated" not in dsn
    assert isinstance(hook.target(), PostgresTransferTarget)
    assert hook.source_connector().connections == 0, "building the connector opens nothing"
    mssql = load_manifest(EXAMPLES / "clickhouse_to_mssql_raw_snapshot.yaml")
    assert isinstance(mssql, NativeTransferManifest)
    assert isinstance(DponeNativeTransferHook(mssql).target(), MsSqlTransferTarget)
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT", json.dumps({**clickhouse, "conn_type": "postgres"}))
    retyped = hook.source_connector()  # resolved at the first connect only: source-free recovery never reads it
    with pytest.raises(DponeError) as wrong:
        retyped.connect()
    assert wrong.value.code == "DPONE_CONNECTION_INVALID"
    monkeypatch.setenv("AIRFLOW__DPONE__NATIVE_TRANSFER_BASE", "file:///mnt/shared/dpone/")
    assert stage_base() == "file:///mnt/shared/dpone" and stage_base("file:///x") == "file:///x"


def test_a_worker_local_stage_is_refused_unless_the_deployment_declares_one_worker(monkeypatch) -> None:
    """Unset, the stage would live in one worker's temp directory: only a declared single worker may use it."""
    from airflow_provider_dpone.hooks.stage_store import stage_base

    monkeypatch.delenv("AIRFLOW__DPONE__NATIVE_TRANSFER_BASE", raising=False)
    monkeypatch.setenv("AIRFLOW__DPONE__SINGLE_WORKER", "False")
    with pytest.raises(DponeError) as refused:
        stage_base()
    assert refused.value.code == "native_transfer.stage_store_worker_local" and not refused.value.retryable
    assert stage_base("file:///mnt/x/") == "file:///mnt/x", "an explicit stage_base needs no declaration"
    monkeypatch.setenv("AIRFLOW__DPONE__SINGLE_WORKER", "True")
    assert stage_base().startswith("file://") and stage_base().endswith("dpone-native-transfer")


@pytest.mark.parametrize("where", ["config", "argument"])
def test_a_stage_base_whose_scheme_no_filesystem_serves_is_refused_before_anything(monkeypatch, where: str) -> None:
    """A typo in the scheme (or a store whose provider is not installed) is a coded terminal refusal, not a raw
    ``ValueError`` from the path library at the first write."""
    from airflow_provider_dpone.hooks.stage_store import stage_base

    monkeypatch.setenv("AIRFLOW__DPONE__NATIVE_TRANSFER_BASE", "s4://aws_default@bucket/dpone")
    with pytest.raises(DponeError) as refused:
        stage_base() if where == "config" else stage_base("s4://aws_default@bucket/dpone")
    assert refused.value.code == "native_transfer.stage_store_url_invalid" and not refused.value.retryable
    assert "'s4'" in refused.value.detail


def test_a_stage_store_that_accepts_a_second_write_is_refused_before_the_source_is_opened(
    harness, tmp_path, store_backend: StoreBackend
) -> None:
    """The create-once probe at task start, against a store that ignores conditional writes (on S3: moto behind a
    client that drops ``If-None-Match``): terminal, coded, nothing read and nothing left in the store."""
    seam = SourceSeam(deny=True)
    task = operator(harness, tmp_path, seam, stage_base=store_backend.url)
    with store_backend.ignoring_conditional_writes(), pytest.raises(AirflowFailException) as refused:
        task.execute(context())
    assert "native_transfer.stage_store_overwrites" in str(refused.value)
    assert seam.connector.connections == 0
    assert store_backend.objects() == [], "no journal record and no probe object"


def test_the_default_lease_and_the_examples_retries_fit_together() -> None:
    import datetime as dt

    from airflow_provider_dpone.operators.native_transfer import DEFAULT_LEASE_MINUTES, retries_outlast_lease

    # the examples: 3 retries 2 minutes apart; the last starts after a dead writer's default lease expired
    assert retries_outlast_lease(3, dt.timedelta(minutes=2), DEFAULT_LEASE_MINUTES)
    # the combination that spent every retry on custody_held: a 10-minute lease with the same retries
    assert not retries_outlast_lease(3, dt.timedelta(minutes=2), 10.0)
    assert retries_outlast_lease(0, dt.timedelta(minutes=2), 10.0), "no retries: nothing to spend"
    for example in ("clickhouse_to_mssql_raw_snapshot.py", "clickhouse_to_postgres_raw_snapshot.py"):
        text = (Path(__file__).resolve().parents[2] / "dags_examples" / example).read_text(encoding="utf-8")
        assert "retries=3," in text and "retry_delay=dt.timedelta(minutes=2)" in text
