"""The transfer route's checkpoints and progress facts (:mod:`airflow_provider_dpone.core.progress`).

A :class:`Checkpoint` names a point of the route between two durable steps (the route reports each one it passes,
and hands it to the caller's checkpoint hook, where the tests inject process deaths). The facts carry phases, chunk
ordinals, rows and bytes only, never a value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from airflow_provider_dpone.core.progress import ProgressFact


class Checkpoint(StrEnum):
    """A point the route passes, in order (``BLOCK`` and ``CHUNK_SEALED`` once per block and per chunk)."""

    ADMITTED = "admitted"
    BLOCK = "block"
    CHUNK_SEALED = "chunk_sealed"
    EOF = "eof"
    STAGE_COMPLETE = "stage_complete"
    PREPARED = "prepared"
    LOADED = "loaded"
    PUBLISH_INTENT = "publish_intent"
    PUBLISH_ACKNOWLEDGED = "publish_acknowledged"
    SUCCEEDED = "succeeded"


OnCheckpoint = Callable[[Checkpoint], None]
"""Called at every checkpoint the route passes (the tests' fault point; it may raise to stop the route there)."""


@dataclass(frozen=True)
class CheckpointReached(ProgressFact):
    point: Checkpoint


@dataclass(frozen=True)
class JournalRecorded(ProgressFact):
    """A journal record of ``kind`` (a phase: plan, stage_complete, publish_intent, ...) was appended."""

    kind: str


@dataclass(frozen=True)
class ChunkSealed(ProgressFact):
    """A chunk's receipt was journaled: the chunk is sealed in the stage."""

    ordinal: int
    rows: int
    object_bytes: int


@dataclass(frozen=True)
class ChunkLoaded(ProgressFact):
    """The target acknowledged a chunk's load into its staging table (``rows``: the rows handed to it)."""

    ordinal: int
    rows: int


@dataclass(frozen=True)
class ChunkVerified(ProgressFact):
    """The target counted and digested a staged chunk (``rows``: what the target counted)."""

    ordinal: int
    rows: int
