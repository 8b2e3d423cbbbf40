"""The provider's one name of a member, computed here the documented way, since the double never imports the provider.

The provider names a member ``m<16 hex> (shard S, replica R)``: ``m`` and the first 16 hex digits of the SHA-256 of
the canonical JSON (sorted keys, no whitespace, UTF-8) of ``["dpone.identity.member-id.v1", S, R]``, then its position
in ``system.clusters`` (docs/embedded-cluster.md). A contract test holds this equal to the provider's ``member_id``
for every position the double can run; the double's own handle (``memberN``) is a local alias for its CLI and faults.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Final

MEMBER_ID_TAG: Final[str] = "dpone.identity.member-id.v1"
MEMBER_ID_PATTERN: Final[re.Pattern[str]] = re.compile(r"^m[0-9a-f]{16}$")


def member_id(shard_num: int, replica_num: int) -> str:
    """The provider's opaque id of the member at ``(shard_num, replica_num)``."""
    if not all(type(value) is int and value >= 1 for value in (shard_num, replica_num)):
        raise ValueError("shard_num and replica_num must be positive integers")
    canonical = json.dumps([MEMBER_ID_TAG, shard_num, replica_num], sort_keys=True, separators=(",", ":"))
    return "m" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def member_label(shard_num: int, replica_num: int) -> str:
    """The provider's one name of the member at ``(shard_num, replica_num)``: ``m<16 hex> (shard S, replica R)``."""
    return f"{member_id(shard_num, replica_num)} (shard {shard_num}, replica {replica_num})"
