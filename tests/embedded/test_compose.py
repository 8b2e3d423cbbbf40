"""The docker-compose files and the embedded cluster derive from one topology and cannot drift."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from dpone_embedded import TOPOLOGY, compose
from dpone_embedded.layout import ProcessSpec, render_chdb_config

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_files_match_the_topology() -> None:
    assert compose.write(ROOT, check=True) == [], "run: python -m dpone_embedded compose"


def test_compose_file_shape() -> None:
    document = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    services = document["services"]
    assert set(services) == {"keeper", "member1", "member2", "mssql"}
    for name, service in services.items():
        assert ":" in service["image"] and not service["image"].endswith(":latest"), name
        assert "healthcheck" in service, name
        assert all(port.startswith("127.0.0.1:") for port in service["ports"]), name


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
