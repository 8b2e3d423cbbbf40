"""ClickHouse server error codes that both routes act on (``src/Common/ErrorCodes.cpp``)."""

from __future__ import annotations

from typing import Final

ACCESS_DENIED: Final[int] = 497
"""The account lacks a privilege the statement needs (``ContextAccess``'s ``Not enough privileges``): no retry can
succeed without the grant."""
SESSION_NOT_FOUND: Final[int] = 372
"""A ``session_check`` request reached a server that does not hold the session: refused before it was parsed."""
