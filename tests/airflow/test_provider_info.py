"""Provider info lists every module that defines a public hook, operator or trigger class, and each listed module
imports (a repeated dictionary key once dropped a whole section silently)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest
from airflow.sdk import BaseHook, BaseOperator
from airflow.triggers.base import BaseTrigger

import airflow_provider_dpone.hooks
import airflow_provider_dpone.operators
import airflow_provider_dpone.triggers
from airflow_provider_dpone.provider_info import get_provider_info

pytestmark = pytest.mark.unit

_SECTIONS: dict[str, tuple[ModuleType, type]] = {
    "hooks": (airflow_provider_dpone.hooks, BaseHook),
    "operators": (airflow_provider_dpone.operators, BaseOperator),
    "triggers": (airflow_provider_dpone.triggers, BaseTrigger),
}


def _defining_modules(package: ModuleType, base: type) -> set[str]:
    """Modules defining a concrete class users instantiate: a leaf of the package's class tree (shared bases excluded)."""
    found: list[type] = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, base) and cls.__module__ == module.__name__ and not cls.__name__.startswith("_"):
                found.append(cls)
    leaves = [cls for cls in found if not any(other is not cls and issubclass(other, cls) for other in found)]
    return {cls.__module__ for cls in leaves}


@pytest.mark.parametrize("section", sorted(_SECTIONS))
def test_every_module_with_a_public_class_is_listed_and_imports(section: str) -> None:
    package, base = _SECTIONS[section]
    listed = {module for entry in get_provider_info()[section] for module in entry["python-modules"]}
    for module in listed:
        importlib.import_module(module)
    defining = _defining_modules(package, base)
    assert defining, f"no {section} found"
    assert defining <= listed, f"{section} missing from provider info: {sorted(defining - listed)}"


def test_metadata_keeps_the_arrow_names_the_docs_and_ships_types_and_examples() -> None:
    import tomllib
    from pathlib import Path

    root = Path(airflow_provider_dpone.hooks.__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    info = get_provider_info()
    assert "ClickHouse → SQL Server" in info["description"] and "ClickHouse → SQL Server" in project["description"]
    # no index hosts the package: the link opens the shipped page, and no project URL points at a missing index page
    assert info["documentation-url"] == airflow_provider_dpone.docs_page("getting-started").as_uri()
    # Airflow 3.3 shows the Project-URL instead: the page the provider's plugin serves in the API server
    from airflow_provider_dpone.docs_plugin import DOCUMENTATION_PATH

    assert project["urls"] == {"Documentation": DOCUMENTATION_PATH}
    assert (root / "airflow_provider_dpone" / "py.typed").exists()
    requirement = next(dep for dep in project["dependencies"] if dep.startswith("clickhouse-connect"))
    assert ">=1.12.0,<1.13" in requirement, "a tested range, not an exact pin"
    wheel = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["hatch"]["build"]["targets"]
    assert wheel["wheel"]["force-include"] == {
        "dags_examples": "airflow_provider_dpone/example_dags",
        "docs": "airflow_provider_dpone/docs",
    }
