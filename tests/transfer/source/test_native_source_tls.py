"""The native-transfer source, and the cluster route's ``verify: false`` policy, against a real TLS endpoint: an
embedded member serving HTTPS only.

A CA and server certificates are generated here (``cryptography``); the member reads its certificate files for every
connection, so each case installs the certificate it needs. The certificate names ``member.dpone.test``, which this
module resolves to the member's loopback address; the name is not a loopback name, so the source's transport policy
applies to it as to any remote host. The client is the production one (``http_connector``: clickhouse-connect on
urllib3 with the system's ``ssl``), so chain, host name and validity are checked by the real TLS stack.

The cluster route's connection names a CA the member's certificate is not from, so only an unverified client could
talk to it. By default (``[dpone] allow_unverified_tls`` unset) the hook refuses such a connection before any client
exists: the member's name is never even resolved, so no password leaves. Allowed, the same connection reads the
member and each resolution logs a WARNING naming the connection (the hook's own sync and async clients).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import logging
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from dpone_embedded.cluster import EmbeddedCluster
from urllib3.exceptions import InsecureRequestWarning

from airflow_provider_dpone.core.clickhouse.clients import close_client
from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook
from airflow_provider_dpone.transfer.source.session import http_connector, source_transport_options

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

NAME = "member.dpone.test"
OTHER = "other.dpone.test"  # resolves to the same server, but the certificate does not name it
NOW = dt.datetime.now(dt.UTC)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _ca(common: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(_name(common))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - dt.timedelta(days=30))
        .not_valid_after(NOW + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate], *, expired: bool = False) -> tuple[bytes, bytes]:
    key = _key()
    start, end = (
        (NOW - dt.timedelta(days=20), NOW - dt.timedelta(days=10))
        if expired
        else (NOW - dt.timedelta(days=1), NOW + dt.timedelta(days=10))
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(NAME))
        .issuer_name(ca[1].subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(NAME)]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca[0], hashes.SHA256())
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), pem_key


class Pki:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca = _ca("dpone test CA")
        self.ca_file = root / "ca.pem"
        self.ca_file.write_bytes(self.ca[1].public_bytes(serialization.Encoding.PEM))
        self.unknown_ca_file = root / "unknown-ca.pem"
        self.unknown_ca_file.write_bytes(_ca("another CA")[1].public_bytes(serialization.Encoding.PEM))
        self.cert_file, self.key_file = root / "server.pem", root / "server.key"
        self.valid, self.expired = _leaf(self.ca), _leaf(self.ca, expired=True)
        self.serve(self.valid)

    def serve(self, leaf: tuple[bytes, bytes]) -> None:
        """Install a certificate: the member reads the files at every new connection."""
        for path, data in ((self.key_file, leaf[1]), (self.cert_file, leaf[0])):
            staged = path.with_suffix(".new")
            staged.write_bytes(data)
            shutil.move(staged, path)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_cluster(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    cluster = EmbeddedCluster.start(
        tmp_path_factory.mktemp("tls-cluster"), members=2, tls=(str(pki.cert_file), str(pki.key_file))
    )
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch, tls_cluster: EmbeddedCluster) -> None:
    """``member.dpone.test`` and ``other.dpone.test`` resolve to the member's address (as a DNS entry would)."""
    original = socket.getaddrinfo
    address = tls_cluster.members[0].host

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        return original(address if host in (NAME, OTHER) else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture(autouse=True)
def valid_certificate(pki: Pki) -> Iterator[None]:
    pki.serve(pki.valid)
    yield
    pki.serve(pki.valid)


def _connect(cluster: EmbeddedCluster, host: str, **extra: Any) -> Any:
    options = source_transport_options(host, ClickHouseConnectionOptions(**extra))
    member = cluster.members[0]
    return http_connector(host, member.port, cluster.user, cluster.password, options).connect()


def _refused(cluster: EmbeddedCluster, host: str, **extra: Any) -> DponeError:
    with pytest.raises(DponeError) as refused:
        _connect(cluster, host, **extra).close()
    return refused.value


def test_a_verified_tls_session_reads_the_member(tls_cluster: EmbeddedCluster, pki: Pki, names: None) -> None:
    session = _connect(tls_cluster, NAME, ca_cert=str(pki.ca_file))
    try:
        transport = session.transport()
        assert transport.scheme == "https" and transport.tls_verified and transport.requires_tls
        assert transport.pinned
        assert session.client.query("SELECT 41 + 1").result_rows == [(42,)]
    finally:
        session.close()


def test_a_certificate_from_an_unknown_ca_is_refused(tls_cluster: EmbeddedCluster, pki: Pki, names: None) -> None:
    refused = _refused(tls_cluster, NAME, ca_cert=str(pki.unknown_ca_file))
    assert refused.code == "native_transfer.source_transport_unsupported" and "did not verify" in str(refused)


def test_a_certificate_for_another_host_name_is_refused(tls_cluster: EmbeddedCluster, pki: Pki, names: None) -> None:
    refused = _refused(tls_cluster, OTHER, ca_cert=str(pki.ca_file))
    assert refused.code == "native_transfer.source_transport_unsupported" and "did not verify" in str(refused)


def test_an_expired_certificate_is_refused(tls_cluster: EmbeddedCluster, pki: Pki, names: None) -> None:
    pki.serve(pki.expired)
    refused = _refused(tls_cluster, NAME, ca_cert=str(pki.ca_file))
    assert refused.code == "native_transfer.source_transport_unsupported" and "did not verify" in str(refused)


def test_plaintext_to_a_non_loopback_name_is_refused_before_connecting(tls_cluster: EmbeddedCluster) -> None:
    refused = _refused(tls_cluster, NAME, secure=False)
    assert refused.code == "native_transfer.source_transport_unsupported"
    assert "allow_plaintext" in str(refused)


def test_the_https_member_never_answers_plain_http(tls_cluster: EmbeddedCluster, names: None) -> None:
    """With allow_plaintext the client speaks HTTP; the member does not fall back to it, and nothing is read."""
    with pytest.raises(DponeError):
        _connect(tls_cluster, NAME, secure=False, allow_plaintext=True).close()


def test_the_loopback_address_is_not_in_the_certificate(tls_cluster: EmbeddedCluster, pki: Pki) -> None:
    """By IP the name check fails too: verification is by the certificate's names, never skipped for loopback."""
    host = tls_cluster.members[0].host
    assert ipaddress.ip_address(host).is_loopback
    refused = _refused(tls_cluster, host, secure=True, ca_cert=str(pki.ca_file))
    assert refused.code == "native_transfer.source_transport_unsupported"


@pytest.fixture
def lookups(names: None, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every name the process resolves from now on: a client that reaches for the member resolves its name first."""
    seen: list[str] = []
    resolve = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(str(host))
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return seen


@pytest.mark.parametrize("verify", [False, "false"])
def test_verify_false_is_refused_before_the_password_is_sent(
    tls_cluster: EmbeddedCluster, pki: Pki, lookups: list[str], verify: object
) -> None:
    """The member would complete an unverified handshake (its certificate is from a CA the client does not know);
    the source refuses the relaxation first, with the transport code, and never even resolves the member's name."""
    refused = _refused(tls_cluster, NAME, verify=verify, ca_cert=str(pki.unknown_ca_file))
    assert refused.code == "native_transfer.source_transport_unsupported" and "verify: false" in str(refused)
    assert NAME not in lookups
    session = _connect(tls_cluster, NAME, ca_cert=str(pki.ca_file))  # the same endpoint, verified, is reached
    session.close()
    assert NAME in lookups


# -- the cluster route: verify: false is refused before any request unless the deployment allows it ---------------
CONN_ID = "relaxed_tls"


@pytest.fixture
def relaxed_connection(tls_cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    member = tls_cluster.members[0]
    connection = {
        "conn_type": "dpone_clickhouse",
        "host": NAME,
        "port": member.port,
        "login": tls_cluster.user,
        "password": tls_cluster.password,
        "extra": {"secure": True, "verify": "false"},
    }
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(connection))


def _hook() -> DponeClickHouseHook:
    return DponeClickHouseHook(dpone_clickhouse_conn_id=CONN_ID)


@pytest.mark.parametrize("setting", [None, "False"])
def test_verify_false_is_refused_before_any_request_unless_allowed(
    relaxed_connection: None, lookups: list[str], monkeypatch: pytest.MonkeyPatch, setting: str | None
) -> None:
    if setting is None:
        monkeypatch.delenv("AIRFLOW__DPONE__ALLOW_UNVERIFIED_TLS", raising=False)
    else:
        monkeypatch.setenv("AIRFLOW__DPONE__ALLOW_UNVERIFIED_TLS", setting)
    for build in (_hook().coordinator_client, lambda: asyncio.run(_hook().async_coordinator_client())):
        with pytest.raises(DponeError) as refused:
            build()
        assert refused.value.code == "DPONE_CLICKHOUSE_TRANSPORT_UNVERIFIED"
        assert f"connection {CONN_ID}" in str(refused.value)
    ok, message = _hook().test_connection()
    assert not ok and message.startswith("DPONE_CLICKHOUSE_TRANSPORT_UNVERIFIED: ")
    assert NAME not in lookups, "a client reached for the member"


def test_an_allowed_relaxation_reads_the_member_and_names_the_connection_in_a_warning(
    relaxed_connection: None,
    lookups: list[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    recwarn: pytest.WarningsRecorder,
    tls_cluster: EmbeddedCluster,
) -> None:
    monkeypatch.setenv("AIRFLOW__DPONE__ALLOW_UNVERIFIED_TLS", "True")
    with caplog.at_level(logging.WARNING, logger="airflow_provider_dpone.hooks.clickhouse"):
        client: Any = _hook().coordinator_client()
    try:
        assert client.query("SELECT 41 + 1").result_rows == [(42,)]
    finally:
        close_client(client)
    # urllib3's own warning on each request is what the relaxation means (recorded, so it is asserted, not leaked)
    assert any(issubclass(caught.category, InsecureRequestWarning) for caught in recwarn)
    assert NAME in lookups
    [warning] = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert f"connection {CONN_ID}:" in warning and "verify: false" in warning
    assert NAME not in warning and str(tls_cluster.members[0].port) not in warning  # the connection id, no endpoint
