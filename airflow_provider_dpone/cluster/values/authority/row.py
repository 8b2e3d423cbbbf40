"""The KeeperMap authority row and the version observed on read.

The row is the physical shape of ``__dpone_cluster_publication_authority``. A few columns are projections of the
payload (operation, fence token, phase, epoch) so an operator can read the state with plain SQL; the payload is the
record of truth and the codec refuses a row whose projections disagree with it. Field values are kept loose here on
purpose: a row is whatever storage returned, and the codec (not pydantic) rejects malformed rows with stable codes.
"""

from __future__ import annotations

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
