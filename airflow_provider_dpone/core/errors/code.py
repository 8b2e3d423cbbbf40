"""``ErrorCode``: one registered failure, with what a user reads (cause, next action) and what Airflow does with it.

``retryable`` is the one classification every operator follows: ``True`` when a later try of the same task can
succeed without anyone changing anything (an unanswered read, an unacknowledged write a retry resolves by
observation, a lost race, an upstream phase not reached yet, held custody that expires); ``False`` when no retry can
fix it without a human (inadmissible input, fenced or drifted state, corrupt evidence, refused credentials), so the
task fails at once instead of spending its retries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

NATIVE_TRANSFER_PREFIX: Final[str] = "native_transfer."
LEGACY_NATIVE_TRANSFER_PREFIX: Final[str] = "mssql_native."
"""The family's earlier name, from when SQL Server was its only target: every ``mssql_native.X`` is an alias of
``native_transfer.X`` (looked up, matched and documented as such; never emitted)."""


@dataclass(frozen=True)
class ErrorCode:
    """A registered, documented failure: what happened, what the user should do next, and whether to retry."""

    code: str
    cause: str
    action: str
    retryable: bool
    summary: str
    """The cause in a few words: with the code and the outcome, the first line of a failure in a task log, short
    enough for a log view that cuts long lines (the full ``cause`` follows on lines of its own)."""

    @property
    def family(self) -> str:
        """The code's family prefix, used to group the reference documentation."""
        if self.code.startswith(NATIVE_TRANSFER_PREFIX):
            return NATIVE_TRANSFER_PREFIX.rstrip(".")
        for prefix in ("DPONE_CLICKHOUSE_CLUSTER_", "DPONE_REPLAY_QUALITY_EVIDENCE_"):
            if self.code.startswith(prefix):
                return prefix.rstrip("_")
        return "DPONE"


def registered_name(code: str) -> str:
    """The name ``code`` is registered under: an earlier ``mssql_native.X`` is ``native_transfer.X``; any other
    code is its own name."""
    if code.startswith(LEGACY_NATIVE_TRANSFER_PREFIX):
        return NATIVE_TRANSFER_PREFIX + code.removeprefix(LEGACY_NATIVE_TRANSFER_PREFIX)
    return code
