"""The hook's connection resolution (both connection types) and its artifact location default."""

from __future__ import annotations

import json

import pytest
from airflow.sdk import Connection

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook, default_artifact_base

pytestmark = pytest.mark.adapter


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
    monkeypatch.setenv("AIRFLOW__DPONE__ARTIFACT_BASE", "file:///mnt/shared/dpone")
    assert default_artifact_base() == "file:///mnt/shared/dpone"
    monkeypatch.delenv("AIRFLOW__DPONE__ARTIFACT_BASE")
    monkeypatch.setenv("AIRFLOW_HOME", "/opt/airflow")
    monkeypatch.setenv("AIRFLOW__DPONE__SINGLE_WORKER", "True")
    assert default_artifact_base() == "file:///opt/airflow/dpone/artifacts"


def test_an_artifact_base_whose_scheme_no_filesystem_serves_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__DPONE__ARTIFACT_BASE", "s4://aws_default@bucket/dpone")
    with pytest.raises(DponeError) as caught:
        default_artifact_base()
    assert caught.value.code == "DPONE_ARTIFACT_STORE_URL_INVALID" and not caught.value.retryable


def test_a_worker_local_default_store_needs_a_declared_single_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__DPONE__ARTIFACT_BASE", raising=False)
    monkeypatch.setenv("AIRFLOW__DPONE__SINGLE_WORKER", "False")
    with pytest.raises(DponeError) as caught:
        default_artifact_base()
    assert caught.value.code == "DPONE_ARTIFACT_STORE_WORKER_LOCAL"
    assert "[dpone] artifact_base" in str(caught.value) and "[dpone] single_worker" in str(caught.value)


@pytest.mark.parametrize("value", ["yes", "1", "on", 1, "TRUEISH"])
def test_booleans_are_strict(value: object) -> None:
    with pytest.raises(DponeError) as caught:
        DponeClickHouseHook.resolve(connection(extra={"secure": value}))
    assert caught.value.code == "DPONE_CONNECTION_INVALID" and "secure" in caught.value.detail


def test_booleans_accept_json_booleans_and_the_text_true_or_false() -> None:
    assert DponeClickHouseHook.resolve(connection(extra={"secure": True})).options.secure is True
    assert DponeClickHouseHook.resolve(connection(extra={"secure": "true"})).options.secure is True
    assert DponeClickHouseHook.resolve(connection(extra={"verify": "False"})).options.verify is False  # plain HTTP


# -- TLS relaxation: refused unless the deployment allows it, and then logged with the connection's id -----------------
@pytest.mark.parametrize("verify", [False, "false", "False"])
def test_verify_false_over_https_is_refused_by_default(verify: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__DPONE__ALLOW_UNVERIFIED_TLS", raising=False)
    with pytest.raises(DponeError) as caught:
        DponeClickHouseHook.resolve(connection(extra={"secure": True, "verify": verify}))
    assert caught.value.code == "DPONE_CLICKHOUSE_TRANSPORT_UNVERIFIED"
    assert "connection ch" in caught.value.detail and "coordinator.internal" not in str(caught.value)


def test_an_allowed_relaxation_is_logged_naming_the_connection(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AIRFLOW__DPONE__ALLOW_UNVERIFIED_TLS", "True")
    with caplog.at_level("WARNING", logger="airflow_provider_dpone.hooks.clickhouse"):
        resolved = DponeClickHouseHook.resolve(connection(extra={"secure": True, "verify": "false"}))
    assert resolved.unverified_tls_allowed and resolved.options.verify is False
    [record] = [r for r in caplog.records if r.levelname == "WARNING"]
    assert "connection ch:" in record.getMessage() and "allow_unverified_tls" in record.getMessage()
    assert "pw" not in record.getMessage() and "coordinator.internal" not in record.getMessage()
    assert not DponeClickHouseHook.resolve(connection(extra={"secure": True})).unverified_tls_allowed


# -- the host field holds a host only ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "host",
    ["writer:s3cret@coordinator.internal", "s3cret@coordinator.internal", "https://coordinator.internal", "a b"],
)
def test_a_host_holding_more_than_a_host_is_refused_without_showing_it(host: str) -> None:
    with pytest.raises(DponeError) as caught:
        DponeClickHouseHook.resolve(connection(host=host))
    assert caught.value.code == "DPONE_CONNECTION_HOST_INVALID"
    assert "s3cret" not in str(caught.value) and "coordinator.internal" not in str(caught.value)


@pytest.mark.parametrize("host", ["coordinator.internal", "10.0.0.7", "[::1]", "::1"])
def test_a_bare_host_name_or_address_is_accepted(host: str) -> None:
    assert DponeClickHouseHook.resolve(connection(host=host)).host == host


def test_a_host_with_user_info_never_reaches_an_openlineage_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_dpone.operators.lineage import _server_namespace, clickhouse_namespace

    for conn_id, conn_type in (("CH_LEAK", "dpone_clickhouse"), ("PG_LEAK", "postgres")):
        payload = {"conn_type": conn_type, "host": "reader:s3cret@db.internal", "port": 5432}
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id}", json.dumps(payload))
    with pytest.raises(DponeError) as caught:
        clickhouse_namespace("ch_leak")
    assert caught.value.code == "DPONE_CONNECTION_HOST_INVALID" and "s3cret" not in str(caught.value)
    with pytest.raises(DponeError) as caught:
        _server_namespace("postgres", "pg_leak")
    assert caught.value.code == "DPONE_CONNECTION_HOST_INVALID" and "s3cret" not in str(caught.value)


