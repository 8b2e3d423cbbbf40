"""The KeeperMap authority row and the version observed on read.

The row is the physical shape of ``__dpone_cluster_publication_authority``. A few columns are projections of the
payload (operation, fence token, phase, epoch) so an operator can read the state with plain SQL; the payload is the
record of truth and the codec refuses a row whose projections disagree with it. Field values are kept loose here on
purpose: a row is whatever storage returned, and the codec (not pydantic) rejects malformed rows with stable codes.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from pydantic import BaseModel, StrictStr

from airflow_provider_dpone.core.canonical import CLOSED, UInt64

AUTHORITY_TABLE: Final[str] = "__dpone_cluster_publication_authority"

AUTHORITY_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("target_key", "String"),
    ("operation_id", "String"),
    ("fence_token", "String"),
    ("phase", "String"),
    ("dispatch_epoch", "UInt64"),
    ("payload", "String"),
    ("payload_sha256", "FixedString(64)"),
)
"""The exact ordered schema; no column may carry a default."""

AUTHORITY_PRIMARY_KEY: Final[str] = "target_key"


class AuthorityRow(BaseModel):
    """One KeeperMap row as written (strict insert / CAS) or read."""

    model_config = CLOSED

    target_key: StrictStr
    operation_id: StrictStr
    fence_token: StrictStr
    phase: StrictStr
    dispatch_epoch: UInt64
    payload: StrictStr
    payload_sha256: StrictStr


class VersionedAuthorityRow(BaseModel):
    """A row plus the KeeperMap ``_version`` observed with it (0 after the strict insert, +1 per update)."""

    model_config = CLOSED

    row: AuthorityRow
    version: UInt64


class ReadBack(StrEnum):
    """What one read of the key, after an acknowledged compare-and-set from version N, proves about that write."""

    APPLIED = "applied"
    """Version N + 1 holding exactly the written row (its payload carries the writer's own ``write_id``)."""
    CONFLICT = "conflict"
    """Version N + 1 holding another row: another writer made N -> N + 1, and Keeper refuses ours at N (strict mode
    sends the set with version N), so ours can never be N + 2."""
    OLDER = "older"
    """No row, or a version of at most N: older than the write would produce. The writer holds version N, a key's
    version only grows and rows are never deleted, so this read was served by a Keeper server that had not applied
    the latest writes yet (Keeper reads are not linearizable across servers). Not yet known: read again."""
    UNKNOWN = "unknown"
    """A version above N + 1: the write may have applied and been overwritten since; not provable."""


def judge_read_back(after: VersionedAuthorityRow | None, row: AuthorityRow, expected_version: int) -> ReadBack:
    """Judge one read of ``row.target_key`` taken after the acknowledged compare-and-set of ``row`` at
    ``expected_version`` (the one rule the adapter's own read-back and the protocol's later reads share)."""
    if after is None or after.version <= expected_version:
        return ReadBack.OLDER
    if after.version == expected_version + 1:
        return ReadBack.APPLIED if after.row == row else ReadBack.CONFLICT
    return ReadBack.UNKNOWN
