"""Airflow operators: a thin surface over the protocol (the hook builds the adapters; operators call one entry point
and shape its result into logs and XCom).

The full refresh of one ClickHouse cluster table, in either replication mode (internal, the default, or external), is
four tasks::

    DponeFenceOperator >> DponeStageOperator >> DponePublishOperator >> DponeCleanupOperator

and, from a maintenance DAG, ``DponeAbortOperator`` aborts one such run's operation before publication and
``DponeVoidPermitOperator`` voids its unproven DDL permit with recorded proof, so that the stopped task can retry,
and ``DponeReleaseOperator`` records the operator's decision (restored or accepted) on a publication that stopped
after its swap, which frees the target for a new run.

The names below are loaded on first use (PEP 562), so a DAG file that imports one operator module (the native
transfer, say) does not pay for the others when it is parsed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_dpone.operators.abort import (
        DponeAbortOperator,
        DponeReleaseOperator,
        DponeVoidPermitOperator,
    )
    from airflow_provider_dpone.operators.full_refresh import DponeFenceOperator, DponeStageOperator
    from airflow_provider_dpone.operators.publish_cleanup import (
        DponeCleanupOperator,
        DponePublishOperator,
        publication_asset,
    )

_MODULE_OF = {
    "DponeAbortOperator": "abort",
    "DponeVoidPermitOperator": "abort",
    "DponeReleaseOperator": "abort",
    "DponeFenceOperator": "full_refresh",
    "DponeStageOperator": "full_refresh",
    "DponePublishOperator": "publish_cleanup",
    "DponeCleanupOperator": "publish_cleanup",
    "publication_asset": "publish_cleanup",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "DponeAbortOperator",
    "DponeCleanupOperator",
    "DponeFenceOperator",
    "DponePublishOperator",
    "DponeReleaseOperator",
    "DponeStageOperator",
    "DponeVoidPermitOperator",
    "publication_asset",
]