def test_member_endpoints_as_an_object_or_as_json_text() -> None:
    endpoints = {"1:1": "ch-1.internal:8443", "1:2": "ch-2.internal:8443"}
    as_object = DponeClickHouseHook.resolve(connection(extra={"member_endpoints": endpoints}))
    as_text = DponeClickHouseHook.resolve(connection(extra={"member_endpoints": json.dumps(endpoints)}))
    assert as_object.options.member_endpoints == as_text.options.member_endpoints == endpoints
    for bad in ("[1, 2]", "{not json", '{"shard1": "h:1"}'):
        with pytest.raises(DponeError, match="member_endpoints"):
            DponeClickHouseHook.resolve(connection(extra={"member_endpoints": bad}))


def test_the_form_has_placeholders_a_member_map_example_and_no_raw_extra() -> None:
    from airflow_provider_dpone.core.connection_options import connection_form_fields

    behaviour = DponeClickHouseHook.get_ui_field_behaviour()
    assert behaviour["hidden_fields"] == ["extra"]
    placeholders = behaviour["placeholders"]
    # Airflow 3 applies placeholders to standard fields only; the port's is the default without HTTPS
    assert set(placeholders) == {"host", "port", "login", "schema"}
    assert int(placeholders["port"]) == DponeClickHouseHook.resolve(connection()).port == 8123
    fields = connection_form_fields()
    example = json.loads(fields["member_endpoints"]["description"].split("e.g. ", 1)[1].rstrip("."))
    assert DponeClickHouseHook.parse_options({"member_endpoints": example}).member_endpoints == example
    for name in ("ca_cert", "cluster", "authority_database"):
        (value,) = fields[name]["schema"]["examples"]
        assert getattr(DponeClickHouseHook.parse_options({name: value}), name) == value


def test_the_test_button_reports_the_code_of_an_unreachable_coordinator(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv(
        "AIRFLOW_CONN_NOWHERE", json.dumps({"conn_type": "dpone_clickhouse", "host": "127.0.0.1", "port": port})
    )
    ok, message = DponeClickHouseHook(dpone_clickhouse_conn_id="nowhere").test_connection()
    assert ok is False and message.startswith("DPONE_CLICKHOUSE_COORDINATOR_UNREACHABLE: ")
    assert str(port) not in message
    monkeypatch.setenv(
        "AIRFLOW_CONN_BADEXTRA",
        json.dumps({"conn_type": "dpone_clickhouse", "host": "127.0.0.1", "extra": {"secure": "yes"}}),
    )
    ok, message = DponeClickHouseHook(dpone_clickhouse_conn_id="badextra").test_connection()
    assert ok is False and message.startswith("DPONE_CONNECTION_INVALID: ")
