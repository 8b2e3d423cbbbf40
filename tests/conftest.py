"""Shared pytest configuration: a session Airflow home of its own, and fixture plugins used across test packages.

``tests.support.airflow_home`` is imported before any import of Airflow, so no test sees the caller's ``AIRFLOW_HOME``, its
``airflow.cfg`` or inherited ``AIRFLOW__*`` variables. Each plugin's fixtures start their service (embedded ClickHouse
cluster, throwaway PostgreSQL, the Airflow metadata database) only when a test asks.
"""

import pytest

import tests.support.airflow_home  # noqa: F401  -- first: isolates Airflow's configuration before any import of Airflow

pytest_plugins = [
    "tests.support.fixtures.airflow",
    "dpone_embedded.pytest_plugin",
    "tests.support.fixtures.postgres",
    "tests.support.fixtures.object_store",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` are collected first (the order is otherwise kept), so under ``make test``'s two
    processes a long file starts at once beside the rest instead of running alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
