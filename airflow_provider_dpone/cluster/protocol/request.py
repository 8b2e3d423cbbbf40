"""What one cluster full refresh publishes: the request every Airflow task of the run rebuilds identically.

The request is pure input (names, scheduler invocation, normalized plan digest, replication mode, the declared table,
byte bound, optional row budget), built once per task try and the same in every task. Every identity the protocol
uses is derived from it deterministically, so a retried task in a fresh process arrives at the same ``target_key``,
``operation_id`` and candidate name without reading XCom. The typed columns are not part of it: staging takes them
from the source it extracts (or the artifact it bound) and completes the candidate's table there
(:meth:`PublicationRequest.candidate_table`).

``replication_mode`` has no default here: the operators pass the admitted manifest's mode (whose own default is
``internal``). ``mode`` is its data (:mod:`~airflow_provider_dpone.cluster.values.replication`: identities, engine
class, flags); what the mode does is the machine's (:mod:`~airflow_provider_dpone.cluster.protocol.mode`), so the
request depends on no part of the protocol. The table engine must be the mode's engine class (internal: ``Replicated*MergeTree``,
external: a direct ``*MergeTree``), checked before anything is read. Each mode has its own protocol version in
``operation_id`` and its own candidate infix, so the two modes can never resume each other's operation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, model_validator

from airflow_provider_dpone.cluster.ports import ColumnSpec, DeclaredTable, TableSpec
from airflow_provider_dpone.cluster.values.clickhouse_engines import classify_engine
from airflow_provider_dpone.cluster.values.identities import candidate_name, operation_id, target_key
from airflow_provider_dpone.cluster.values.replication import VARIANTS, ReplicationVariant
from airflow_provider_dpone.core.canonical import Hex64
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import validate_identifier
from airflow_provider_dpone.core.manifest.cluster import QualityPolicy, ReplicationMode


class PublicationRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster: StrictStr
    database: StrictStr
    target: StrictStr
    dag_id: StrictStr = Field(min_length=1)
    run_id: StrictStr = Field(min_length=1)
    normalized_plan_digest: Hex64
    replication_mode: ReplicationMode
    table: DeclaredTable
    """The manifest's engine, sorting key and partition key (the typed columns come with the stage)."""
    max_source_bytes: StrictInt = Field(ge=1)
    max_source_rows: StrictInt | None = Field(default=None, ge=1)
    """The admitted content row budget (``None``: none declared); in the plan digest, so in ``operation_id``."""
    quality: QualityPolicy | None = None
    """The durable quality-replay policy when selected; ``None`` keeps the legacy behaviour."""

    @model_validator(mode="after")
    def _names_are_identifiers(self) -> PublicationRequest:
        validate_identifier(self.cluster, what="cluster")
        validate_identifier(self.database, what="database")
        validate_identifier(self.target, what="target")
        for index, name in enumerate(self.table.order_by):
            validate_identifier(name, what=f"table.order_by[{index}]")
        if self.quality is not None and not self.mode.quality_replay:
            raise DponeError("DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED", "durable quality replay needs internal mode")
        if classify_engine(self.table.engine) is not self.mode.engine_class:
            raise DponeError(
                "DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED", f"table.engine for {self.replication_mode} mode"
            )
        return self

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> PublicationRequest:
        """Validate untrusted values; failures carry a stable code and field paths, never the offending values."""
        try:
            return cls.model_validate(dict(values))
        except ValidationError as error:
            paths = sorted({".".join(str(part) for part in item["loc"]) or "$" for item in error.errors()})
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_REQUEST_INVALID", f"fields: {paths[:8]}") from None

    def candidate_table(self, columns: Sequence[tuple[str, str]]) -> TableSpec:
        """The candidate's table: the declared table with ``columns`` (the source's, or the bound artifact's). Column
        names are identifiers, unique, and the sorting key names columns; else it is refused before anything is
        read or written."""
        for index, (name, _) in enumerate(columns):
            validate_identifier(name, what=f"table.columns[{index}]")
        names = [name for name, _ in columns]
        if len(set(names)) != len(names) or not set(self.table.order_by) <= set(names):
            raise ValueError("table columns must be unique and order_by must name table columns")
        return TableSpec(
            columns=tuple(ColumnSpec(name=name, type=type_) for name, type_ in columns),
            engine=self.table.engine,
            order_by=self.table.order_by,
            partition_by=self.table.partition_by,
        )

    @property
    def mode(self) -> ReplicationVariant:
        """What this request's replication mode is (its data: the one value per mode)."""
        return VARIANTS[self.replication_mode]

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
            protocol_version=self.mode.protocol_version,
        )

    @property
    def candidate_name(self) -> str:
        return candidate_name(self.target, self.operation_id, self.mode.candidate_infix)
