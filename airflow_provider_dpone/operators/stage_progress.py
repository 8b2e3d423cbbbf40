"""What the stage task shows while it works: each member's load as it starts and ends, and every candidate rebuild.

The protocol stages members one after another and decides rebuilds by observation; it logs nothing. These wrappers
sit on the ports the stage task hands it, so the log follows the work without a single extra read: the member
session logs around its one load and remembers the last observation of the candidate, and the authority store notices
a committed write that raised a member's rebuild count, and logs it with its code and what was observed.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from airflow_provider_dpone.contracts.authority_codec import decode
from airflow_provider_dpone.contracts.authority_external import MAX_REBUILDS_PER_MEMBER, ExternalAuthorityRecord
from airflow_provider_dpone.contracts.authority_row import AuthorityRow, VersionedAuthorityRow
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.inventory import AdmittedMember
from airflow_provider_dpone.operators.task_outcome import Log
from airflow_provider_dpone.ports.publication import (
    ArtifactHandle,
    AuthorityStore,
    MemberSession,
    MemberSessions,
    TableObservation,
)
from airflow_provider_dpone.protocol.context import PublicationPorts


class StageProgress:
    """Logging views of one stage try's ports (``ports``), sharing what they observed."""

    def __init__(self, ports: PublicationPorts, log: Log) -> None:
        self.log = log
        self.observed: dict[str, TableObservation] = {}
        self.rebuilds: dict[str, int] = {}
        self.ports = dataclasses.replace(
            ports, authority=_Authority(ports.authority, self), sessions=_Sessions(ports.sessions, self)
        )

    def seen(self, record: ExternalAuthorityRecord, *, committed: bool) -> None:
        """Track rebuild counts; log each increase a committed write made."""
        artifact_rows = record.artifact.row_count if record.artifact is not None else None
        for member in record.members:
            before = self.rebuilds.get(member.member_id, member.rebuilds)
            self.rebuilds[member.member_id] = member.rebuilds
            if committed and member.rebuilds > before:
                reason = DponeError(
                    "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_REBUILT", self._observation(member.member_id, artifact_rows)
                )
                self.log.warning(
                    "member %s: rebuild %d of at most %d: %s",
                    member.member_id,
                    member.rebuilds,
                    MAX_REBUILDS_PER_MEMBER,
                    reason.render(),
                )

    def _observation(self, member_id: str, artifact_rows: int | None) -> str:
        observed = self.observed.get(member_id)
        if observed is None or not observed.exists:
            return "candidate absent"
        expected = "?" if artifact_rows is None else str(artifact_rows)
        return f"candidate held {observed.row_count} of {expected} rows"


class _Authority:
    def __init__(self, inner: AuthorityStore, progress: StageProgress) -> None:
        self._inner = inner
        self._progress = progress

    def _note(self, row: AuthorityRow, *, committed: bool) -> None:
        try:
            record = decode(row)
        except DponeError:
            return  # the protocol reports a malformed row itself
        if isinstance(record, ExternalAuthorityRecord):
            self._progress.seen(record, committed=committed)

    def read(self, target_key: str) -> VersionedAuthorityRow | None:
        current = self._inner.read(target_key)
        if current is not None:
            self._note(current.row, committed=False)
        return current

    def create(self, row: AuthorityRow) -> None:
        self._inner.create(row)
        self._note(row, committed=True)

    def compare_and_set(self, row: AuthorityRow, expected_version: int) -> None:
        self._inner.compare_and_set(row, expected_version)
        self._note(row, committed=True)


class _Sessions:
    def __init__(self, inner: MemberSessions, progress: StageProgress) -> None:
        self._inner = inner
        self._progress = progress

    def session(self, member: AdmittedMember) -> MemberSession:
        return _Session(self._inner.session(member), member.member_id, self._progress)


class _Session:
    """A member session that logs its load and remembers the last observation; everything else passes through."""

    def __init__(self, inner: MemberSession, member_id: str, progress: StageProgress) -> None:
        self._inner = inner
        self._member_id = member_id
        self._progress = progress

    def observe_table(
        self, database: str, table: str, *, with_content: bool, with_parts: bool = False
    ) -> TableObservation:
        observation = self._inner.observe_table(database, table, with_content=with_content, with_parts=with_parts)
        self._progress.observed[self._member_id] = observation
        return observation

    def load(
        self, database: str, table: str, uuid: str, artifact: ArtifactHandle, *, query_id: str, dedup_token: str
    ) -> None:
        receipt = artifact.receipt
        log = self._progress.log
        log.info(
            "member %s: loading artifact %s (%d rows, %d bytes)",
            self._member_id,
            receipt.sha256[:16],
            receipt.row_count,
            receipt.byte_size,
        )
        started = time.monotonic()
        try:
            self._inner.load(database, table, uuid, artifact, query_id=query_id, dedup_token=dedup_token)
        except Exception as error:
            log.warning("member %s: load unanswered or refused (%s)", self._member_id, type(error).__name__)
            raise
        log.info("member %s: load answered in %.1f s", self._member_id, time.monotonic() - started)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
