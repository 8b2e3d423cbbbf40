"""Shared pytest configuration: registers the embedded cluster's fixtures (started only by tests that use them)."""

pytest_plugins = ["airflow_provider_dpone.embedded.pytest_plugin"]
