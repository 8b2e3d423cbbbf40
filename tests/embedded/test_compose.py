"""The docker-compose files and the embedded cluster derive from one topology and cannot drift."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import chdb
import pytest
import yaml
from dpone_embedded import TOPOLOGY, compose
from dpone_embedded.layout import ProcessSpec, render_chdb_config
from dpone_embedded.topology import CLICKHOUSE_VERSION, IMAGES

from airflow_provider_dpone.transfer.targets.mssql.digest import UTF8_COLLATION

pytestmark = pytest.mark.embedded

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_files_match_the_topology() -> None:
    assert compose.write(ROOT, check=True) == [], "run: python -m dpone_embedded compose"


def _services() -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())["services"]
    return services


def test_compose_file_shape() -> None:
    services = _services()
    assert set(services) == {"keeper1", "keeper2", "keeper3", "member1", "member2", "mssql", "mssql-init"}
    for name, service in services.items():
        assert ":" in service["image"] and not service["image"].endswith(":latest"), name
        if name == "mssql-init":  # one-shot: no healthcheck, no port, never started by a plain `up`
            assert service["profiles"] == ["init"] and "ports" not in service, name
            continue
        assert "healthcheck" in service, name
        assert all(port.startswith("127.0.0.1:") for port in service["ports"]), name
    published = [port for service in services.values() for port in service.get("ports", [])]
    assert len(published) == len(set(published)), "every published port once"
    for name, service in services.items():
        assert set(service.get("depends_on", {})) <= set(services) - {name}, name
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            assert source.startswith("./") and (ROOT / source).is_file(), (name, volume)


def test_the_compose_servers_run_the_release_the_double_embeds() -> None:
    """The embedded engine (chdb) and the compose image are one ClickHouse release: the double's behaviour is checked
    against the server it claims to be."""
    engine = str(chdb.engine_version)
    assert engine.split(".")[:2] == CLICKHOUSE_VERSION.split("."), (engine, CLICKHOUSE_VERSION)
    clickhouse = {name: s["image"] for name, s in _services().items() if name.startswith(("keeper", "member"))}
    assert set(clickhouse.values()) == {IMAGES["clickhouse"]} == {f"clickhouse/clickhouse-server:{CLICKHOUSE_VERSION}"}
    described = json.loads((ROOT / "deploy/real-cluster.json").read_text())
    assert described["clickhouse_version"] == CLICKHOUSE_VERSION


def test_three_keepers_form_one_raft_ensemble_every_server_knows() -> None:
    keepers = [f"keeper{n}" for n in (1, 2, 3)]
    raft = [f"<server><id>{n}</id><hostname>keeper{n}</hostname><port>9234</port></server>" for n in (1, 2, 3)]
    for number, name in enumerate(keepers, start=1):
        text = (ROOT / f"deploy/clickhouse/{name}.xml").read_text()
        assert f"<server_id>{number}</server_id>" in text
        assert all(text.count(server) == 1 for server in raft), name
        assert text.count("<server><id>") == 3, name
    services = _services()
    for member in ("member1", "member2"):
        text = (ROOT / f"deploy/clickhouse/{member}.xml").read_text()
        assert [f"<node><host>{k}</host><port>9181</port></node>" in text for k in keepers] == [True] * 3, member
        assert set(services[member]["depends_on"]) == set(keepers), member
        assert {c["condition"] for c in services[member]["depends_on"].values()} == {"service_healthy"}
    described = json.loads((ROOT / "deploy/real-cluster.json").read_text())
    assert [keeper["name"] for keeper in described["keepers"]] == keepers


def test_the_sql_server_init_step_creates_the_utf8_database() -> None:
    """The second database's collation is the one the transfer's in-server UTF-8 digest uses."""
    assert TOPOLOGY.mssql_utf8_collation == UTF8_COLLATION and UTF8_COLLATION.endswith("_UTF8")
    init = _services()["mssql-init"]
    assert init["depends_on"] == {"mssql": {"condition": "service_healthy"}}
    assert init["entrypoint"] == ["/opt/mssql-tools18/bin/sqlcmd"]
    query = init["command"][init["command"].index("-Q") + 1]
    database = TOPOLOGY.mssql_utf8_database
    assert query == f"IF DB_ID(N'{database}') IS NULL CREATE DATABASE [{database}] COLLATE {UTF8_COLLATION}"
    assert "-b" in init["command"], "a failed statement fails the step"
    described = json.loads((ROOT / "deploy/real-cluster.json").read_text())["mssql"]
    assert (described["utf8_database"], described["utf8_collation"]) == (database, UTF8_COLLATION)


def test_embedded_and_real_configs_share_the_cluster_definitions() -> None:
    replicas = [("127.0.0.1", 41001), ("127.0.0.1", 41002)]
    spec = ProcessSpec(
        name="member1",
        role="member",
        cluster_dir="/nowhere",
        http_port=1,
        native_port=41001,
        shard_num=1,
        replica_num=1,
        clusters={TOPOLOGY.external_cluster: replicas, TOPOLOGY.internal_cluster: replicas},
        default_cluster=TOPOLOGY.external_cluster,
    )
    embedded = render_chdb_config(spec)
    real = (ROOT / "deploy/clickhouse/member1.xml").read_text()
    for text in (embedded, real):
        assert f"<{TOPOLOGY.external_cluster}>" in text and f"<{TOPOLOGY.internal_cluster}>" in text
        assert text.count("<internal_replication>false</internal_replication>") == 1
        assert text.count("<internal_replication>true</internal_replication>") == 1
        assert text.count("<replica><host>") == 2 * TOPOLOGY.default_members
        assert "<macros><cluster>dpone_cluster</cluster><shard>1</shard><replica>r1</replica></macros>" in text
        assert f"<keeper_map_path_prefix>{TOPOLOGY.keeper_map_path_prefix}</keeper_map_path_prefix>" in text
    real_cluster = json.loads((ROOT / "deploy/real-cluster.json").read_text())
    assert [(m["shard_num"], m["replica_num"]) for m in real_cluster["members"]] == [
        (slot.shard_num, slot.replica_num) for slot in TOPOLOGY.slots(TOPOLOGY.default_members)
    ]
