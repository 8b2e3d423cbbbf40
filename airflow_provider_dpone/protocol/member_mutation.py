"""One-shot member mutations with the port failures mapped to protocol decisions.

A lost response (:class:`OutcomeUnknownError`) is *not* an error here: the caller's next step observes the member and
decides from what is physically there. A refusal stops the attempt with a stable code (a retry observes again).
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.ports.publication import MutationRejectedError, OutcomeUnknownError


def mutate_once(member_id: str, what: str, action: Callable[[], None]) -> bool:
    """Run ``action`` once. True if acknowledged, False if the outcome is unknown (observe next)."""
    try:
        action()
    except OutcomeUnknownError:
        return False
    except MutationRejectedError:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_MEMBER_MUTATION_REJECTED", f"{what} on member {member_id}") from None
    return True
