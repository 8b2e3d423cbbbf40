"""Airflow operators: thin surface over the protocol (read connections, build adapters, shape XCom).

The external-replication full refresh of one ClickHouse cluster table is four tasks::

    DponeFenceOperator >> DponeStageOperator >> DponePublishOperator >> DponeCleanupOperator
"""

from __future__ import annotations

from airflow_provider_dpone.operators.fence_stage import DponeFenceOperator, DponeStageOperator
from airflow_provider_dpone.operators.publish_cleanup import (
    DponeCleanupOperator,
    DponePublishOperator,
    publication_asset,
)

__all__ = [
    "DponeCleanupOperator",
    "DponeFenceOperator",
    "DponePublishOperator",
    "DponeStageOperator",
    "publication_asset",
]
