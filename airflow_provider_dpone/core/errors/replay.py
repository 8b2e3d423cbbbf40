"""``DPONE_REPLAY_QUALITY_EVIDENCE_*``: durable, replayable quality evidence of committed publications."""

from __future__ import annotations

from typing import Final

from airflow_provider_dpone.core.errors.code import ErrorCode

CODES: tuple[ErrorCode, ...] = (
    ErrorCode(
        "DPONE_REPLAY_QUALITY_EVIDENCE_REQUIRED",
        "exact durable quality evidence is absent",
        "preserve state; verify the original producer and store selection",
        retryable=False,
        summary="no durable quality evidence",
    ),
    ErrorCode(
        "DPONE_REPLAY_QUALITY_EVIDENCE_MISMATCH",
        "identity, generation, report or authority-version continuity differs from the evidence",
        "compare the original invocation and configuration with the platform observations",
        retryable=False,
        summary="quality evidence does not match",
    ),
    ErrorCode(
        "DPONE_REPLAY_QUALITY_EVIDENCE_INVALID",
        "the evidence is malformed, oversized, non-canonical or impossible",
        "preserve the original bytes; investigate producer and storage integrity",
        retryable=False,
        summary="quality evidence is malformed",
    ),
    ErrorCode(
        "DPONE_REPLAY_QUALITY_EVIDENCE_FAILED",
        "the original quality result or the durable terminal state failed",
        "resolve the quality failure; do not relabel the evidence",
        retryable=False,
        summary="the quality result failed",
    ),
    ErrorCode(
        "DPONE_REPLAY_QUALITY_EVIDENCE_INCOMPLETE",
        "governance or a read guard remains unresolved, or store access failed",
        "follow the retained-state recovery procedure in docs/runbook.md (a retry of the same run resumes from the "
        "retained capsule state)",
        retryable=True,
        summary="quality evidence is unresolved",
    ),
    ErrorCode(
        "DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED",
        "the store, policy, configuration or bounded observation capability is unavailable for this route",
        "use only an admitted integration (the internal replicated full refresh); plan explicit capability work",
        retryable=False,
        summary="quality replay unavailable",
    ),
)

REQUIRED: Final[str] = "DPONE_REPLAY_QUALITY_EVIDENCE_REQUIRED"
MISMATCH: Final[str] = "DPONE_REPLAY_QUALITY_EVIDENCE_MISMATCH"
INVALID: Final[str] = "DPONE_REPLAY_QUALITY_EVIDENCE_INVALID"
FAILED: Final[str] = "DPONE_REPLAY_QUALITY_EVIDENCE_FAILED"
INCOMPLETE: Final[str] = "DPONE_REPLAY_QUALITY_EVIDENCE_INCOMPLETE"
UNSUPPORTED: Final[str] = "DPONE_REPLAY_QUALITY_EVIDENCE_UNSUPPORTED"
