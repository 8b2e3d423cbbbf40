"""Options a ``dpone_clickhouse`` connection carries in its ``extra`` JSON.

One model is the single source for three things: the connection form (``conn-fields`` in provider info is generated
from it), the hook's parsing of the extra, and the documentation. Secrets never live here: the password stays in the
connection's password field and in memory only.
"""

from __future__ import annotations

import json
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import validate_identifier

_ENDPOINT_KEY_HELP = "'<shard_num>:<replica_num>' as system.clusters reports them"


class ClickHouseConnectionOptions(BaseModel):
    """Transport options of one ClickHouse cluster connection (coordinator plus derived member connections)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    secure: bool = Field(
        default=False,
        title="Use HTTPS",
        description="Speak HTTPS to the coordinator and every member; never downgraded to plain HTTP.",
    )
    allow_plaintext: bool = Field(
        default=False,
        title="Allow plain HTTP (native transfer source)",
        description="Let a native-transfer source on a non-loopback host be read over plain HTTP (logged); "
        "without it such a source uses verified HTTPS, and secure: false is refused.",
    )
    verify: bool = Field(
        default=True,
        title="Verify server certificate",
        description="Verify the certificate chain and host name when HTTPS is used. false turns both checks off: "
        "refused before any request unless [dpone] allow_unverified_tls is True (then logged per connection); a "
        "native-transfer source always refuses it.",
    )
    ca_cert: str | None = Field(
        default=None,
        title="CA bundle path",
        description="Path to a CA bundle on the worker for HTTPS verification (default: the system bundle).",
        examples=["/etc/ssl/certs/ca-certificates.crt"],
    )
    member_http_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        title="Member HTTP port",
        description="HTTP(S) port of each member; member hosts come from system.clusters. Default: the connection port.",
    )
    member_endpoints: dict[str, str] | None = Field(
        default=None,
        title="Member endpoint map",
        description="Optional explicit map from " + _ENDPOINT_KEY_HELP + " to 'host:port' for each member, "
        'e.g. {"1:1": "clickhouse-1.internal:8123", "1:2": "clickhouse-2.internal:8123"}.',
    )
    connect_timeout_seconds: int = Field(
        default=10, ge=1, le=600, title="Connect timeout (s)", description="Bound on opening a connection."
    )
    send_receive_timeout_seconds: int = Field(
        default=300,
        ge=1,
        le=86400,
        title="Send/receive timeout (s)",
        description="Bound on sending a request and on waiting for each response chunk.",
    )
    cluster: str | None = Field(
        default=None,
        title="Cluster (Test button)",
        description="A cluster name of system.clusters: the Test button then reaches, authenticates and identifies "
        "every member of it. Operators take the cluster from the manifest, not from here.",
        examples=["analytics_cluster"],
    )
    authority_database: str | None = Field(
        default=None,
        title="Authority database (Test button)",
        description="The database of __dpone_cluster_publication_authority: the Test button then checks its exact "
        "schema, KeeperMap engine and one Keeper path on the coordinator and every member.",
        examples=["analytics"],
    )

    @field_validator("cluster", "authority_database")
    @classmethod
    def _plain_name(cls, value: str | None) -> str | None:
        """A plain identifier (the same rule as every name that reaches SQL)."""
        if value is None:
            return value
        try:
            return validate_identifier(value)
        except DponeError as error:
            raise ValueError(error.detail) from None

    @field_validator("secure", "allow_plaintext", "verify", mode="before")
    @classmethod
    def _strict_boolean(cls, value: Any) -> Any:
        """A JSON boolean, or the text ``true``/``false`` (URI query strings); ``"yes"``, ``1`` or ``"on"`` are refused."""
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise ValueError("must be true or false")

    @field_validator("member_endpoints", mode="before")
    @classmethod
    def _endpoints_object(cls, value: Any) -> Any:
        """An object, or the same object as JSON text (how a connection form's text field stores it)."""
        if isinstance(value, str):
            try:
                value = json.loads(value, object_pairs_hook=unique_keys) if value.strip() else None
            except json.JSONDecodeError:
                raise ValueError("member_endpoints must be a JSON object") from None
            if value is not None and not isinstance(value, dict):
                raise ValueError("member_endpoints must be a JSON object")
        return value

    @field_validator("member_endpoints")
    @classmethod
    def _check_endpoints(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return value
        seen: set[tuple[str, int]] = set()
        for key, endpoint in value.items():
            shard, _, replica = key.partition(":")
            if not (shard.isdigit() and replica.isdigit()) or key != f"{int(shard)}:{int(replica)}":
                raise ValueError(f"member_endpoints key must be {_ENDPOINT_KEY_HELP}")
            host, _, port = endpoint.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError("member_endpoints value must be 'host:port'")
            address = (host.lower().removeprefix("[").removesuffix("]"), int(port))
            if address in seen:
                raise ValueError("member_endpoints maps two members to one endpoint")
            seen.add(address)
        return value


def tls_relaxation(options: ClickHouseConnectionOptions) -> str | None:
    """What ``options`` relax of TLS, or ``None`` when HTTPS (if used) is fully verified.

    ``verify: false`` (also the text ``"false"``) is the only relaxation the options can express, and it turns off
    both checks at once: clickhouse-connect builds the pool with ``cert_reqs = CERT_NONE``, so neither the certificate
    chain nor the host name is checked. Unknown extra keys are refused, so no other switch exists. Plain HTTP
    (``secure: false``) is not TLS and has its own rules.
    """
    if options.secure and not options.verify:
        return "verify: false (neither the certificate chain nor the host name is checked)"
    return None


_HOST_FORBIDDEN: Final[frozenset[str]] = frozenset("@/?#\\")


def bare_host(host: str | None, conn_id: str) -> str:
    """The host field of connection ``conn_id`` when it is a bare host name or address, else a coded refusal.

    A host holding user info (``user:password@db``), a scheme, a path, a query or white space is refused before
    anything is sent, and the refusal never repeats the field (it may hold a password): otherwise the text would reach
    a client URL, a log line or an OpenLineage namespace.
    """
    if not host:
        raise DponeError("DPONE_CONNECTION_INVALID", f"connection {conn_id}: host is empty")
    if any(char in _HOST_FORBIDDEN or char.isspace() for char in host):
        raise DponeError(
            "DPONE_CONNECTION_HOST_INVALID", f"connection {conn_id}: the host field is not a bare host name or address"
        )
    return host


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict; a key given twice is refused (``json.loads`` would keep the last one)."""
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a key is given twice")
    return dict(pairs)


def connection_form_fields() -> dict[str, Any]:
    """``conn-fields`` for provider info, generated from :class:`ClickHouseConnectionOptions`."""
    type_names = {bool: "boolean", int: "integer", str: "string"}
    fields: dict[str, Any] = {}
    for name, info in ClickHouseConnectionOptions.model_fields.items():
        annotation = info.annotation
        base = next((t for t in type_names if annotation is t or annotation == (t | None)), None)
        schema: dict[str, Any] = {"type": [type_names[base], "null"] if base else ["object", "null"]}
        if info.default is not None:
            schema["default"] = info.default
        if info.examples:  # the form lists them under a string field (its only placeholder for extra fields)
            schema["examples"] = list(info.examples)
        fields[name] = {"label": info.title or name, "description": info.description or "", "schema": schema}
    return fields
