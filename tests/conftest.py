"""Shared pytest configuration: fixture plugins used across test packages (the embedded cluster's fixtures start a
cluster only for tests that use them)."""

pytest_plugins = ["airflow_provider_dpone.embedded.pytest_plugin", "tests.fixtures.postgres"]
