"""How a test finds a member named otherwise than by its one name in a text (an error detail, a log line)."""

from __future__ import annotations

import re

from airflow_provider_dpone.cluster.values.identities import member_id

_ID = re.compile(r"\bm[0-9a-f]{16}\b")
_NAME = re.compile(r"\b(m[0-9a-f]{16}) \((?:shard (\d+), replica (\d+)|position unknown: the inventory changed)\)")


def misnamed_members(text: str) -> list[str]:
    """Each member id in ``text`` not followed by its position (the one the id is derived from) or by the explicit
    "position unknown"; empty when every member is named by its one name."""
    named = {match.start(1) for match in _NAME.finditer(text) if _proves(match)}
    return [match.group() for match in _ID.finditer(text) if match.start() not in named]


def _proves(match: re.Match[str]) -> bool:
    shard, replica = match.group(2), match.group(3)
    return shard is None or member_id(int(shard), int(replica)) == match.group(1)
