"""The port of the bounded acceptance reader (seed 002): typed plans in, typed facts and counts out, never SQL.

The real reader (``adapters/clickhouse/acceptance_reader.py``) runs each observation (its metadata reads and its
aggregate read) in one worker process that it kills when the budget is spent; the fake (``tests/fakes/acceptance.py``) reads the in-memory world. Both pass
``tests/contracts/test_acceptance_reader.py``.

Failure contract (a read has no effect to be unsure about, so none of these is ever success):

* :class:`~airflow_provider_dpone.ports.publication.UnavailableError` -- the member could not be asked or refused
  the read (connection, unknown table);
* :class:`ReadIncompleteError` -- the read was asked but did not end in one complete answer within the budget:
  timeout, cancellation, a crashed worker, a partial, malformed or late answer, a missing alias.
"""

from __future__ import annotations

from typing import Protocol

from airflow_provider_dpone.contracts.inventory import AdmittedMember
from airflow_provider_dpone.contracts.quality_read import Observation, TargetReadPlan


class ReadIncompleteError(Exception):
    """The bounded read did not end in one complete, well-formed answer within its budget."""


class AcceptanceReader(Protocol):
    """One observation of one exact generation, within a budget that interrupts every read in flight."""

    def observe(self, members: tuple[AdmittedMember, ...], plan: TargetReadPlan, *, budget_ms: int) -> Observation:
        """The facts and counts the plan asks for, answering it exactly (:meth:`Observation.answers`); ``members``
        are the plan's members (:attr:`TargetReadPlan.member_ids`, in order). The counts' generation UUID is read in
        the same statement as the counts; the caller judges every fact."""
        ...
