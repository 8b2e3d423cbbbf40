"""The maintenance DAGs' trigger form: a guard the help calls optional can be left empty in the Airflow UI.

Airflow 3.3's trigger form marks a param required when its schema has a ``type`` that is not a list holding
``"null"`` (the UI bundle's rule, ``airflow/ui/dist``: ``!!schema.type && (!Array.isArray(schema.type) ||
!schema.type.includes("null"))``), and sends an emptied field as ``null``; the run's params must then validate.
"""

from __future__ import annotations

import copy
import runpy
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit

EXAMPLES = Path(__file__).resolve().parents[2] / "dags_examples"
MAINTENANCE = (
    "clickhouse_external_abort.py",
    "clickhouse_external_void_permit.py",
    "clickhouse_external_release.py",
)
OPTIONAL = {"operation_id", "retired_server_uuid", "accepted_row_count"}


def _dag(name: str) -> Any:
    return runpy.run_path(str(EXAMPLES / name), run_name="maintenance_params")["dag"]


def _required_in_the_form(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return bool(kind) and (not isinstance(kind, list) or "null" not in kind)


@pytest.mark.parametrize("name", MAINTENANCE)
def test_the_guards_are_optional_in_the_trigger_form(name: str) -> None:
    params = _dag(name).params
    required = {key for key in params if _required_in_the_form(params.get_param(key).schema)}
    assert "run_id" in required
    assert not required & OPTIONAL, f"optional guards marked required: {sorted(required & OPTIONAL)}"


@pytest.mark.parametrize("name", MAINTENANCE)
def test_a_form_with_the_guards_left_empty_validates(name: str) -> None:
    params = copy.deepcopy(_dag(name).params)
    params["run_id"] = "manual__2026-04-01T00:00:00+00:00"
    if "decision" in params:
        params["decision"] = "restored"
    for key in OPTIONAL & set(params):
        params[key] = None  # what the form sends for an emptied field
    assert params.validate()["operation_id"] is None


@pytest.mark.parametrize("name", MAINTENANCE)
@pytest.mark.parametrize("value", [None, ""])
def test_an_empty_guard_renders_as_no_guard(name: str, value: str | None) -> None:
    """An emptied field reaches the task as no guard (not the text ``None``, which would name another operation)."""
    dag = _dag(name)
    (task,) = dag.tasks
    params = {"dag_id": "clickhouse_external_full_refresh", "run_id": "manual__1", **dict.fromkeys(OPTIONAL, value)}
    for field in OPTIONAL & set(task.template_fields):
        assert task.render_template(getattr(task, field), {"params": params}) == ""
