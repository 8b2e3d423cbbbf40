"""Deterministic fault injection at I/O boundaries.

Every mutating port call (authority create/CAS, member create/load/drop, DDL dispatch) and every DDL queue read is a
*fault point*. Points are numbered in the order they are reached, across all ports, so a schedule "fault kind K at
point N" is reproducible. Kinds:

* ``CRASH_BEFORE``  -- the process dies before the request leaves: no effect, :class:`SimulatedCrash` raised;
* ``CRASH_AFTER``   -- the effect is applied, then the process dies (:class:`SimulatedCrash`);
* ``LOSE_RESPONSE`` -- the effect is applied, then the response is lost: the caller sees ``OutcomeUnknownError``
  (for a read: ``UnavailableError``);
* ``PARTIAL``       -- loads only: half of the rows are applied, then the response is lost (an interrupted INSERT).
  At any other point it behaves as ``LOSE_RESPONSE``.

An *interleaving* (:meth:`FaultInjector.interleave`) runs another worker's whole call at a point, before the request
of that point leaves: two tasks racing on one operation, in a reproducible order.

:class:`SimulatedCrash` derives from ``BaseException`` so no ``except Exception`` in the code under test can swallow
a process death.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from airflow_provider_dpone.core.errors import OutcomeUnknownError, UnavailableError

T = TypeVar("T")


class FaultKind(StrEnum):
    CRASH_BEFORE = "crash_before"
    CRASH_AFTER = "crash_after"
    LOSE_RESPONSE = "lose_response"
    PARTIAL = "partial"


SINGLE_FAULT_KINDS: tuple[FaultKind, ...] = (FaultKind.CRASH_BEFORE, FaultKind.CRASH_AFTER, FaultKind.LOSE_RESPONSE)


class SimulatedCrash(BaseException):
    """The worker process died at a fault point."""

    def __init__(self, point: int, name: str, kind: FaultKind) -> None:
        super().__init__(f"simulated crash at point {point} ({name}, {kind})")
        self.point = point
        self.name = name
        self.kind = kind


@dataclass
class FaultInjector:
    """Counts fault points and fires the planned faults (``plan``: point index -> kind)."""

    plan: dict[int, FaultKind] = field(default_factory=dict)
    enabled: bool = True
    counter: int = 0
    trace: list[str] = field(default_factory=list)
    fired: list[tuple[int, str, FaultKind]] = field(default_factory=list)
    named: dict[tuple[str, int], FaultKind] = field(default_factory=dict)
    """Faults by point name and occurrence (see :meth:`at_next`)."""
    interleaved: dict[int, Callable[[], None]] = field(default_factory=dict)
    """Another worker's call by point index (see :meth:`interleave`)."""

    def schedule(self, faults: Iterable[tuple[int, FaultKind]]) -> None:
        self.plan = dict(faults)

    def at_next(self, name: str, kind: FaultKind, nth: int = 1) -> None:
        """Fire ``kind`` at the ``nth`` fault point named ``name`` reached from now on."""
        self.named[(name, self.trace.count(name) + nth)] = kind

    def interleave(self, point: int, action: Callable[[], None]) -> None:
        """Run ``action`` (another worker's call) when point ``point`` is reached, before its request leaves; its own
        points are numbered after this one."""
        self.interleaved[point] = action

    def disable(self) -> None:
        self.enabled = False

    def _next(self, name: str) -> FaultKind | None:
        index = self.counter
        self.counter += 1
        self.trace.append(name)
        action = self.interleaved.pop(index, None)
        if action is not None:
            action()
        if not self.enabled:
            return None
        kind = self.plan.get(index) or self.named.pop((name, self.trace.count(name)), None)
        if kind is not None:
            self.fired.append((index, name, kind))
        return kind

    def mutation(self, name: str, effect: Callable[[], T], partial: Callable[[], None] | None = None) -> T:
        """Run a mutation's ``effect`` under the planned fault (``partial`` applies half an effect, loads only)."""
        index = self.counter
        kind = self._next(name)
        if kind is FaultKind.CRASH_BEFORE:
            raise SimulatedCrash(index, name, kind)
        if kind is FaultKind.PARTIAL and partial is not None:
            partial()
            raise OutcomeUnknownError(f"fault {index}: partial effect, response lost")
        result = effect()
        if kind is FaultKind.CRASH_AFTER:
            raise SimulatedCrash(index, name, kind)
        if kind in (FaultKind.LOSE_RESPONSE, FaultKind.PARTIAL):
            raise OutcomeUnknownError(f"fault {index}: response lost")
        return result

    def read(self, name: str, effect: Callable[[], T]) -> T:
        """A read at a fault point: crashes as planned; a lost response is an unanswered read."""
        index = self.counter
        kind = self._next(name)
        if kind is FaultKind.CRASH_BEFORE:
            raise SimulatedCrash(index, name, kind)
        result = effect()
        if kind is FaultKind.CRASH_AFTER:
            raise SimulatedCrash(index, name, kind)
        if kind in (FaultKind.LOSE_RESPONSE, FaultKind.PARTIAL):
            raise UnavailableError(f"fault {index}: response lost")
        return result
