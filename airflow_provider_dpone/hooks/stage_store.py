"""Where the native transfer keeps its stage and journal, and the probe that the store refuses a second write.

The base is the operator's ``stage_base``, else ``[dpone] native_transfer_base``, else a worker-local directory only
where the deployment declares one worker. Every transfer task start and the connection's Test button
(:meth:`~airflow_provider_dpone.hooks.clickhouse.DponeClickHouseHook.test_connection`) probe it the same way.
"""

from __future__ import annotations

import tempfile
from typing import Final

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.storage import ObjectStore, probe_create_once, require_store_url

DEFAULT_BASE_DIR: Final = "dpone-native-transfer"
INVALID_STAGE_URL: Final = "native_transfer.stage_store_url_invalid"


def stage_base(configured: str | None = None) -> str:
    """The stage/journal base URL: the operator's argument, the Airflow config, or a worker-local directory only where
    the deployment declares one worker (``[dpone] single_worker = True``); otherwise
    ``native_transfer.stage_store_worker_local`` before the task touches anything (a retry on another worker could not
    recover from a stage it cannot read)."""
    if configured:
        return require_store_url(configured, INVALID_STAGE_URL).rstrip("/")
    from airflow.configuration import conf

    from_config = conf.get("dpone", "native_transfer_base", fallback=None)
    if from_config:
        return require_store_url(str(from_config), INVALID_STAGE_URL).rstrip("/")
    if not conf.getboolean("dpone", "single_worker", fallback=False):
        raise DponeError(
            "native_transfer.stage_store_worker_local",
            "[dpone] native_transfer_base unset, [dpone] single_worker false",
        )
    return f"file://{tempfile.gettempdir()}/{DEFAULT_BASE_DIR}"


def require_create_once(base: str) -> str:
    """``base`` once it refused a second write of one probe object, else ``native_transfer.stage_store_overwrites``
    (:func:`~airflow_provider_dpone.core.storage.probe_create_once`): checked at every task start, before the journal,
    since a store can be changed under a deployment (a proxy, a migration to another S3-compatible server)."""
    probe_create_once(ObjectStore(base))
    return base


def configured_stage_store_failure() -> str | None:
    """The Test button's look at ``[dpone] native_transfer_base`` where it is set: None when the store refused the
    probe's second write (or nothing is configured), else one coded line (never the URL: it may name a bucket)."""
    from airflow.configuration import conf

    configured = conf.get("dpone", "native_transfer_base", fallback=None)
    if not configured:
        return None
    try:
        require_create_once(stage_base(str(configured)))
    except DponeError as error:
        return error.render()
    except Exception as error:  # noqa: BLE001 -- the Test button answers, it never raises
        return f"[dpone] native_transfer_base could not be probed ({type(error).__name__})"
    return None
