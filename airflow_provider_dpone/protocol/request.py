"""What one external full refresh publishes: the request every Airflow task of the run rebuilds identically.

The request is pure input (names, scheduler invocation, normalized plan digest, table definition, byte bound). Every
identity the protocol uses is derived from it deterministically, so a retried task in a fresh process arrives at the
same ``target_key``, ``operation_id`` and candidate name without reading XCom.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, model_validator

from airflow_provider_dpone.contracts.authority_fields import Hex64
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.identifiers import validate_identifier
from airflow_provider_dpone.contracts.identities import candidate_name, operation_id, target_key
from airflow_provider_dpone.ports.publication import TableSpec
from airflow_provider_dpone.protocol.runtime_admission import is_direct_mergetree


class PublicationRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster: StrictStr
    database: StrictStr
    target: StrictStr
    dag_id: StrictStr = Field(min_length=1)
    run_id: StrictStr = Field(min_length=1)
    normalized_plan_digest: Hex64
    replication_mode: Literal["external"] = "external"
    table: TableSpec
    max_source_bytes: StrictInt = Field(ge=1)

    @model_validator(mode="after")
    def _names_are_identifiers(self) -> PublicationRequest:
        validate_identifier(self.cluster, what="cluster")
        validate_identifier(self.database, what="database")
        validate_identifier(self.target, what="target")
        for index, column in enumerate(self.table.columns):
            validate_identifier(column.name, what=f"table.columns[{index}]")
        for index, name in enumerate(self.table.order_by):
            validate_identifier(name, what=f"table.order_by[{index}]")
        names = [column.name for column in self.table.columns]
        if len(set(names)) != len(names) or not set(self.table.order_by) <= set(names):
            raise ValueError("table columns must be unique and order_by must name table columns")
        if not is_direct_mergetree(self.table.engine):
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED", "table.engine")
        return self

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> PublicationRequest:
        """Validate untrusted values; failures carry a stable code and field paths, never the offending values."""
        try:
            return cls.model_validate(dict(values))
        except ValidationError as error:
            paths = sorted({".".join(str(part) for part in item["loc"]) or "$" for item in error.errors()})
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_REQUEST_INVALID", f"fields: {paths[:8]}") from None

    @property
    def target_key(self) -> str:
        return target_key(self.cluster, self.database, self.target)

    @property
    def operation_id(self) -> str:
        return operation_id(
            dag_id=self.dag_id,
            run_id=self.run_id,
            target_key_hex=self.target_key,
            normalized_plan_digest=self.normalized_plan_digest,
        )

    @property
    def candidate_name(self) -> str:
        return candidate_name(self.target, self.operation_id)
