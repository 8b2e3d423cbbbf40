"""The replication mode as data: what a request, runtime admission and a record's owner test need to know of a mode.

A :class:`ReplicationVariant` is a small frozen value (identities, engine class, the ``internal_replication`` flag,
record schemas, codes, labels). What a mode *does* differently (its staging, first intents, record functions) is
the protocol's :class:`~airflow_provider_dpone.cluster.protocol.mode.ModeBehaviour`, held by the machine that runs
it (:class:`~airflow_provider_dpone.cluster.protocol.service.PublicationService`): the request stays pure input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.external import EXTERNAL_SCHEMA
from airflow_provider_dpone.cluster.values.authority.internal import INTERNAL_SCHEMA_V1, INTERNAL_SCHEMA_V2
from airflow_provider_dpone.cluster.values.clickhouse_engines import EngineClass
from airflow_provider_dpone.cluster.values.identities import (
    CANDIDATE_INFIX,
    INTERNAL_CANDIDATE_INFIX,
    INTERNAL_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
)
from airflow_provider_dpone.core.manifest.cluster import ReplicationMode


@dataclass(frozen=True)
class ReplicationVariant:
    name: ReplicationMode
    protocol_version: str
    """Enters ``operation_id``: the two modes never resume each other's operation."""
    candidate_infix: str
    """Enters the candidate name (``<target><infix><operation>``)."""
    engine_class: EngineClass
    """The one engine class this mode publishes, candidates and targets alike."""
    internal_replication: bool
    """The ``internal_replication`` flag of ``system.clusters`` this mode requires on every member."""
    record_schemas: frozenset[str]
    """The authority record schemas of this mode (a successor of another mode's record adopts its target)."""
    unresolved_code: str
    """What a request of the other mode fails with while a record of this mode is unresolved."""
    log_label: str
    """The ``dpone`` value of every ON CLUSTER DDL's ``log_comment``."""
    quality_replay: bool
    """Whether durable quality replay can be selected: its capsule is bound to the replicated candidate."""

    def holds(self, record: AuthorityRecord) -> bool:
        """The own-mode test: ``record`` is a record of this mode."""
        return record.replication_mode == self.name

    def adoptable_engines(self, previous_schema: str | None) -> frozenset[EngineClass]:
        """The engine classes an existing target may have: this mode's, plus that of the mode whose record the
        record succeeded (``previous_schema``; a mode migration adopts the target it left)."""
        previous = {mode.engine_class for mode in VARIANTS.values() if previous_schema in mode.record_schemas}
        return frozenset({self.engine_class, *previous})


EXTERNAL: Final = ReplicationVariant(
    name=ReplicationMode.EXTERNAL,
    protocol_version=PROTOCOL_VERSION,
    candidate_infix=CANDIDATE_INFIX,
    engine_class=EngineClass.MERGE_TREE,
    internal_replication=False,
    record_schemas=frozenset({EXTERNAL_SCHEMA}),
    unresolved_code="DPONE_CLICKHOUSE_CLUSTER_EXTERNAL_RECORD_UNRESOLVED",
    log_label="cluster-external-full-refresh",
    quality_replay=False,
)
"""One candidate per member, each staged directly, on an ``internal_replication=false`` cluster."""

INTERNAL: Final = ReplicationVariant(
    name=ReplicationMode.INTERNAL,
    protocol_version=INTERNAL_PROTOCOL_VERSION,
    candidate_infix=INTERNAL_CANDIDATE_INFIX,
    engine_class=EngineClass.REPLICATED_MERGE_TREE,
    internal_replication=True,
    record_schemas=frozenset({INTERNAL_SCHEMA_V1, INTERNAL_SCHEMA_V2}),
    unresolved_code="DPONE_CLICKHOUSE_CLUSTER_INTERNAL_RECORD_UNRESOLVED",
    log_label="cluster-full-refresh",
    quality_replay=True,
)
"""One replicated candidate, created by one fenced ``ON CLUSTER`` CREATE and loaded once through one replica."""

VARIANTS: Final[Mapping[ReplicationMode, ReplicationVariant]] = {
    ReplicationMode.INTERNAL: INTERNAL,
    ReplicationMode.EXTERNAL: EXTERNAL,
}
"""Every replication mode by name (the manifest's ``replication_mode``, a record's ``replication_mode``)."""
