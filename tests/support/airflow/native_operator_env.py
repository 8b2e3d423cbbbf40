"""Shared setup of the operator tests: the examples' source table on the in-process engine, seams, a task context."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer import NativeTransferManifest
from airflow_provider_dpone.transfer.ports import TargetInvocation, TargetPublicationReceipt, TransferTarget
from airflow_provider_dpone.transfer.source.session import ClickHouseSnapshotConnector, inprocess_transport
from airflow_provider_dpone.transfer.values.target_receipts import ChunkEvidence
from tests.support.airflow.airflow_env import EXAMPLES, load_dag_file
from tests.support.transfer import native_chdb

SOURCE_DATABASE = "events"
SOURCE_TABLE = "raw_events"
_DEMO = load_dag_file("dpone_example_transfer_demo", EXAMPLES / "transfer_demo.py")
RAW_EVENTS: str = _DEMO.RAW_EVENTS
BATCHES: tuple[str, ...] = _DEMO.BATCHES
"""The transfer examples' demo source (``dags_examples/transfer_demo.py``): 7 raw rows in 4 separate inserts, 5 of
them inside the examples' window ``[2026-09-01, 2026-09-02)``."""


def create_source(admin: Any) -> None:
    """(Re)create the examples' source table ``events.raw_events`` (a ReplacingMergeTree) with its 4 inserts."""
    admin.command(f"DROP DATABASE IF EXISTS {SOURCE_DATABASE} SYNC")
    admin.command(f"CREATE DATABASE {SOURCE_DATABASE} ENGINE = Atomic")
    admin.command(
        f"CREATE TABLE {SOURCE_DATABASE}.{SOURCE_TABLE} {RAW_EVENTS} ENGINE = ReplacingMergeTree(ver, is_deleted) "
        "PARTITION BY toYYYYMMDD(event_time) ORDER BY id"
    )
    for batch in BATCHES:
        admin.command(f"INSERT INTO {SOURCE_DATABASE}.{SOURCE_TABLE} VALUES {batch}")


@dataclass
class SourceSeam:
    """One connector for every try of a test, so its count is the total number of source connections."""

    deny: bool = False
    connector: ClickHouseSnapshotConnector = field(init=False)

    def __post_init__(self) -> None:
        path, _ = native_chdb.engine()
        self.connector = ClickHouseSnapshotConnector(self._client, inprocess_transport(path))

    def _client(self) -> Any:
        if self.deny:
            raise AssertionError("the source was opened")
        return native_chdb.client()

    def __call__(self, manifest: NativeTransferManifest) -> ClickHouseSnapshotConnector:
        return self.connector


class FlakyPublish:
    """A target whose first ``publish`` fails before anything is committed (then behaves normally)."""

    def __init__(self, target: TransferTarget, failures: int = 1) -> None:
        self._target = target
        self.failures = failures

    def publish(self, invocation: TargetInvocation, chunks: Sequence[ChunkEvidence]) -> TargetPublicationReceipt:
        if self.failures:
            self.failures -= 1
            raise DponeError("native_transfer.target_publication_failed", "connection refused before BEGIN (simulated)")
        return self._target.publish(invocation, chunks)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


class FailingCleanup:
    """A target whose staging objects cannot be dropped after a success (the target refuses the cleanup)."""

    def __init__(self, target: TransferTarget) -> None:
        self._target = target

    def cleanup(self, invocation: TargetInvocation) -> None:
        raise DponeError("native_transfer.target_unavailable", "the target refused the cleanup (simulated)")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


def context(dag_id: str = "dag", run_id: str = "manual__2026-09-30", try_number: int = 1) -> dict[str, Any]:
    return {"dag_run": SimpleNamespace(dag_id=dag_id, run_id=run_id), "ti": SimpleNamespace(try_number=try_number)}


def factory(target: TransferTarget) -> Callable[[NativeTransferManifest], TransferTarget]:
    return lambda manifest: target


def redaction_problems(evidence: dict[str, Any], secrets: list[str]) -> list[str]:
    text = json.dumps(evidence)
    return [secret for secret in secrets if secret and secret in text]
