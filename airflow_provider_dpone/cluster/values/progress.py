"""The progress facts of the cluster route's protocol (:mod:`airflow_provider_dpone.core.progress`).

Members are named by their one label (``m<16 hex> (shard S, replica R)``); artifacts by their digest.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_dpone.core.progress import ProgressFact


@dataclass(frozen=True)
class MemberLoadStarted(ProgressFact):
    """The one load of the sealed artifact into a member's candidate is being sent."""

    member: str
    artifact_sha256: str
    rows: int
    byte_size: int


@dataclass(frozen=True)
class MemberLoadAnswered(ProgressFact):
    """The member acknowledged the load after ``elapsed_ms`` (its content is verified by the next observation)."""

    member: str
    elapsed_ms: int


@dataclass(frozen=True)
class MemberLoadUnanswered(ProgressFact):
    """The load was refused or its answer was lost (``failure``: the outcome's kind); the next step observes."""

    member: str
    failure: str


@dataclass(frozen=True)
class CandidateRebuilt(ProgressFact):
    """A member's candidate was found incomplete and a fresh one is intended (rebuild ``rebuild`` of ``limit``):
    the candidate held ``held_rows`` of ``artifact_rows`` rows (``held_rows`` ``None``: it was absent)."""

    member: str
    rebuild: int
    limit: int
    held_rows: int | None
    artifact_rows: int | None
