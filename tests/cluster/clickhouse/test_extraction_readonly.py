"""The cluster extraction runs read-only with the provider's limits, on the real engine (chdb) behind HTTP.

What ClickHouse does, and where (``src/Access/SettingsConstraints.cpp``, ``SettingsConstraints::getChecker``):
``readonly = 1`` refuses a change of any setting not made ``CHANGEABLE_IN_READONLY`` by the account's profile
(Code 164, ``READONLY``), so a query-level ``SETTINGS`` clause cannot lift a limit; ``readonly = 2`` refuses only a
change of ``readonly`` itself and would let ``max_execution_time = 0`` through, which is why the extraction uses 1.
The request's own settings are checked together against the account's profile before they apply (``HTTPHandler``:
"if initially readonly = 0, the client can change any setting and then set readonly to some other value"), so
``readonly = 1`` does not forbid its companions. Each case below runs that on the engine itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import ObjectStoragePath
from clickhouse_connect.driver.exceptions import DatabaseError

from airflow_provider_dpone.cluster.clickhouse.artifact_source import (
    EXTRACTION_SECONDS,
    QueryArtifactSource,
    extraction_settings,
)
from airflow_provider_dpone.cluster.clickhouse.artifact_store import ObjectStorageArtifactStore
from airflow_provider_dpone.cluster.clickhouse.endpoint import Endpoint
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.hooks.clickhouse import describe_query
from tests.cluster.clickhouse.test_ch_adapters import COLUMNS, connection_to, query_extraction

pytestmark = [pytest.mark.integration, pytest.mark.embedded_cluster(members=2)]

READONLY = 164
CHANGES = ("max_execution_time = 0", "readonly = 0", "max_memory_usage = 123456789", "max_threads = 1")
"""A setting the query sets to the value it already has is no change and is not checked (``checkImpl``: "Setting
isn't checked if value has not changed"), so each case changes its setting: an unlimited memory bound is already 0
on this engine, and a profile's real bound would be changed by ``max_memory_usage = 0`` just the same."""


@pytest.fixture
def coordinator(embedded_cluster: Any) -> Any:
    endpoint = Endpoint.of(connection_to(embedded_cluster, "coordinator"))
    yield endpoint
    endpoint.close()


def _server_code(coordinator: Endpoint, sql: str, settings: dict[str, Any]) -> int | None:
    try:
        coordinator.reader().query(sql, settings=settings)
    except DatabaseError as error:
        return getattr(error, "code", None)
    return None


@pytest.mark.parametrize("change", CHANGES)
def test_under_the_extraction_settings_the_engine_refuses_a_query_that_changes_a_setting(
    coordinator: Endpoint, change: str
) -> None:
    assert _server_code(coordinator, f"SELECT 1 SETTINGS {change}", extraction_settings()) == READONLY
    assert _server_code(coordinator, f"SELECT 1 SETTINGS {change}", {}) is None  # the control: no readonly


def test_readonly_2_would_let_a_query_lift_the_time_bound_but_not_readonly(coordinator: Endpoint) -> None:
    """Why the extraction uses readonly = 1: the transfer's readonly = 2 admits every query-level setting but one."""
    loose = {**extraction_settings(), "readonly": 2}
    assert _server_code(coordinator, "SELECT 1 SETTINGS max_execution_time = 0", loose) is None
    assert _server_code(coordinator, "SELECT 1 SETTINGS readonly = 0", loose) == READONLY


def test_the_provider_limits_are_in_effect_for_the_query(coordinator: Endpoint) -> None:
    rows = (
        coordinator.reader()
        .query(
            "SELECT getSetting('readonly'), getSetting('max_execution_time'), getSetting('timeout_overflow_mode')",
            settings=extraction_settings(),
        )
        .result_rows
    )
    [(readonly, seconds, overflow)] = rows
    assert (int(readonly), float(seconds), str(overflow)) == (1, EXTRACTION_SECONDS, "throw")


def test_a_manifest_query_that_lifts_a_limit_extracts_nothing(coordinator: Endpoint, tmp_path: Path) -> None:
    """The extraction itself, past static admission (which refuses the clause first): the server refuses the query,
    the extraction fails with its code and no artifact is committed; the same query without the clause seals."""
    store = ObjectStorageArtifactStore(ObjectStoragePath(f"file://{tmp_path}/artifacts"))
    query = "SELECT number AS id, toString(number) AS name FROM numbers(1000)"

    def extraction(sql: str) -> QueryArtifactSource:
        return query_extraction(coordinator, store, sql, 1 << 22)

    with pytest.raises(DponeError) as refused:
        extraction(f"{query} SETTINGS max_execution_time = 0").seal()
    assert refused.value.code == "DPONE_ARTIFACT_EXTRACTION_FAILED"
    assert [path for path in (tmp_path / "artifacts").rglob("*") if path.is_file()] == []
    assert describe_query(coordinator, query) == COLUMNS  # the DESCRIBE runs read-only too (it reads no row)
    assert extraction(query).seal().row_count == 1000


def test_a_callers_settings_go_with_the_extraction_but_never_over_the_provider_limits(
    coordinator: Endpoint, tmp_path: Path
) -> None:
    """A caller's request settings (the contract suite's small blocks) travel with the extraction; ones that would
    lift the provider's limits are overridden, so the server still stops the read at the provider's time bound."""
    store = ObjectStorageArtifactStore(ObjectStoragePath(f"file://{tmp_path}/artifacts"))
    slow = "SELECT number AS id, toString(sleepEachRow(0.5)) AS name FROM numbers(8)"
    """Four seconds of sleep in one-row blocks (``max_block_size = 1``): past a one-second bound."""
    lifted = {"readonly": 0, "max_execution_time": 0, "timeout_overflow_mode": "break", "max_block_size": 1}

    def extraction(sql: str, seconds: int) -> QueryArtifactSource:
        return query_extraction(coordinator, store, sql, 1 << 22, max_execution_seconds=seconds, settings=lifted)

    with pytest.raises(DponeError) as stopped:
        extraction(slow, 1).seal()
    assert stopped.value.code == "DPONE_ARTIFACT_EXTRACTION_FAILED"
    with pytest.raises(DponeError) as refused:  # readonly = 1 still holds: the query may not change a setting
        extraction("SELECT number AS id, toString(number) AS name FROM numbers(10) SETTINGS max_threads = 1", 60).seal()
    assert refused.value.code == "DPONE_ARTIFACT_EXTRACTION_FAILED"
    assert [path for path in (tmp_path / "artifacts").rglob("*") if path.is_file()] == []
    assert extraction(slow, 60).seal().row_count == 8  # the control: the same read within a longer bound seals


def test_the_describe_of_the_columns_runs_under_the_extraction_settings(coordinator: Endpoint) -> None:
    """The ``DESCRIBE`` that reads the query's columns is bound like the extraction. A query cannot observe it by
    failing (a ``DESCRIBE`` analyses, it does not run the query's ``SETTINGS``), so the query's type carries the
    settings: ``getSetting`` is a constant at analysis, and ``toFixedString`` takes its length from it."""
    query = "SELECT toFixedString('', toUInt8(getSetting('readonly')) + 1) AS r, toFixedString('', 1) AS b"
    assert describe_query(coordinator, query) == (("r", "FixedString(2)"), ("b", "FixedString(1)"))
    [(_, unbound_type, *_), _] = coordinator.reader().query(f"DESCRIBE TABLE ({query})").result_rows
    assert unbound_type == "FixedString(1)"  # the control: the same DESCRIBE without the provider's settings
