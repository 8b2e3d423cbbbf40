"""The hook's connection resolution (both connection types) and its artifact location default."""

from __future__ import annotations

import json

import pytest
from airflow.sdk import Connection

from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook, default_artifact_base


def connection(
    conn_type: str = "dpone_clickhouse", extra: dict[str, object] | None = None, **fields: object
) -> Connection:
    values: dict[str, object] = {"host": "coordinator.internal", "login": "writer", "password": "pw", "schema": "db"}
    values.update(fields)
    return Connection(conn_id="ch", conn_type=conn_type, extra=json.dumps(extra or {}), **values)  # type: ignore[arg-type]


def test_dpone_connection_resolves_with_its_options() -> None:
    resolved = DponeClickHouseHook.resolve(
        connection(extra={"secure": True, "member_http_port": 9443, "connect_timeout_seconds": 5})
    )
    assert (resolved.host, resolved.port, resolved.username, resolved.password, resolved.database) == (
        "coordinator.internal",
        8443,
        "writer",
        "pw",
        "db",
    )
    assert resolved.scheme == "https"
    assert resolved.options.member_http_port == 9443
    assert "pw" not in repr(resolved) and "coordinator.internal" not in repr(resolved)


def test_default_port_follows_the_scheme_and_explicit_port_wins() -> None:
    assert DponeClickHouseHook.resolve(connection()).port == 8123
    assert DponeClickHouseHook.resolve(connection(port=18123)).port == 18123


def test_dpone_connection_refuses_unknown_extra_keys() -> None:
    with pytest.raises(DponeError) as caught:
        DponeClickHouseHook.resolve(connection(extra={"secure": True, "retries": 3}))
    assert caught.value.code == "DPONE_CONNECTION_INVALID"


def test_official_clickhouse_connection_is_accepted_and_its_foreign_extras_ignored() -> None:
    resolved = DponeClickHouseHook.resolve(connection("clickhouse", extra={"secure": True, "compression": "lz4"}))
    assert resolved.scheme == "https" and resolved.port == 8443


@pytest.mark.parametrize("conn_type", ["postgres", "http", ""])
def test_other_connection_types_are_refused(conn_type: str) -> None:
    with pytest.raises(DponeError):
        DponeClickHouseHook.resolve(connection(conn_type))


def test_a_connection_without_host_is_refused() -> None:
    with pytest.raises(DponeError) as caught:
        DponeClickHouseHook.resolve(connection(host=None))
    assert "host" in caught.value.detail


def test_artifact_base_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__DPONE__ARTIFACT_BASE", "s3://bucket/dpone")
    assert default_artifact_base() == "s3://bucket/dpone"
    monkeypatch.delenv("AIRFLOW__DPONE__ARTIFACT_BASE")
    monkeypatch.setenv("AIRFLOW_HOME", "/opt/airflow")
    assert default_artifact_base() == "file:///opt/airflow/dpone/artifacts"
