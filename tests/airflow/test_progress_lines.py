"""The one formatter of progress facts: every fact type of both routes has its line, and the lines read as the task
log has always shown them (counts, ordinals, phases and member labels only)."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from airflow_provider_dpone.cluster.values import progress as cluster_progress
from airflow_provider_dpone.core.progress import ProgressFact
from airflow_provider_dpone.operators.progress import progress_line, task_progress
from airflow_provider_dpone.operators.reporting import TaskLog
from airflow_provider_dpone.transfer.values import progress as transfer_progress
from airflow_provider_dpone.transfer.values.progress import Checkpoint

pytestmark = pytest.mark.unit

MEMBER = "m0123456789abcdef (shard 1, replica 2)"
SHA = "ab" * 32

LINES: list[tuple[ProgressFact, tuple[str, str] | None]] = [
    (
        cluster_progress.MemberLoadStarted(MEMBER, SHA, 1000, 41233),
        ("info", f"member {MEMBER}: loading artifact {SHA[:16]} (1000 rows, 41233 bytes)"),
    ),
    (cluster_progress.MemberLoadAnswered(MEMBER, 420), ("info", f"member {MEMBER}: load answered in 0.4 s")),
    (
        cluster_progress.MemberLoadUnanswered(MEMBER, "OutcomeUnknownError"),
        ("warning", f"member {MEMBER}: load unanswered or refused (OutcomeUnknownError)"),
    ),
    (transfer_progress.CheckpointReached(Checkpoint.EOF), ("info", "route checkpoint eof")),
    (transfer_progress.CheckpointReached(Checkpoint.BLOCK), None),
    (transfer_progress.JournalRecorded("publish_intent"), ("info", "phase publish_intent")),
    (transfer_progress.ChunkSealed(3, 100000, 6712345), ("info", "chunk 3 sealed: 100000 rows, 6712345 bytes")),
    (transfer_progress.ChunkLoaded(3, 100000), ("info", "chunk 3 loaded into target staging: 100000 rows")),
    (transfer_progress.ChunkVerified(3, 100000), ("info", "chunk 3 verified by the target: 100000 rows")),
]


@pytest.mark.parametrize(("fact", "line"), LINES, ids=lambda value: type(value).__name__)
def test_each_fact_has_its_line(fact: ProgressFact, line: tuple[str, str] | None) -> None:
    assert progress_line(fact) == line


def test_a_rebuild_is_a_warning_with_its_code_and_what_the_candidate_held() -> None:
    held = progress_line(cluster_progress.CandidateRebuilt(MEMBER, 1, 16, 0, 12))
    absent = progress_line(cluster_progress.CandidateRebuilt(MEMBER, 2, 16, None, 12))
    assert held is not None and absent is not None
    assert held[0] == absent[0] == "warning"
    assert held[1].startswith(f"member {MEMBER}: rebuild 1 of at most 16: DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_REBUILT: ")
    assert held[1].endswith("[candidate held 0 of 12 rows]") and absent[1].endswith("[candidate absent]")


def _fact_types(module: object) -> list[type[ProgressFact]]:
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, ProgressFact) and value is not ProgressFact
    ]


def test_every_fact_type_of_both_routes_has_a_line_and_only_opaque_fields() -> None:
    covered = {type(fact) for fact, _ in LINES} | {cluster_progress.CandidateRebuilt}
    every = set(_fact_types(cluster_progress)) | set(_fact_types(transfer_progress))
    assert every == covered
    for fact_type in every:
        assert dataclasses.fields(fact_type), fact_type
        assert all(field.type in {"str", "int", "int | None", "Checkpoint"} for field in dataclasses.fields(fact_type))
    for point in Checkpoint:  # a checkpoint never breaks the sink: logged or skipped
        progress_line(transfer_progress.CheckpointReached(point))


def test_the_sink_writes_one_prefixed_line_per_fact(caplog: pytest.LogCaptureFixture) -> None:
    sink = task_progress(TaskLog(logging.getLogger("dpone.test"), "transfer"))
    with caplog.at_level(logging.INFO, logger="dpone.test"):
        sink(transfer_progress.ChunkSealed(0, 7, 512))
        sink(transfer_progress.CheckpointReached(Checkpoint.BLOCK))
        sink(cluster_progress.MemberLoadUnanswered(MEMBER, "OutcomeUnknownError"))
    assert [(record.levelname, record.getMessage()) for record in caplog.records] == [
        ("INFO", "dpone transfer: chunk 0 sealed: 7 rows, 512 bytes"),
        ("WARNING", f"dpone transfer: member {MEMBER}: load unanswered or refused (OutcomeUnknownError)"),
    ]
