"""``DponeClickHouseHook``: the ``dpone_clickhouse`` connection type.

The hook resolves one Airflow connection into transport options. Member clients, the one-shot mutation client and
the authority adapter are built from it by the publication layer; the hook itself holds no protocol state.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from airflow.sdk import BaseHook
from pydantic import ValidationError

from airflow_provider_dpone.contracts.connection import ClickHouseConnectionOptions
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.provider_info import UI_FIELD_BEHAVIOUR

CONNECTION_TYPES = ("dpone_clickhouse", "clickhouse")
"""Accepted connection types: ours, and the official ClickHouse provider's (same fields, no dpone extras)."""


class DponeClickHouseHook(BaseHook):
    """Resolve a ClickHouse cluster connection (coordinator endpoint, credentials, transport options)."""

    conn_name_attr = "dpone_clickhouse_conn_id"
    default_conn_name = "dpone_clickhouse_default"
    conn_type = "dpone_clickhouse"
    hook_name = "dpone ClickHouse cluster"
    _EXTRA_PREFIX: ClassVar[str] = "extra__dpone_clickhouse__"

    def __init__(self, dpone_clickhouse_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dpone_clickhouse_conn_id = dpone_clickhouse_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Connection form behaviour in the hook-method form; the same data provider info declares."""
        return {
            "hidden_fields": list(UI_FIELD_BEHAVIOUR["hidden-fields"]),
            "relabeling": dict(UI_FIELD_BEHAVIOUR["relabeling"]),
            "placeholders": dict(UI_FIELD_BEHAVIOUR["placeholders"]),
        }

    @classmethod
    def parse_options(cls, extra: str | dict[str, Any] | None) -> ClickHouseConnectionOptions:
        """Parse a connection's extra into options; unknown keys and wrong types fail with a stable code."""
        raw: Any = extra or {}
        if isinstance(raw, str):
            try:
                raw = json.loads(raw) if raw.strip() else {}
            except json.JSONDecodeError:
                raise DponeError("DPONE_CONNECTION_INVALID", "extra is not JSON") from None
        if not isinstance(raw, dict):
            raise DponeError("DPONE_CONNECTION_INVALID", "extra is not a JSON object")
        cleaned = {key.removeprefix(cls._EXTRA_PREFIX): value for key, value in raw.items() if value is not None}
        try:
            return ClickHouseConnectionOptions.model_validate(cleaned)
        except ValidationError as exc:
            fields = sorted({".".join(str(p) for p in err["loc"]) for err in exc.errors()})
            raise DponeError("DPONE_CONNECTION_INVALID", "fields: " + ", ".join(fields)) from None
