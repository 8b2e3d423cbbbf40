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
    "placeholders": {"host": "clickhouse-0.internal", "port": "8123", "schema": "default", "login": "default"},
}
"""Connection form behaviour, declared once (provider info, and the hook's ``get_ui_field_behaviour``). Airflow 3's
form applies placeholders to the standard fields only (the port's is the plain-HTTP default; 8443 with HTTPS); an
extra field shows its examples and description, declared on the options model (``conn-fields``)."""


def _option(kind: str, default: str | None, example: str | None, description: str) -> dict[str, Any]:
    return {"description": description, "version_added": "0.1.0", "type": kind, "example": example, "default": default}


CONFIG: dict[str, Any] = {
    "dpone": {
        "description": "Settings of the dpone ClickHouse cluster publication and native transfer "
        "(env AIRFLOW__DPONE__<OPTION>). Connections carry hosts and secrets; these are deployment-wide.",
        "options": {
            "artifact_base": _option(
                "string",
                None,
                "s3://aws_default@bucket/dpone/artifacts",
                "Where sealed publication artifacts are stored (an ObjectStoragePath URL). Every worker that may run "
                "a later try must reopen them: object storage (s3://, gs://) or a file:// path on a mount every "
                "worker shares. Unset: refused (DPONE_ARTIFACT_STORE_WORKER_LOCAL) unless single_worker is true, "
                "then file://{AIRFLOW_HOME}/dpone/artifacts.",
            ),
            "single_worker": _option(
                "boolean",
                "False",
                "True",
                "Declares that every task try of the deployment runs on one machine (LocalExecutor, dag.test(), the "
                "demo): only then may an unset artifact_base mean the worker-local file://{AIRFLOW_HOME}/dpone/"
                "artifacts.",
            ),
            "native_transfer_base": _option(
                "string",
                None,
                "s3://aws_default@bucket/dpone/native-transfer",
                "Where the native transfer keeps its stage and journal (an ObjectStoragePath URL); a transfer "
                "operator's stage_base argument wins. Unset: refused (native_transfer.stage_store_worker_local) unless "
                "single_worker is true, then file://<system temp dir>/dpone-native-transfer. The store must refuse a "
                "second write of one key (S3: If-None-Match: *): every task start probes it "
                "(native_transfer.stage_store_overwrites).",
            ),
            "external_replication_admission": _option(
                "boolean",
                "True",
                "False",
                "The rollback switch of external replication: False refuses every new external-mode operation at "
                "its fence (DPONE_CLICKHOUSE_CLUSTER_EXTERNAL_ADMISSION_DISABLED) before anything is written. It "
                "deletes nothing: an operation already fenced keeps its authority record, candidates and "
                "predecessor, and still resumes, aborts and cleans up. Internal mode is not affected.",
            ),
            "ddl_task_timeout_seconds": _option(
                "integer",
                "120",
                "600",
                "Non-deferrable publish and cleanup: how long the initiator of an ON CLUSTER DDL waits for the hosts "
                "before the task polls the queue in the worker (a deferrable task waits at most 1 s, then defers).",
            ),
            "replica_sync_timeout_seconds": _option(
                "float",
                "30.0",
                "120",
                "Internal replication: the bound of one replica's convergence wait per stage try (a replica still "
                "behind fails the try retryably, and the retry waits again).",
            ),
            "void_skew_margin_seconds": _option(
                "integer",
                "60",
                "120",
                "The clock skew between workers and the coordinator that the void-permit proof allows; a larger real "
                "skew makes the proof unsound.",
            ),
            "allow_unverified_tls": _option(
                "boolean",
                "False",
                "True",
                "Whether a ClickHouse connection's verify: false (no certificate chain and no host name check) may "
                "take effect. False: such a connection is refused (DPONE_CLICKHOUSE_TRANSPORT_UNVERIFIED) before any "
                "request, so no password reaches an unverified endpoint. True: it is used, with a WARNING line naming "
                "the connection each time it is resolved. A native-transfer source always requires verified TLS.",
            ),
            "extraction_timeout_seconds": _option(
                "integer",
                "3600",
                "14400",
                "Cluster publication: the server-side bound (max_execution_time) of each read of the source query; "
                "the extraction runs read-only (readonly = 1) and its query may not lift this bound.",
            ),
            "progress_heartbeat_seconds": _option(
                "float",
                "300.0",
                "60",
                "Publish, cleanup and their trigger: how often an unchanged waiting line (hosts finished, pending "
                "members) is logged again; a changed line is logged at once. The trigger polls the DDL queue at the "
                "operator's poll_interval (default 5 s, the first polls sooner).",
            ),
        },
    }
}
"""The provider's ``[dpone]`` section as Airflow registers it (``airflow config list``, Admin > Config). Each
default is the one the code falls back to (a test holds them equal)."""


def get_provider_info() -> dict[str, Any]:
    """Return the provider's package name, integrations, hooks, operators, triggers, config and connection type."""
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
        "config": copy.deepcopy(CONFIG),
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
