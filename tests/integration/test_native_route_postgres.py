"""The route end to end into a real PostgreSQL: the shared exactness corpus and recovery matrix of seed 003.

Source: the real ClickHouse engine (in-process). Stage and journal: file:// under tmp. Target: the PostgreSQL adapter
on a throwaway server, through the bridge, with COMMIT faults injected by the harness's connection proxy. The cases
are :class:`~tests.integration.native_route_scenarios.RouteCorpus`, the same ones SQL Server runs under
``make test-real``. "Source-free" is proved by the connector's count and by a client factory that fails the test if
it is called at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.transfer.values.chunk import RelationRef
from tests.fixtures.target_harness import PostgresHarness
from tests.integration.native_chdb import admin, db
from tests.integration.native_route_corruption import CorruptionCorpus
from tests.integration.native_route_pg import PgRoute
from tests.integration.native_route_scenarios import MakeRoute, RouteCorpus

__all__ = ["admin", "db"]  # fixtures shared through tests/integration/native_chdb.py

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def harness(postgres_server) -> Iterator[PostgresHarness]:
    created = PostgresHarness(postgres_server.dsn)
    yield created
    created.close()


@pytest.fixture
def make_route(harness: PostgresHarness) -> MakeRoute:
    def make(root: Path, relation: RelationRef, **fields: Any) -> PgRoute:
        return PgRoute(root, relation, harness, **fields)

    return make


class TestRouteOnPostgres(RouteCorpus):
    """Every corpus table and every kill of the matrix, into PostgreSQL."""


class TestCorruptionOnPostgres(CorruptionCorpus):
    """Every corruption of the transfer path, caught before publication into PostgreSQL."""
