"""The SQL Server target's connections come from an Airflow connection through MsSqlHook and pymssql."""

from __future__ import annotations

import json
from typing import Any

import pymssql
import pytest

from airflow_provider_dpone.transfer.targets.mssql.driver import mssql_connection_factory

pytestmark = pytest.mark.unit


def test_factory_opens_a_fresh_pymssql_connection_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    connection = {
        "conn_type": "mssql",
        "host": "sql.example.internal",
        "login": "loader",
        "password": "not-a-real-secret",
        "schema": "warehouse",
        "port": 1433,
        "extra": {"tds_version": "7.4", "login_timeout": 10},
    }
    monkeypatch.setenv("AIRFLOW_CONN_DPONE_MSSQL_TEST", json.dumps(connection))
    opened: list[dict[str, Any]] = []

    def fake_connect(**kwargs: Any) -> object:
        opened.append(kwargs)
        return object()

    monkeypatch.setattr(pymssql, "connect", fake_connect)
    factory = mssql_connection_factory("dpone_mssql_test")
    first, second = factory(), factory()
    assert first is not second and len(opened) == 2
    assert opened[0]["server"] == "sql.example.internal" and opened[0]["database"] == "warehouse"
    assert opened[0]["tds_version"] == "7.4" and opened[0]["port"] == "1433"
    mssql_connection_factory("dpone_mssql_test", database="other")()
    assert opened[-1]["database"] == "other"
