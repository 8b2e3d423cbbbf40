"""The outcomes of one call across an I/O boundary, shared by every port of both routes.

A one-shot mutation either returns (the effect happened), raises :class:`MutationRejectedError` or
:class:`AuthorityConflictError` (the server refused; nothing changed), or raises :class:`OutcomeUnknownError` (it may
have taken effect: the caller resolves it by observation, never by repeating it). A read raises
:class:`UnavailableError` when it cannot answer; a read has no effect to be unsure about.
"""

from __future__ import annotations


class OutcomeUnknownError(Exception):
    """A one-shot mutation's outcome is unknown: it may have taken effect. Resolve by observation only."""


class MutationRejectedError(Exception):
    """The server refused a mutation (for example: name taken, UUID mismatch); nothing changed."""


class AuthorityConflictError(Exception):
    """Strict insert found the key, or a compare-and-set found another version; nothing changed."""


class UnavailableError(Exception):
    """A read could not be answered (connection, timeout, missing table)."""


class ArtifactInvalidError(Exception):
    """The sealed artifact is missing from the store or its bytes do not match the receipt."""
