"""The durable reader fence: no managed successor takes the target while a COMPLETED operation's capsule
is validated.

Before COMPLETED the operation's own non-terminal record keeps successors out. After it, a validation (a replay of
publish or cleanup) whose checks of the stored evidence passed (they write nothing: ``quality_replay``) writes a
:class:`ReaderFence` into the record (one acknowledged COMPLETED -> COMPLETED CAS
with read-back), runs the live guard, and releases it (the same CAS back to no fence). The validation is reported as success
only after the verified release. The fence fails closed in every case:

* crash or lost response after the acquiring write: the fence stays until ``expires_at_ms`` (the observation budget
  plus a margin); successors are refused until then, and the next validation of this operation takes it over;
* crash before the release, or a release whose outcome is unknown: the same expiry frees it; the validation that
  did not see its release acknowledged is ``..._INCOMPLETE``, never success;
* the fence was taken over meanwhile (another validation of this operation, or a successor after expiry): the
  release conflicts and the validation is ``..._INCOMPLETE``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Final

from airflow_provider_dpone.cluster.protocol.authority_io import Held
from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.protocol.quality_target import store_write
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.authority.internal import ReaderFence
from airflow_provider_dpone.cluster.values.authority.phases import Phase
from airflow_provider_dpone.cluster.values.quality_read import TARGET_BUDGET_MS
from airflow_provider_dpone.core.errors import DponeError

READER_LEASE_MS: Final[int] = TARGET_BUDGET_MS + 30_000
"""How long an unreleased reader fence keeps successors out: one observation budget plus a margin."""


def under_reader_fence(ctx: Context, held: Held, validate: Callable[[Held], None]) -> Held:
    """Run ``validate`` under the reader fence when the operation is COMPLETED (else as is); the held record after
    the verified release."""
    if held.record.phase is not Phase.COMPLETED:
        validate(held)
        return held
    fence = ReaderFence(token=ctx.ports.entropy.token(), expires_at_ms=ctx.now() + READER_LEASE_MS)
    acquired = store_write(lambda: ctx.commit(held, reader=fence))
    try:
        validate(acquired)
    except BaseException:
        with contextlib.suppress(DponeError):
            ctx.commit(acquired, reader=None)  # best effort: the expiry frees it otherwise
        raise
    return store_write(lambda: ctx.commit(acquired, reader=None))


def successor_blocked(record: AuthorityRecord, now_ms: int) -> bool:
    """Whether a successor operation must stay out of a terminal record: an unexpired reader fence (only a record
    that carries the capsule can hold one)."""
    return record.reader_fenced(now_ms)
