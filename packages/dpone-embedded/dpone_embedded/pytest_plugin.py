"""Pytest fixtures for the embedded cluster (registered by ``tests/conftest.py``).

- ``embedded_cluster``: a running cluster, started once per test module (a few seconds) and shared by its tests;
  after each test its faults are reset (armed faults disarmed, workers resumed, killed processes restarted).
  A module chooses its shape with ``pytestmark = pytest.mark.embedded_cluster(members=3, internal_replication=True)``.
- ``fresh_database``: the name of a new Atomic database created on the coordinator and on every member, dropped
  after the test.

Every process is stopped at module teardown, also when tests fail; the processes also exit by themselves if the
test process dies.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from dpone_embedded.cluster import EmbeddedCluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "embedded_cluster(members=2, internal_replication=False): shape of the module's embedded cluster",
    )


@pytest.fixture(scope="module")
def embedded_cluster_module(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddedCluster]:
    """The module's cluster, without the per-test fault reset (prefer ``embedded_cluster``)."""
    marker = request.node.get_closest_marker("embedded_cluster")
    options: dict[str, Any] = dict(marker.kwargs) if marker else {}
    cluster = EmbeddedCluster.start(tmp_path_factory.mktemp("embedded-cluster"), **options)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def embedded_cluster(embedded_cluster_module: EmbeddedCluster) -> Iterator[EmbeddedCluster]:
    yield embedded_cluster_module
    embedded_cluster_module.faults.reset()


@pytest.fixture
def fresh_database(embedded_cluster: EmbeddedCluster) -> Iterator[str]:
    name = f"test_{uuid.uuid4().hex[:12]}"
    for endpoint in embedded_cluster.endpoints:
        client = embedded_cluster.client(endpoint)
        try:
            client.command(f"CREATE DATABASE `{name}` ENGINE = Atomic")
        finally:
            client.close()
    yield name
    embedded_cluster.faults.reset()
    for endpoint in embedded_cluster.endpoints:
        client = embedded_cluster.client(endpoint)
        try:
            client.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")
        finally:
            client.close()
