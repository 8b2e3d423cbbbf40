"""Provider metadata that Airflow's ProvidersManager reads through the ``apache_airflow_provider`` entry point.

Kept import-light on purpose: Airflow calls this while discovering providers, before any hook is used.
"""

from __future__ import annotations

import copy
from typing import Any

from airflow_provider_dpone import __version__, docs_page
from airflow_provider_dpone.core.connection_options import connection_form_fields

NATIVE_TRANSFER = "dpone ClickHouse native transfer"
DESCRIPTION = "Fenced, exactly-once ClickHouse cluster publication and ClickHouse → SQL Server / PostgreSQL transfer."
"""The provider's one-line description (the arrow is part of it: the transfer goes one way)."""
DOCUMENTATION_PAGE = "getting-started"
"""The docs page the provider's documentation link opens: the one shipped in the package (no index hosts it)."""
HOOK_CLASS = "airflow_provider_dpone.hooks.clickhouse.DponeClickHouseHook"

UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden-fields": ["extra"],
    "relabeling": {"host": "Coordinator host", "port": "HTTP(S) port", "schema": "Database"},
    "placeholders": {
        "host": "clickhouse-0.internal",
        "port": "8443",
        "schema": "default",
        "login": "default",
        "member_http_port": "8443",
        "member_endpoints": '{"1:1": "clickhouse-1.internal:8443", "1:2": "clickhouse-2.internal:8443"}',
        "ca_cert": "/etc/ssl/certs/ca-certificates.crt",
    },
}
"""Connection form behaviour, declared once (provider info, and the hook's ``get_ui_field_behaviour``)."""


def get_provider_info() -> dict[str, Any]:
    """Return the provider's package name, integrations, hooks, operators, triggers and connection type."""
    return {
        "package-name": "airflow-provider-dpone",
        "name": "dpone",
        "description": DESCRIPTION,
        "documentation-url": docs_page(DOCUMENTATION_PAGE).as_uri(),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "dpone ClickHouse cluster publication",
                "external-doc-url": "https://clickhouse.com/docs",
                "tags": ["software"],
            },
            {
                "integration-name": NATIVE_TRANSFER,
                "external-doc-url": "https://clickhouse.com/docs",
                "tags": ["software"],
            },
        ],
        "hooks": [
            {
                "integration-name": "dpone ClickHouse cluster publication",
                "python-modules": ["airflow_provider_dpone.hooks.clickhouse"],
            },
            {"integration-name": NATIVE_TRANSFER, "python-modules": ["airflow_provider_dpone.hooks.native_transfer"]},
        ],
        "operators": [
            {
                "integration-name": "dpone ClickHouse cluster publication",
                "python-modules": [
                    "airflow_provider_dpone.operators.full_refresh",
                    "airflow_provider_dpone.operators.publish_cleanup",
                    "airflow_provider_dpone.operators.abort",
                ],
            },
            {
                "integration-name": NATIVE_TRANSFER,
                "python-modules": ["airflow_provider_dpone.operators.native_transfer"],
            },
        ],
        "triggers": [
            {
                "integration-name": "dpone ClickHouse cluster publication",
                "python-modules": ["airflow_provider_dpone.triggers.ddl_queue"],
            },
        ],
        "connection-types": [
            {
                "connection-type": "dpone_clickhouse",
                "hook-class-name": HOOK_CLASS,
                "hook-name": "dpone ClickHouse cluster",
                "conn-fields": connection_form_fields(),
                "ui-field-behaviour": copy.deepcopy(UI_FIELD_BEHAVIOUR),
            },
        ],
    }
