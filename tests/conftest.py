"""Shared pytest configuration: fixture plugins used across test packages."""

pytest_plugins = ["tests.fixtures.postgres"]
