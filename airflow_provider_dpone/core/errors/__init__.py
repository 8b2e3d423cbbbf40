"""One registry of stable error codes, and the one exception type that carries them.

Every failure a user can cause has a code, a one-line cause, the next action, and whether a retry can help
(:class:`ErrorCode`). Codes are stable: they are part of the public contract (logs, alerts and runbooks match on them),
so a code is never renamed or reused; new codes are added to the family module that owns them (``cluster``,
``replay``, ``native_transfer``, ``general``, ``adapters``). The native-transfer family was first named
``mssql_native.*``; those codes stay valid aliases (:func:`lookup` resolves them, :data:`ALIASES` lists them).

Messages never carry hosts, credentials, SQL values or row data; ``detail`` is for sanitized facts (counts, phases,
digests, opaque ids, field paths).

The outcomes of one call across an I/O boundary live here too, shared by every port of both routes: a one-shot
mutation either returns (the effect happened), raises :class:`MutationRejectedError` or :class:`AuthorityConflictError`
(refused; nothing changed), or raises :class:`OutcomeUnknownError` (it may have taken effect: resolve it by
observation, never by repeating it); a read raises :class:`UnavailableError` when it cannot answer.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

from airflow_provider_dpone.core.errors import adapters, cluster, general, native_transfer, replay
from airflow_provider_dpone.core.errors.code import (
    LEGACY_NATIVE_TRANSFER_PREFIX,
    NATIVE_TRANSFER_PREFIX,
    ErrorCode,
    registered_name,
)


def _build(families: Iterable[tuple[ErrorCode, ...]]) -> dict[str, ErrorCode]:
    registry: dict[str, ErrorCode] = {}
    for family in families:
        for entry in family:
            if entry.code in registry:
                raise RuntimeError(f"error code registered twice: {entry.code}")
            registry[entry.code] = entry
    return registry


REGISTRY: dict[str, ErrorCode] = _build(
    (general.CODES, cluster.CODES, replay.CODES, native_transfer.CODES, adapters.CODES)
)


ALIASES: dict[str, str] = {
    LEGACY_NATIVE_TRANSFER_PREFIX + code.removeprefix(NATIVE_TRANSFER_PREFIX): code
    for code in REGISTRY
    if code.startswith(NATIVE_TRANSFER_PREFIX)
}
"""Each earlier code name and the registered code it stands for."""


def lookup(code: str) -> ErrorCode:
    """The registered entry for ``code`` (or for the code an alias stands for); an unregistered code is a programming
    error, not a user error."""
    try:
        return REGISTRY[registered_name(code)]
    except KeyError:
        raise KeyError(f"unregistered error code {code!r}: add it to core/errors") from None


LINE_WIDTH = 100
"""The widest line of a failure's block (:meth:`DponeError.lines`): a log view that cuts long lines shows all of it."""


def _wrapped(text: str, first: str) -> list[str]:
    return textwrap.wrap(
        text,
        LINE_WIDTH,
        initial_indent=first,
        subsequent_indent="  ",
        break_long_words=False,
        break_on_hyphens=False,
    )


class DponeError(Exception):
    """A failure with a stable, registered code.

    ``str(error)`` is one line: ``CODE: cause [detail]. Next: action`` (the CLI, the Test button). A task log and
    the exception Airflow shows get the block of :meth:`lines`: the code and the short cause first, then the detail,
    the full cause and the advice on lines of their own. Raising with an unregistered code fails loudly at the raise
    site, so every code that can reach a user is documented.
    """

    def __init__(self, code: str, detail: str = "") -> None:
        self.error = lookup(code)
        self.code = self.error.code
        self.detail = detail
        super().__init__(self.render())

    @property
    def retryable(self) -> bool:
        """Whether a later try of the same task can succeed unchanged (the registry decides, per code)."""
        return self.error.retryable

    def headline(self) -> str:
        """``CODE: summary``: what happened, in a few words (the first line of the block)."""
        return f"{self.code}: {self.error.summary}"

    def explanation(self) -> list[str]:
        """The detail (``  [detail]``) and the full cause, indented, on lines of at most :data:`LINE_WIDTH`."""
        detail = _wrapped(f"[{self.detail}]", "  ") if self.detail else []
        return [*detail, *_wrapped(self.error.cause, "  ")]

    def advice(self) -> list[str]:
        """``Next: action``: what to do, on lines of at most :data:`LINE_WIDTH` (the continuation indented)."""
        return _wrapped(f"Next: {self.error.action}", "")

    def lines(self) -> list[str]:
        """The block a log or an Airflow failure shows: headline, explanation, advice."""
        return [self.headline(), *self.explanation(), *self.advice()]

    def render(self) -> str:
        """The one-line form (Test button, CLI): ``CODE: cause [detail]. Next: action``."""
        detail = f" [{self.detail}]" if self.detail else ""
        return f"{self.code}: {self.error.cause}{detail}. Next: {self.error.action}"

    def as_dict(self) -> dict[str, str]:
        """Structured form for stderr JSON and XCom."""
        return {"code": self.code, "cause": self.error.cause, "detail": self.detail, "action": self.error.action}


class OutcomeUnknownError(Exception):
    """A one-shot mutation's outcome is unknown: it may have taken effect. Resolve by observation only."""


class ReadBackOlderError(OutcomeUnknownError):
    """A compare-and-set was acknowledged but the read after it showed an older version than the write produces:
    the read was served by a Keeper server that has not applied it yet. Not yet known: read again within a bound,
    never repeat the write; past the bound it is an unknown outcome like any other."""


class MutationRejectedError(Exception):
    """The server refused a mutation (for example: name taken, UUID mismatch); nothing changed."""


class ExchangeUnsupportedError(MutationRejectedError):
    """The member refused an ``EXCHANGE TABLES`` because its OS or filesystem cannot exchange two paths atomically
    (``renameat2`` with ``RENAME_EXCHANGE``); nothing changed."""


class AuthorityConflictError(Exception):
    """Strict insert found the key, or a compare-and-set found another version; nothing changed."""


class UnavailableError(Exception):
    """A read could not be answered (connection, timeout, missing table)."""


class AccessDeniedError(UnavailableError):
    """The server refused a read or a wait for want of a grant (``ACCESS_DENIED``, Code 497): no retry can succeed
    until the account holds it; nothing changed."""


class VerificationBudgetExceededError(UnavailableError):
    """The server stopped a content read at the verification budget: nothing was verified, nothing changed."""


class ArtifactInvalidError(Exception):
    """The sealed artifact is missing from the store or its bytes do not match the receipt."""


__all__ = [
    "ArtifactInvalidError",
    "AuthorityConflictError",
    "ExchangeUnsupportedError",
    "MutationRejectedError",
    "OutcomeUnknownError",
    "ReadBackOlderError",
    "UnavailableError",
    "VerificationBudgetExceededError",
    "ALIASES",
    "REGISTRY",
    "DponeError",
    "ErrorCode",
    "lookup",
]
