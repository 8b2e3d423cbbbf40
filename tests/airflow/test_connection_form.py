"""Every extra key docs/connections.md documents is reachable from Airflow's connection form.

The form is read as the UI reads it: the hook metadata Airflow's API serves the connection form
(``HookMetaService.hook_meta_data``, from the discovered provider). The Add form shows every extra field it lists;
Airflow 3.3's Edit form lists only the keys a connection's extra holds (its ``setConf`` keeps the fields whose key
is in the extra JSON), so the connection the embedded cluster prints carries every key, with the form's default.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService
from dpone_embedded.cluster import CONNECTION_OPTION_DEFAULTS

from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

pytestmark = pytest.mark.integration

DOCS = Path(__file__).resolve().parents[2] / "docs" / "connections.md"
_ROW = re.compile(r"^\| `(?P<key>[a-z_]+)` \| (?P<label>[^|]+?) \|", re.MULTILINE)


def documented_keys() -> dict[str, str]:
    """Each extra key of the ``dpone_clickhouse`` table in docs/connections.md, with its form label."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("| Extra key | Form label |") : text.index("<!-- END GENERATED: connection-fields")]
    return {match["key"]: match["label"] for match in _ROW.finditer(section)}


@pytest.fixture(scope="module")
def form() -> dict[str, Any]:
    """The extra fields Airflow's API serves the connection form for ``dpone_clickhouse``."""
    [meta] = [meta for meta in HookMetaService.hook_meta_data() if meta.connection_type == "dpone_clickhouse"]
    assert meta.extra_fields is not None
    return dict(meta.extra_fields)


def test_every_documented_extra_key_is_a_field_of_the_add_form(form: dict[str, Any]) -> None:
    documented = documented_keys()
    assert len(documented) >= 10
    assert set(form) == set(documented)
    for key, label in documented.items():
        assert form[key]["schema"]["title"] == label
        assert form[key]["description"], f"{key} has no description in the form"


def test_the_embedded_connection_lists_every_field_in_the_edit_form_with_the_form_default(
    form: dict[str, Any],
) -> None:
    """The Edit form of a connection created from the embedded cluster's JSON or URI lists every documented field:
    its extra holds every key, each (but the member map it sets) at the default the Add form would save."""
    assert set(CONNECTION_OPTION_DEFAULTS) == set(documented_keys())
    for key, value in CONNECTION_OPTION_DEFAULTS.items():
        assert value == form[key]["value"], key
    options = DponeClickHouseHook.parse_options(CONNECTION_OPTION_DEFAULTS)
    assert options == type(options)(), "the defaults are the connection type's own"
