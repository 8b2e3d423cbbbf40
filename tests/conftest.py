"""Shared pytest configuration: a session Airflow home of its own, fixture plugins used across test packages, and the
rule that every test file declares its kind.

``tests.support.airflow_home`` is imported before any import of Airflow, so no test sees the caller's ``AIRFLOW_HOME``, its
``airflow.cfg`` or inherited ``AIRFLOW__*`` variables. Each plugin's fixtures start their service (embedded ClickHouse
cluster, throwaway PostgreSQL, the Airflow metadata database) only when a test asks.

A test file lives beside the product code it tests (``tests/core``, ``tests/cluster``, ``tests/transfer``,
``tests/airflow``, ``tests/embedded``, ``tests/project``); what kind of test it is (the markers whose description starts
with ``kind:`` in ``pyproject.toml``) it declares in its module ``pytestmark``, exactly one, so ``pytest -m <kind>``
selects a kind across the routes.
"""

import pytest

import tests.support.airflow_home  # noqa: F401  -- first: isolates Airflow's configuration before any import of Airflow

pytest_plugins = [
    "tests.support.fixtures.airflow",
    "dpone_embedded.pytest_plugin",
    "tests.support.fixtures.postgres",
    "tests.support.fixtures.object_store",
]

KIND_PREFIX = "kind:"


def registered_kinds(config: pytest.Config) -> frozenset[str]:
    """The registered kind markers: ``markers`` lines of the form ``<name>: kind: <description>``."""
    kinds = set()
    for line in config.getini("markers"):
        name, _, description = line.partition(":")
        if description.strip().startswith(KIND_PREFIX):
            kinds.add(name.split("(")[0].strip())
    return frozenset(kinds)


def declared_kinds(module: object, kinds: frozenset[str]) -> list[str]:
    """The kind markers a test module's ``pytestmark`` declares (a marker or a list of markers)."""
    marks = getattr(module, "pytestmark", [])
    marks = marks if isinstance(marks, list) else [marks]
    return [mark.name for mark in marks if getattr(mark, "name", None) in kinds]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every collected test file declares exactly one kind, or the run stops before any test runs.

    Tests marked ``slow`` are then collected first (the order is otherwise kept), so under ``make test``'s two
    processes a long file starts at once beside the rest instead of running alone at the end."""
    kinds = registered_kinds(config)
    modules = {module.nodeid: module for item in items if (module := item.getparent(pytest.Module)) is not None}
    wrong = {
        nodeid: declared
        for nodeid, module in modules.items()
        if len(declared := declared_kinds(module.obj, kinds)) != 1
    }
    if wrong:
        lines = [f"{nodeid}: declares {declared or 'no kind'}" for nodeid, declared in sorted(wrong.items())]
        raise pytest.UsageError(
            "every test file declares exactly one kind in its pytestmark, one of "
            f"{sorted(kinds)} (tests/conftest.py):\n" + "\n".join(lines)
        )
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
