"""Shared pytest configuration: a session Airflow home of its own, and fixture plugins used across test packages.

``tests.airflow_home`` is imported before anything else, so no test sees the caller's ``AIRFLOW_HOME``, its
``airflow.cfg`` or inherited ``AIRFLOW__*`` variables. Each plugin's fixtures start their service (embedded ClickHouse
cluster, throwaway PostgreSQL) only when a test asks.
"""

import tests.airflow_home  # noqa: F401  -- first: isolates Airflow's configuration before any import of Airflow

pytest_plugins = ["dpone_embedded.pytest_plugin", "tests.fixtures.postgres", "tests.fixtures.object_store"]
