"""The progress sink: where the protocols of both routes hand the facts of their progress, as they happen.

A progress fact is a frozen value (:class:`ProgressFact`; each route defines its own, in its ``values/progress.py``)
that carries opaque facts only: member labels (``m<16 hex> (shard S, replica R)``), digests, counts, ordinals and
phases; never a host, a credential, SQL, a path or a row value. The protocols report a fact where they decide or
observe it, to the :data:`ProgressSink` they were given (or to nobody); the Airflow surface formats each one into
one task-log line. Reporting never changes what a protocol does: the sink only observes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ProgressFact:
    """One fact of a protocol's progress (a route's subclass names what happened and carries its counts)."""


ProgressSink = Callable[[ProgressFact], None]
"""Where the facts go (the Airflow surface: the task log)."""


def report(sink: ProgressSink | None, fact: ProgressFact) -> None:
    """Hand ``fact`` to ``sink`` (nothing when there is none)."""
    if sink is not None:
        sink(fact)
