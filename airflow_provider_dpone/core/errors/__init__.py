"""One registry of stable error codes, and the one exception type that carries them.

Every failure a user can cause has a code, a one-line cause, the next action, and whether a retry can help
(:class:`ErrorCode`). Codes are stable: they are part of the public contract (logs, alerts and runbooks match on them),
so a code is never renamed or reused; new codes are added to the family module that owns them (``cluster``,
``replay``, ``mssql_native``, ``general``, ``adapters``).

Messages never carry hosts, credentials, SQL values or row data; ``detail`` is for sanitized facts (counts, phases,
digests, opaque ids, field paths).
"""

from __future__ import annotations

from collections.abc import Iterable

from airflow_provider_dpone.core.errors import adapters, cluster, general, mssql_native, replay
from airflow_provider_dpone.core.errors.code import ErrorCode


def _build(families: Iterable[tuple[ErrorCode, ...]]) -> dict[str, ErrorCode]:
    registry: dict[str, ErrorCode] = {}
    for family in families:
        for entry in family:
            if entry.code in registry:
                raise RuntimeError(f"error code registered twice: {entry.code}")
            registry[entry.code] = entry
    return registry


REGISTRY: dict[str, ErrorCode] = _build(
    (general.CODES, cluster.CODES, replay.CODES, mssql_native.CODES, adapters.CODES)
)


def lookup(code: str) -> ErrorCode:
    """The registered entry for ``code``; an unregistered code is a programming error, not a user error."""
    try:
        return REGISTRY[code]
    except KeyError:
        raise KeyError(f"unregistered error code {code!r}: add it to core/errors") from None


class DponeError(Exception):
    """A failure with a stable, registered code.

    ``str(error)`` is one line: ``CODE: cause [detail]. Next: action``. Raising with an unregistered code fails
    loudly at the raise site, so every code that can reach a user is documented.
    """

    def __init__(self, code: str, detail: str = "") -> None:
        self.error = lookup(code)
        self.code = code
        self.detail = detail
        super().__init__(self.render())

    @property
    def retryable(self) -> bool:
        """Whether a later try of the same task can succeed unchanged (the registry decides, per code)."""
        return self.error.retryable

    def render(self) -> str:
        detail = f" [{self.detail}]" if self.detail else ""
        return f"{self.code}: {self.error.cause}{detail}. Next: {self.error.action}"

    def as_dict(self) -> dict[str, str]:
        """Structured form for stderr JSON and XCom."""
        return {"code": self.code, "cause": self.error.cause, "detail": self.detail, "action": self.error.action}


__all__ = ["REGISTRY", "DponeError", "ErrorCode", "lookup"]
