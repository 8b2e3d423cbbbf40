"""The one-shot discipline of mutations: a deterministic query id, a process-wide guard, and failure classification.

Every mutation the adapters send gets a deterministic ``query_id`` derived from what it is (kind, scope, statement):
the protocol's load ids, or a digest of the statement text for DDL and authority writes (their text already carries
a fresh write id, UUID or correlation token). Two defences follow from it:

* :class:`MutationGuard` -- before a mutation leaves the process its query id is *claimed*; a second claim of the
  same id in the same process is refused (:class:`MutationReplayRefusedError`, a :class:`MutationRejectedError`:
  nothing was sent). A bug that loops, or a caller that repeats a mutation after an unknown outcome instead of
  observing, cannot send it twice;
* ClickHouse refuses a second query with the id of one still running (``QUERY_WITH_SAME_ID_IS_ALREADY_RUNNING``), so
  even another process cannot overlap the same statement with a delayed first copy.

:func:`classify` turns a clickhouse-connect exception into the port vocabulary: the server answered with an error
code (``Refused``) or the answer is missing (``Unknown``: timeout, closed connection, truncated response). Which of
those means "no effect" depends on the statement and is decided by each adapter, not here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Final

from clickhouse_connect.driver.exceptions import Error

from airflow_provider_dpone.core.canonical import tagged_digest
from airflow_provider_dpone.core.errors import DponeError, MutationRejectedError

TAG_MUTATION_QUERY_ID: Final[str] = "dpone.clickhouse.mutation-query-id.v1"
KEEPER_EXCEPTION: Final[int] = 999
TIMEOUT_EXCEEDED: Final[int] = 159


class MutationReplayRefusedError(MutationRejectedError):
    """The guard refused to send a mutation a second time (nothing was sent)."""

    def __init__(self, query_id: str) -> None:
        error = DponeError("DPONE_CLICKHOUSE_MUTATION_REPLAY_REFUSED", f"query id {query_id}")
        super().__init__(str(error))
        self.query_id = query_id


def mutation_query_id(kind: str, scope: str, statement: str) -> str:
    """``dpone-<kind>-<32 hex>``: deterministic for one statement sent to one scope (member id, authority, cluster)."""
    return f"dpone-{kind}-" + tagged_digest(TAG_MUTATION_QUERY_ID, kind, scope, statement)[:32]


class MutationGuard:
    """Remembers every mutation query id claimed in this process (thread-safe)."""

    def __init__(self) -> None:
        self._claimed: set[str] = set()
        self._lock = threading.Lock()

    def claim(self, query_id: str) -> None:
        """Record ``query_id``; raise :class:`MutationReplayRefusedError` if it was claimed before."""
        with self._lock:
            if query_id in self._claimed:
                raise MutationReplayRefusedError(query_id)
            self._claimed.add(query_id)

    def claimed(self, query_id: str) -> bool:
        with self._lock:
            return query_id in self._claimed


PROCESS_GUARD: Final[MutationGuard] = MutationGuard()
"""The guard every adapter uses unless one is injected: one per process, as the one-shot rule is per process."""


@dataclass(frozen=True)
class Refused:
    """The server answered with an error code: the statement ran (or was parsed) and failed."""

    code: int


@dataclass(frozen=True)
class Unknown:
    """No usable answer: the request may or may not have been executed."""


Failure = Refused | Unknown


def error_code(error: BaseException) -> int | None:
    """The ClickHouse error code of an exception, when the server reported one."""
    code = getattr(error, "code", None)
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    return None


def classify(error: BaseException) -> Failure:
    """``Refused(code)`` when the server answered with an error code, else ``Unknown``.

    The code comes from ClickHouse's own ``X-ClickHouse-Exception-Code`` header (or the engine's message): an
    exception without one is a transport failure (closed connection, timeout, truncated response, a proxy's 5xx)
    and is ``Unknown``.
    """
    code = error_code(error) if isinstance(error, Error) else None
    return Refused(code) if code is not None else Unknown()


def sanitized(failure: Failure) -> str:
    """A one-line description with no server text (server messages may echo hosts or SQL)."""
    return f"server refused (Code {failure.code})" if isinstance(failure, Refused) else "outcome unknown"
