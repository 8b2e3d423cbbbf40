"""Shared pytest configuration: fixture plugins used across test packages.

Each plugin's fixtures start their service (embedded ClickHouse cluster, throwaway PostgreSQL) only when a test asks.
"""

pytest_plugins = ["airflow_provider_dpone.embedded.pytest_plugin", "tests.fixtures.postgres"]
